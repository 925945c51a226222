// Options of `tamp model` and their command-line parsing.
#ifndef TAMP_TOOLS_TAMP_MODEL_OPTIONS_H_
#define TAMP_TOOLS_TAMP_MODEL_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/tamp/perf_model.h"

namespace tamp::launcher {

struct ModelOptions {
  std::string config_path;
  perf::Link link;
  perf::Topology topology = perf::Topology::kShared;
  bool topology_given = false;
  // false: the config's own compression; true: its push codec swapped for each codec's
  // example spec (`tamp codecs`), keeping the config's pull codec and memories. Either way
  // the first row is "none": the job with no compression at all, the speedups' reference.
  bool all_codecs = false;
  bool json = false;
  // Plan compression.automatic (tools/tamp/auto_command.h) and print the plan; --bandwidth
  // and --topology default to the block's own.
  bool auto_plan = false;
  // With auto_plan: also write the resolved config there (what `tamp run` runs), for jobs a
  // cluster engine starts (Slurm, Kubernetes, bench/scaling.sh's emulated hosts).
  std::string write_config;
  // Replaces the measured forward/backward time (ms), keeping the measured tensor order.
  std::optional<double> compute_ms;
  // Replace perf::FittedTransport()'s latency and throughput ceiling.
  std::optional<double> latency_ms;
  std::optional<double> transport_gbit;
  // Cores the job's processes share; without it, the CPUs this process may run on.
  std::optional<int> cores;
  // Calibrate the CPU bound with short runs of the job itself (tools/tamp/job_calibration.h):
  // the config and its uncompressed twin, on loopback; needs tamp_server and tamp_worker
  // (found as `tamp run` finds them) and the data set.
  bool calibration_job = false;
  // A calibration given instead of measured: what --calibration_job --json printed as
  // job_cpu (--job_cpu=MS_PER_STEP,MS_PER_BYTE,CORE_UTILIZATION,PAYLOAD_BYTES_PER_MS), to
  // reuse it across links.
  std::optional<perf::JobCpuCalibration> job_cpu;
};

// ParseModelArgs()
//
// The arguments after "model": one CONFIG, --bandwidth RATE (required; perf::ParseBandwidth),
// --topology shared|hosts (perf::ParseTopology; default shared), --codecs all|config, --json,
// --compute_ms MS, --latency_ms MS, --transport_gbit GBIT, --cores N, --calibration_job, --auto
// (then --bandwidth is optional),
// --job_cpu A,B,U,R (not with --calibration_job); each as --flag=VALUE or --flag VALUE
// (tools/tamp/command_line.h; --json, --calibration_job and --auto take none).
// INVALID_ARGUMENT with a one-line reason naming the flag and the value otherwise.
absl::StatusOr<ModelOptions> ParseModelArgs(const std::vector<std::string>& args);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_MODEL_OPTIONS_H_
