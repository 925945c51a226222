#include "optim/optimizer.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace tamp {
namespace {

// torch.optim.SGD with dampening 0; see optimizer.h for the update rule.
class Sgd final : public Optimizer {
 public:
  Sgd(const config::Optimizer& spec, size_t num_elements)
      : lr_(spec.learning_rate()),
        momentum_(spec.momentum()),
        nesterov_(spec.nesterov()),
        weight_decay_(spec.weight_decay()),
        // Plain SGD keeps no state; a zero buffer makes step 0 give buf = g, as PyTorch's
        // lazily cloned buffer does.
        buffer_(momentum_ != 0.0f ? num_elements : 0, 0.0f) {}

  void Apply(absl::Span<float> weights, absl::Span<const float> gradient,
             int64_t /*step*/) override {
    CHECK_EQ(weights.size(), gradient.size());
    CHECK(buffer_.empty() || buffer_.size() == weights.size());
    for (size_t i = 0; i < weights.size(); ++i) {
      float d = gradient[i] + weight_decay_ * weights[i];
      if (!buffer_.empty()) {
        buffer_[i] = momentum_ * buffer_[i] + d;
        d = nesterov_ ? d + momentum_ * buffer_[i] : buffer_[i];
      }
      weights[i] -= lr_ * d;
    }
  }

 private:
  const float lr_;
  const float momentum_;
  const bool nesterov_;
  const float weight_decay_;
  std::vector<float> buffer_;  // Momentum; empty when momentum == 0.
};

}  // namespace

Optimizer::~Optimizer() = default;

absl::Status ValidateOptimizerSpec(const config::Optimizer& spec) {
  if (spec.name() != "sgd") {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.name: unknown optimizer '", spec.name(), "' (known: sgd)"));
  }
  // Written as !(x > 0) etc. so NaN fails too.
  if (!(spec.learning_rate() > 0.0f) || !std::isfinite(spec.learning_rate())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.learning_rate: must be > 0 and finite, got ", spec.learning_rate()));
  }
  // momentum >= 1 makes the buffer grow without bound.
  if (!(spec.momentum() >= 0.0f && spec.momentum() < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.momentum: must be in [0, 1), got ", spec.momentum()));
  }
  if (spec.nesterov() && spec.momentum() == 0.0f) {
    return absl::InvalidArgumentError("optimizer.nesterov: requires momentum > 0");
  }
  if (!(spec.weight_decay() >= 0.0f) || !std::isfinite(spec.weight_decay())) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.weight_decay: must be >= 0 and finite, got ", spec.weight_decay()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const config::Optimizer& spec,
                                                           size_t num_elements) {
  TAMP_RETURN_IF_ERROR(ValidateOptimizerSpec(spec));
  return std::make_unique<Sgd>(spec, num_elements);
}

}  // namespace tamp
