// Job CPU calibration for the performance model (`tamp model --calibration_job`): runs the
// job itself, briefly, and measures what its processes really burn.
//
// The model counts the CPU of each part it can measure alone: compute, codecs, optimizer,
// apply, and gRPC's cost per message and byte from a loopback probe. The processes of a
// job also pay what no part shows alone (wake-ups and context switches on every answer,
// processes contending for caches and memory bandwidth), and they do not keep every core
// busy all the time. MeasureJobCpu() runs a config on this machine, servers and workers on
// loopback with no shaping, once short and once longer; FitJobCpu() turns such
// measurements of two configs that move different byte counts into a
// perf::JobCpuCalibration: CPU per step and per payload byte beyond what the model counts,
// and the share of the usable cores the jobs kept busy.
#ifndef TAMP_TOOLS_TAMP_JOB_CALIBRATION_H_
#define TAMP_TOOLS_TAMP_JOB_CALIBRATION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "tools/tamp/perf_model.h"

namespace tamp::launcher {

// What one config's calibration runs measured.
struct JobCpuSample {
  double cpu_ms_per_step = 0;  // User + sys of every server and worker process.
  double step_ms = 0;          // Median step of the longer run (its first steps left out).
};

// MeasureJobCpu()
//
// Runs `config` for `short_steps` and then `long_steps` steps (RunJob(), the binaries
// given, a fresh run directory removed afterwards; no evaluation but a small final one, no
// checkpoints) and returns the CPU time of its processes per step: the difference of the
// two runs over the difference of their steps, so start-up and the final evaluation
// cancel. INVALID_ARGUMENT when the config names remote servers (cluster.server_addresses)
// or long_steps <= short_steps; INTERNAL naming the run directory when a run fails.
absl::StatusOr<JobCpuSample> MeasureJobCpu(const config::RunConfig& config,
                                           const std::string& server_binary,
                                           const std::string& worker_binary, int short_steps,
                                           int long_steps);

// One calibrated config: what its runs measured, and what the model counts for it.
struct CalibrationRun {
  JobCpuSample measured;
  double counted_cpu_ms = 0;  // perf::CpuWorkMs() of the config, without calibration.
  double payload_bytes = 0;   // perf::PayloadBytesPerStep() of the config.
};

// FitJobCpu()
//
// The CPU the model misses, measured minus counted, as a + b x payload bytes: through the
// two runs when their bytes differ (b from the difference), else a constant; a and b are
// kept >= 0. Core utilisation: the largest measured CPU per step over (usable_cores x
// step), in [0.05, 1] (1 without step times); the job whose cores were busiest shows what
// sharing them allows. Payload rate: the largest payload_bytes over step.
perf::JobCpuCalibration FitJobCpu(const std::vector<CalibrationRun>& runs, int usable_cores);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_JOB_CALIBRATION_H_
