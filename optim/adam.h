// "adam": torch.optim.Adam (amsgrad off), with weight decay as an L2 penalty on the gradient
// (not AdamW's decoupled decay: the penalty is rescaled by the second moment like the rest of
// the gradient). With t = step + 1 (step: updates applied before this one, so t is 1 first):
//
//   g  = gradient + weight_decay * w
//   m  = beta1 * m + (1 - beta1) * g               (m, v start at 0)
//   v  = beta2 * v + (1 - beta2) * g^2
//   w -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + epsilon)
//
// The bias corrections 1 - beta^t undo the zero start of m and v: with a constant gradient
// every step moves w by lr * g / (|g| + epsilon), from the first step on.
//
// State: m and v, two floats per element. beta1, beta2 and epsilon default to 0.9, 0.999 and
// 1e-8 when absent from the spec. Create it through CreateOptimizer() (optim/optimizer.h),
// which validates the spec.
#ifndef TAMP_OPTIM_ADAM_H_
#define TAMP_OPTIM_ADAM_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "optim/optimizer.h"
#include "proto/config.pb.h"

namespace tamp {

inline constexpr float kAdamDefaultBeta1 = 0.9f;
inline constexpr float kAdamDefaultBeta2 = 0.999f;
inline constexpr float kAdamDefaultEpsilon = 1e-8f;

class Adam final : public Optimizer {
 public:
  // `spec` must be valid (ValidateOptimizerSpec) and name "adam".
  Adam(const config::Optimizer& spec, size_t num_elements);

  // Uses `step` for the bias corrections (t = step + 1).
  using Optimizer::Apply;
  void Apply(absl::Span<float> weights, absl::Span<const float> gradient, int64_t step,
             float learning_rate, absl::Span<float> delta, DeltaMode delta_mode) override;
  std::vector<absl::Span<float>> StateBuffers() override {
    return {absl::MakeSpan(m_), absl::MakeSpan(v_)};
  }

 private:
  const float beta1_;
  const float beta2_;
  const float epsilon_;
  const float weight_decay_;
  std::vector<float> m_;  // First moment estimate.
  std::vector<float> v_;  // Second moment estimate.
};

}  // namespace tamp

#endif  // TAMP_OPTIM_ADAM_H_
