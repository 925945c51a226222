// Optimizers applied per chunk: the server owns one per chunk of its shard (and workers may
// own one per chunk for local steps).
//
// An Optimizer owns the per-chunk state its rule needs (e.g. SGD's momentum buffer), sized
// for `num_elements` at creation, so a chunk's trajectory depends only on the gradients it
// is given. Not thread-safe: the owner serialises calls (the server holds the chunk's lock).
//
// "sgd" follows torch.optim.SGD with dampening 0:
//   g   = gradient + weight_decay * w             (L2 penalty folded into the gradient)
//   buf = momentum * buf + g                       (buf starts at 0, so step 0 gives buf = g)
//   d   = nesterov ? g + momentum * buf : buf      (d = g when momentum == 0)
//   w  -= learning_rate * d
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto opt, CreateOptimizer(config.optimizer(), chunk.length));
//   opt->Apply(weights, mean_gradient, step);
#ifndef TAMP_OPTIM_OPTIMIZER_H_
#define TAMP_OPTIM_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

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
  // One update of `weights` from `gradient` (both num_elements values). `step` counts the
  // updates applied before this one (0 first); rules with schedules or bias correction use
  // it, plain SGD does not.
  virtual void Apply(absl::Span<float> weights, absl::Span<const float> gradient, int64_t step) = 0;
};

// Checks name and hyper-parameters; errors name the field, e.g.
//   "optimizer.name: unknown optimizer 'adamw' (known: sgd)"
//   "optimizer.learning_rate: must be > 0, got 0"
absl::Status ValidateOptimizerSpec(const config::Optimizer& spec);

// Validates `spec`, then creates an optimizer for chunks of `num_elements` values.
absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const config::Optimizer& spec,
                                                           size_t num_elements);

}  // namespace tamp

#endif  // TAMP_OPTIM_OPTIMIZER_H_
