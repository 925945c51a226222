// Optimizers applied per chunk: the server owns one per chunk of its shard (and workers may
// own one per chunk for local steps).
//
// An Optimizer owns the per-chunk state its rule needs (e.g. SGD's momentum buffer, Adam's
// moment estimates), sized for `num_elements` at creation, so a chunk's trajectory depends
// only on the gradients and learning rates it is given. Not thread-safe: the owner serialises
// calls (the server holds the chunk's lock).
//
// Rules, one class each: "sgd" (optim/sgd.h, torch.optim.SGD) and "adam" (optim/adam.h,
// torch.optim.Adam). The learning rate of each step comes from the schedule
// (optim/schedule.h), which the caller evaluates.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto opt, CreateOptimizer(config.optimizer(), chunk.length));
//   const double lr = LearningRate(config.optimizer(), step, steps_per_epoch, total_steps);
//   opt->Apply(weights, mean_gradient, step, static_cast<float>(lr));
#ifndef TAMP_OPTIM_OPTIMIZER_H_
#define TAMP_OPTIM_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/config.pb.h"

namespace tamp {

class Optimizer {
 public:
  virtual ~Optimizer();

  // Optimizer::Apply()
  //
  // One update of `weights` from `gradient` (both num_elements values) at rate
  // `learning_rate` (the schedule's rate for this step). `step` counts the updates applied
  // before this one (0 first); rules with bias correction (adam) use it, SGD does not.
  // `delta`, unless empty (then num_elements values), receives w_new - w_old, the fp32
  // subtraction of each weight's two values: what the server sends through the pull codec,
  // computed in the update's own pass instead of a copy before it and a pass after. With
  // DeltaMode::kAdd it is added to what `delta` holds, delta = (w_new - w_old) + delta, so
  // the server can add the update straight into its pull residual (ErrorFeedback::AddTarget()).
  enum class DeltaMode { kStore, kAdd };
  virtual void Apply(absl::Span<float> weights, absl::Span<const float> gradient, int64_t step,
                     float learning_rate, absl::Span<float> delta, DeltaMode delta_mode) = 0;
  void Apply(absl::Span<float> weights, absl::Span<const float> gradient, int64_t step,
             float learning_rate, absl::Span<float> delta) {
    Apply(weights, gradient, step, learning_rate, delta, DeltaMode::kStore);
  }
  void Apply(absl::Span<float> weights, absl::Span<const float> gradient, int64_t step,
             float learning_rate) {
    Apply(weights, gradient, step, learning_rate, {}, DeltaMode::kStore);
  }

  // Optimizer::KeepsZeroGradientWeights()
  //
  // True where a weight whose gradient is zero keeps its value and the rule keeps no state
  // (sgd without momentum or weight decay: DGC's server, whose momentum is the workers'), so
  // that a gradient that is zero outside a few entries moves only those: ApplySparse().
  virtual bool KeepsZeroGradientWeights() const { return false; }

  // Optimizer::ApplySparse()
  //
  // Apply(weights, gradient, step, learning_rate, delta, DeltaMode::kAdd) of a gradient that
  // is values[j] at indices[j] (distinct, any order) and zero elsewhere, in O(indices): those
  // weights move, and their w_new - w_old is added into `delta`, bit for bit as Apply() does;
  // the others keep their value and their delta (Apply() adds +0 there, which differs only on
  // a -0 delta, and turns a non-finite weight into NaN). Only where KeepsZeroGradientWeights()
  // (CHECK).
  virtual void ApplySparse(absl::Span<float> weights, absl::Span<const size_t> indices,
                           absl::Span<const float> values, float learning_rate,
                           absl::Span<float> delta);

  // Optimizer::StateBuffers()
  //
  // The rule's state (sgd: the momentum buffer; adam: m, v), each num_elements values or
  // empty when the rule keeps none, always the same count and order for one spec; writable,
  // so that a checkpoint can save and restore it. Valid while the optimizer lives.
  virtual std::vector<absl::Span<float>> StateBuffers() = 0;
};

// Checks name, hyper-parameters and schedule (ValidateSchedule); errors name the field, e.g.
//   "optimizer.name: unknown optimizer 'adamw' (known: sgd, adam)"
//   "optimizer.learning_rate: must be > 0 and finite, got 0"
//   "optimizer.beta1: not used by sgd (only by adam)"
absl::Status ValidateOptimizerSpec(const config::Optimizer& spec);

// Validates `spec`, then creates an optimizer for chunks of `num_elements` values.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const config::Optimizer& spec,
                                                           size_t num_elements);

}  // namespace tamp

#endif  // TAMP_OPTIM_OPTIMIZER_H_
