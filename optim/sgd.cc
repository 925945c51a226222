#include "optim/sgd.h"

#include "glog/logging.h"

namespace tamp {

Sgd::Sgd(const config::Optimizer& spec, size_t num_elements)
    : momentum_(spec.momentum()),
      nesterov_(spec.nesterov()),
      weight_decay_(spec.weight_decay()),
      // Plain SGD keeps no state; a zero buffer makes step 0 give buf = g, as PyTorch's
      // lazily cloned buffer does.
      buffer_(momentum_ != 0.0f ? num_elements : 0, 0.0f) {}

void Sgd::Apply(absl::Span<float> weights, absl::Span<const float> gradient, int64_t /*step*/,
                float learning_rate) {
  CHECK_EQ(weights.size(), gradient.size());
  CHECK(buffer_.empty() || buffer_.size() == weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    float d = gradient[i] + weight_decay_ * weights[i];
    if (!buffer_.empty()) {
      buffer_[i] = momentum_ * buffer_[i] + d;
      d = nesterov_ ? d + momentum_ * buffer_[i] : buffer_[i];
    }
    weights[i] -= learning_rate * d;
  }
}

}  // namespace tamp
