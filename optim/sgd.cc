#include "optim/sgd.h"

#include <type_traits>

#include "glog/logging.h"

namespace tamp {

Sgd::Sgd(const config::Optimizer& spec, size_t num_elements)
    : momentum_(spec.momentum()),
      nesterov_(spec.nesterov()),
      weight_decay_(spec.weight_decay()),
      // Plain SGD keeps no state; a zero buffer makes step 0 give buf = g, as PyTorch's
      // lazily cloned buffer does.
      buffer_(momentum_ != 0.0f ? num_elements : 0, 0.0f) {}

namespace {

// One SGD pass, specialised on the rule's switches so that the loop has no branch and
// vectorises (`restrict`: the four arrays never overlap).
template <bool kMomentum, bool kNesterov, bool kDelta>
void SgdPass(size_t n, float* __restrict weights, const float* __restrict gradient,
             float* __restrict buffer, float* __restrict delta, float momentum,
             float weight_decay, float learning_rate) {
  for (size_t i = 0; i < n; ++i) {
    const float w = weights[i];
    float d = gradient[i] + weight_decay * w;
    if constexpr (kMomentum) {
      buffer[i] = momentum * buffer[i] + d;
      d = kNesterov ? d + momentum * buffer[i] : buffer[i];
    }
    const float next = w - learning_rate * d;
    weights[i] = next;
    if constexpr (kDelta) delta[i] = next - w;
  }
}

}  // namespace

void Sgd::Apply(absl::Span<float> weights, absl::Span<const float> gradient, int64_t /*step*/,
                float learning_rate, absl::Span<float> delta) {
  CHECK_EQ(weights.size(), gradient.size());
  CHECK(buffer_.empty() || buffer_.size() == weights.size());
  CHECK(delta.empty() || delta.size() == weights.size());
  const size_t n = weights.size();
  float* const buffer = buffer_.data();
  auto pass = [&](auto momentum, auto nesterov, auto with_delta) {
    SgdPass<decltype(momentum)::value, decltype(nesterov)::value, decltype(with_delta)::value>(
        n, weights.data(), gradient.data(), buffer, delta.data(), momentum_, weight_decay_,
        learning_rate);
  };
  using Yes = std::true_type;
  using No = std::false_type;
  const bool momentum = !buffer_.empty();
  if (!delta.empty()) {
    if (!momentum) return pass(No{}, No{}, Yes{});
    return nesterov_ ? pass(Yes{}, Yes{}, Yes{}) : pass(Yes{}, No{}, Yes{});
  }
  if (!momentum) return pass(No{}, No{}, No{});
  nesterov_ ? pass(Yes{}, Yes{}, No{}) : pass(Yes{}, No{}, No{});
}

}  // namespace tamp
