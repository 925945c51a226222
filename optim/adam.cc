#include "optim/adam.h"

#include <cmath>

#include "glog/logging.h"

namespace tamp {

Adam::Adam(const config::Optimizer& spec, size_t num_elements)
    : beta1_(spec.has_beta1() ? spec.beta1() : kAdamDefaultBeta1),
      beta2_(spec.has_beta2() ? spec.beta2() : kAdamDefaultBeta2),
      epsilon_(spec.has_epsilon() ? spec.epsilon() : kAdamDefaultEpsilon),
      weight_decay_(spec.weight_decay()),
      m_(num_elements, 0.0f),
      v_(num_elements, 0.0f) {}

void Adam::Apply(absl::Span<float> weights, absl::Span<const float> gradient, int64_t step,
                 float learning_rate, absl::Span<float> delta, DeltaMode delta_mode) {
  CHECK_EQ(weights.size(), gradient.size());
  CHECK(delta.empty() || delta.size() == weights.size());
  CHECK_EQ(weights.size(), m_.size());
  CHECK_GE(step, 0);
  // The per-step scalars in double, as PyTorch computes them in Python floats.
  const double t = static_cast<double>(step) + 1;
  const double correction1 = 1 - std::pow(static_cast<double>(beta1_), t);
  const double correction2 = 1 - std::pow(static_cast<double>(beta2_), t);
  const float step_size = static_cast<float>(learning_rate / correction1);
  const float correction2_sqrt = static_cast<float>(std::sqrt(correction2));
  const float one_minus_beta1 = static_cast<float>(1 - static_cast<double>(beta1_));
  const float one_minus_beta2 = static_cast<float>(1 - static_cast<double>(beta2_));
  for (size_t i = 0; i < weights.size(); ++i) {
    const float g = gradient[i] + weight_decay_ * weights[i];
    m_[i] = beta1_ * m_[i] + one_minus_beta1 * g;
    v_[i] = beta2_ * v_[i] + one_minus_beta2 * g * g;
    const float denominator = std::sqrt(v_[i]) / correction2_sqrt + epsilon_;
    const float w = weights[i];
    weights[i] = w - step_size * m_[i] / denominator;
    if (delta.empty()) continue;
    const float moved = weights[i] - w;
    delta[i] = delta_mode == DeltaMode::kAdd ? moved + delta[i] : moved;
  }
}

}  // namespace tamp
