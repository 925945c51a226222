#include "optim/optimizer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "optim/adam.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

namespace tamp {
namespace {

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("optimizer.", field, ": ", problem));
}

// A hyper-parameter of one rule set for another.
absl::Status NotUsed(absl::string_view field, absl::string_view name) {
  return FieldError(field, absl::StrCat("not used by ", name));
}

// Written as !(x >= 0 && x < 1) etc. so NaN fails too.
absl::Status CheckBeta(absl::string_view field, float beta) {
  if (beta >= 0.0f && beta < 1.0f) return absl::OkStatus();
  return FieldError(field, absl::StrCat("must be in [0, 1), got ", beta));
}

absl::Status ValidateSgd(const config::Optimizer& spec) {
  if (spec.has_beta1()) return NotUsed("beta1", "sgd (only by adam)");
  if (spec.has_beta2()) return NotUsed("beta2", "sgd (only by adam)");
  if (spec.has_epsilon()) return NotUsed("epsilon", "sgd (only by adam)");
  // momentum >= 1 makes the buffer grow without bound.
  if (!(spec.momentum() >= 0.0f && spec.momentum() < 1.0f)) {
    return FieldError("momentum", absl::StrCat("must be in [0, 1), got ", spec.momentum()));
  }
  if (spec.nesterov() && spec.momentum() == 0.0f) {
    return FieldError("nesterov", "requires momentum > 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateAdam(const config::Optimizer& spec) {
  if (spec.momentum() != 0.0f) return NotUsed("momentum", "adam (its moments use beta1, beta2)");
  if (spec.nesterov()) return NotUsed("nesterov", "adam");
  if (spec.has_beta1()) TAMP_RETURN_IF_ERROR(CheckBeta("beta1", spec.beta1()));
  if (spec.has_beta2()) TAMP_RETURN_IF_ERROR(CheckBeta("beta2", spec.beta2()));
  if (spec.has_epsilon() && (!(spec.epsilon() > 0.0f) || !std::isfinite(spec.epsilon()))) {
    return FieldError("epsilon", absl::StrCat("must be > 0 and finite, got ", spec.epsilon()));
  }
  return absl::OkStatus();
}

}  // namespace

Optimizer::~Optimizer() = default;

void Optimizer::ApplySparse(absl::Span<float>, absl::Span<const size_t>, absl::Span<const float>,
                            float, absl::Span<float>) {
  LOG(FATAL) << "Optimizer::ApplySparse() of a rule that moves zero-gradient weights: check "
                "KeepsZeroGradientWeights() first";
}

absl::Status ValidateOptimizerSpec(const config::Optimizer& spec) {
  if (spec.name() != "sgd" && spec.name() != "adam") {
    return FieldError("name",
                      absl::StrCat("unknown optimizer '", spec.name(), "' (known: sgd, adam)"));
  }
  // Written as !(x > 0) etc. so NaN fails too.
  if (!(spec.learning_rate() > 0.0f) || !std::isfinite(spec.learning_rate())) {
    return FieldError("learning_rate",
                      absl::StrCat("must be > 0 and finite, got ", spec.learning_rate()));
  }
  TAMP_RETURN_IF_ERROR(spec.name() == "sgd" ? ValidateSgd(spec) : ValidateAdam(spec));
  if (!(spec.weight_decay() >= 0.0f) || !std::isfinite(spec.weight_decay())) {
    return FieldError("weight_decay",
                      absl::StrCat("must be >= 0 and finite, got ", spec.weight_decay()));
  }
  return ValidateSchedule(spec);
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const config::Optimizer& spec,
                                                           size_t num_elements) {
  TAMP_RETURN_IF_ERROR(ValidateOptimizerSpec(spec));
  if (spec.name() == "adam") return std::make_unique<Adam>(spec, num_elements);
  return std::make_unique<Sgd>(spec, num_elements);
}

}  // namespace tamp
