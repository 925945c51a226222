// `auto` compression (compression.automatic, docs/auto.md): chooses each tensor's compression
// from the candidates the user allows, to minimise the step time the performance model
// (tools/tamp/perf_model.h) predicts, and writes the choice out as tensor overrides.
//
// Search: first every tensor on each candidate in turn (the best uniform plan; on a tie, to
// within kTieMs, the earlier candidate), then one pass over the tensors, largest first,
// moving each to the candidate that lowers the predicted step most (an earlier candidate
// is taken when no worse, a later one only when better by more than kTieMs). So the
// search's plan is never predicted slower than the best uniform one, and a tensor keeps the
// simplest candidate where another does not pay. The tensors below kSmallTensorBytes (biases and
// norms: 106 of ResNet-50's 161) move as one group, last: one at a time they change the
// prediction by less than its precision, and the group keeps the decision inside its
// budget (bench/auto_plan_bench.cc). Tensors whose chunks cost the same under every
// candidate (all below min_compress_bytes: raw anyway) are not tried.
//
// Last, the search's plan is kept only where it saves at least min_gain of the step with
// every tensor on the first candidate (the simplest: "none"); the model's error and the
// run-to-run spread are larger than a smaller gain (Agarwal et al.: compression that is
// predicted to pay a little often does not).
//
// Thread safety: free functions without shared state. Example:
//   TAMP_RETURN_IF_ERROR(CheckCandidates(config.compression()));
//   ... costs[c] = perf::MeasureChunkCosts(CandidateConfig(config, c), ...) ...
//   TAMP_ASSIGN_OR_RETURN(CompressionPlan plan, PlanCompression(base_inputs, costs, 0.05));
//   config::RunConfig resolved = ApplyPlan(config, layout, plan);
#ifndef TAMP_TOOLS_TAMP_AUTO_PLAN_H_
#define TAMP_TOOLS_TAMP_AUTO_PLAN_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "job/job_layout.h"
#include "proto/config.pb.h"
#include "tools/tamp/perf_model.h"

namespace tamp::launcher {

inline constexpr double kTieMs = 1e-3;
inline constexpr uint64_t kSmallTensorBytes = 64 << 10;  // fp32 bytes.
// The most test accuracy (absolute, 0.01 = 1 point) a candidate may lose against "none" in
// any convergence-table row that measured it.
inline constexpr double kMaxAccuracyLoss = 0.01;

// CheckCandidates()
//
// compression.automatic's candidates against the convergence table
// (tools/tamp/convergence_table.h): each must be "none" both ways without memory, or equal a
// measured row's compression and lose at most kMaxAccuracyLoss in every row that measured
// it. Also refuses shard_overrides and tensor_overrides next to it (the plan writes the
// overrides). INVALID_ARGUMENT naming the candidate and the row otherwise.
absl::Status CheckCandidates(const config::Compression& compression);

// CandidateConfig()
//
// `config` with candidate `index` as the default compression and automatic cleared: the
// config whose chunk costs (perf::MeasureChunkCosts) the plan compares.
config::RunConfig CandidateConfig(const config::RunConfig& config, int index);

// CompressionPlan
struct CompressionPlan {
  std::vector<int> tensor_candidate;  // By tensor: the chosen candidate's index.
  perf::StepPrediction prediction;    // Of the plan.
  std::vector<double> uniform_ms;     // By candidate: every tensor on it.
  int predictions = 0;                // perf::PredictStep calls the search made.
  // The search's best plan saved less than min_gain of candidate 0's step, so every tensor
  // stays on candidate 0; searched_ms is what that plan was predicted to take.
  bool below_min_gain = false;
  double searched_ms = 0;
};

// PlanCompression()
//
// `base` is the job's inputs without chunks; costs[c] the chunk costs with candidate c (one
// per chunk, in chunk order, as perf::MeasureChunkCosts returns them). The search's plan is
// kept only if predicted at most (1 - min_gain) x the step with every tensor on candidate
// 0; otherwise every tensor stays there (compression.automatic.min_gain). INVALID_ARGUMENT
// if there are no candidates, their chunk lists differ in length or tensors, or min_gain is
// outside [0, 1).
absl::StatusOr<CompressionPlan> PlanCompression(
    const perf::StepInputs& base, const std::vector<std::vector<perf::ChunkCost>>& costs,
    double min_gain);

// OverrideTensor()
//
// Appends to `config` a tensor override sending tensor `name` (its exact name as the
// pattern) with `compression`, every part named (an override replaces the default whole).
void OverrideTensor(const std::string& name, const config::ChunkCompression& compression,
                    config::RunConfig* config);

// ApplyPlan()
//
// `config` with automatic cleared, the most chosen candidate as default_compression and a
// tensor override (the exact name) for every tensor on another one.
config::RunConfig ApplyPlan(const config::RunConfig& config, const JobLayout& layout,
                            const CompressionPlan& plan);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_AUTO_PLAN_H_
