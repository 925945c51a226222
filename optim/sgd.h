// "sgd": torch.optim.SGD with dampening 0.
//
//   g   = gradient + weight_decay * w             (L2 penalty folded into the gradient)
//   buf = momentum * buf + g                       (buf starts at 0, so step 0 gives buf = g)
//   d   = nesterov ? g + momentum * buf : buf      (d = g when momentum == 0)
//   w  -= lr * d                                   (lr: the step's rate from the schedule)
//
// State: the momentum buffer (none when momentum == 0). Create it through CreateOptimizer()
// (optim/optimizer.h), which validates the spec.
#ifndef TAMP_OPTIM_SGD_H_
#define TAMP_OPTIM_SGD_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "optim/optimizer.h"
#include "proto/config.pb.h"

namespace tamp {

class Sgd final : public Optimizer {
 public:
  // `spec` must be valid (ValidateOptimizerSpec) and name "sgd".
  Sgd(const config::Optimizer& spec, size_t num_elements);

  using Optimizer::Apply;
  void Apply(absl::Span<float> weights, absl::Span<const float> gradient, int64_t step,
             float learning_rate, absl::Span<float> delta, DeltaMode delta_mode) override;
  // Without momentum and weight decay: w -= lr * g moves nothing where g is zero.
  bool KeepsZeroGradientWeights() const override {
    return buffer_.empty() && weight_decay_ == 0.0f;
  }
  void ApplySparse(absl::Span<float> weights, absl::Span<const size_t> indices,
                   absl::Span<const float> values, float learning_rate,
                   absl::Span<float> delta) override;
  std::vector<absl::Span<float>> StateBuffers() override { return {absl::MakeSpan(buffer_)}; }

 private:
  const float momentum_;
  const bool nesterov_;
  const float weight_decay_;
  std::vector<float> buffer_;  // Momentum; empty when momentum == 0.
};

}  // namespace tamp

#endif  // TAMP_OPTIM_SGD_H_
