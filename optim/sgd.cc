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

// What an SGD pass does with w_new - w_old.
enum class DeltaWrite { kNone, kStore, kAdd };

// One SGD pass, specialised on the rule's switches so that the loop has no branch and
// vectorises (`restrict`: the four arrays never overlap).
template <bool kMomentum, bool kNesterov, DeltaWrite kDelta>
void SgdPass(size_t n, float* __restrict weights, const float* __restrict gradient,
             float* __restrict buffer, float* __restrict delta, float momentum, float weight_decay,
             float learning_rate) {
  for (size_t i = 0; i < n; ++i) {
    const float w = weights[i];
    float d = gradient[i] + weight_decay * w;
    if constexpr (kMomentum) {
      buffer[i] = momentum * buffer[i] + d;
      d = kNesterov ? d + momentum * buffer[i] : buffer[i];
    }
    const float next = w - learning_rate * d;
    weights[i] = next;
    if constexpr (kDelta == DeltaWrite::kStore) delta[i] = next - w;
    if constexpr (kDelta == DeltaWrite::kAdd) delta[i] = (next - w) + delta[i];
  }
}

// SgdPass<false, false, DeltaWrite::kAdd> at the given entries: the same expressions, so
// the same bits (weight_decay is 0 here, as in that pass's 0 * w, kept for those bits).
void SgdPassAt(absl::Span<const size_t> indices, const float* values, float* weights,
               float* delta, float weight_decay, float learning_rate) {
  for (size_t j = 0; j < indices.size(); ++j) {
    const size_t i = indices[j];
    const float w = weights[i];
    const float d = values[j] + weight_decay * w;
    const float next = w - learning_rate * d;
    weights[i] = next;
    delta[i] = (next - w) + delta[i];
  }
}

template <DeltaWrite kDelta>
using DeltaTag = std::integral_constant<DeltaWrite, kDelta>;

}  // namespace

void Sgd::Apply(absl::Span<float> weights, absl::Span<const float> gradient, int64_t /*step*/,
                float learning_rate, absl::Span<float> delta, DeltaMode delta_mode) {
  CHECK_EQ(weights.size(), gradient.size());
  CHECK(buffer_.empty() || buffer_.size() == weights.size());
  CHECK(delta.empty() || delta.size() == weights.size());
  const size_t n = weights.size();
  float* const buffer = buffer_.data();
  auto pass = [&](auto momentum, auto nesterov, auto delta_write) {
    SgdPass<decltype(momentum)::value, decltype(nesterov)::value, decltype(delta_write)::value>(
        n, weights.data(), gradient.data(), buffer, delta.data(), momentum_, weight_decay_,
        learning_rate);
  };
  auto with_delta = [&](auto delta_write) {
    using Yes = std::true_type;
    using No = std::false_type;
    if (buffer_.empty()) return pass(No{}, No{}, delta_write);
    nesterov_ ? pass(Yes{}, Yes{}, delta_write) : pass(Yes{}, No{}, delta_write);
  };
  if (delta.empty()) return with_delta(DeltaTag<DeltaWrite::kNone>{});
  if (delta_mode == DeltaMode::kAdd) return with_delta(DeltaTag<DeltaWrite::kAdd>{});
  with_delta(DeltaTag<DeltaWrite::kStore>{});
}

void Sgd::ApplySparse(absl::Span<float> weights, absl::Span<const size_t> indices,
                      absl::Span<const float> values, float learning_rate,
                      absl::Span<float> delta) {
  CHECK(KeepsZeroGradientWeights()) << "Sgd::ApplySparse() with momentum or weight decay";
  CHECK_EQ(indices.size(), values.size());
  CHECK_EQ(delta.size(), weights.size());
  SgdPassAt(indices, values.data(), weights.data(), delta.data(), weight_decay_, learning_rate);
}

}  // namespace tamp
