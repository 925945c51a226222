// compression.automatic end to end: measures the job's costs here (tools/tamp/perf_calibrate.h,
// the same as `tamp model`), plans each tensor's compression (tools/tamp/auto_plan.h) and
// prints the plan. `tamp model CONFIG --auto` prints it; `tamp run` runs the resolved config.
//
// Blocking (a few seconds of measurements); not thread-safe (OpenBLAS settings, as
// perf_calibrate.h says).
#ifndef TAMP_TOOLS_TAMP_AUTO_COMMAND_H_
#define TAMP_TOOLS_TAMP_AUTO_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "job/job_layout.h"
#include "proto/config.pb.h"
#include "tools/tamp/auto_plan.h"
#include "tools/tamp/perf_model.h"

namespace tamp::launcher {

struct AutoResult {
  JobLayout layout;             // Tensors and chunks (candidate 0's compression).
  CompressionPlan plan;
  config::RunConfig resolved;   // ApplyPlan(): what the processes run.
  // Tensors a candidate's codecs cannot take (a powersgd rank above a one-row tensor's
  // rows), one line each: measured on candidate 0 in that candidate, never planned on it.
  std::vector<std::string> unfit;
  // PlanCompression()'s own time, measurements excluded: wall clock, and this thread's CPU
  // time (what the search costs, whatever else the machine runs).
  double decision_ms = 0;
  double decision_cpu_ms = 0;
};

// AutoLink(), AutoTopology()
//
// The block's bandwidth and topology (default "shared"), parsed; INVALID_ARGUMENT naming
// the field otherwise.
absl::StatusOr<perf::Link> AutoLink(const config::AutoCompression& automatic);
absl::StatusOr<perf::Topology> AutoTopology(const config::AutoCompression& automatic);

// ResolveAutomatic()
//
// For a loaded config (LoadConfigFile: defaults filled, min_gain among them) with
// compression.automatic, on `link` and `topology` with `cores` shared by the job's
// processes. A tensor a candidate's codecs cannot take (job/chunk_codecs.h) is measured on
// candidate 0 in that candidate and never planned on it (AutoResult::unfit says which);
// candidate 0 must fit every tensor. Errors: CheckCandidates()'s, and the measurements'.
absl::StatusOr<AutoResult> ResolveAutomatic(const config::RunConfig& config,
                                            const perf::Link& link, perf::Topology topology,
                                            int cores);

// FormatPlan()
//
// The predicted step of the plan against each candidate on every tensor, then one line per
// tensor: name, shape, raw MB, the candidate chosen.
std::string FormatPlan(const config::RunConfig& config, const AutoResult& result,
                       const perf::Link& link);

// WriteResolvedConfig()
//
// Writes `result.resolved` to `path` (atomically, text format) under a comment naming
// `writer`, the command that planned it: the config every server and worker of the job
// reads, whoever starts them (tamp run, or a cluster engine after `tamp model --auto
// --write_config`). Model files are absolute in it (LoadConfigFile() made them so), so
// it may live anywhere.
absl::Status WriteResolvedConfig(const AutoResult& result, const std::string& path,
                                 absl::string_view writer);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_AUTO_COMMAND_H_
