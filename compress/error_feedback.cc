#include "compress/error_feedback.h"

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace tamp::compress {

absl::StatusOr<std::unique_ptr<ErrorFeedback>> ErrorFeedback::Create(
    const config::ErrorFeedback& spec, size_t num_elements) {
  // proto3 enums are open: a config or peer may carry a kind this build does not know.
  if (!config::ErrorFeedback::Kind_IsValid(spec.kind())) {
    return absl::InvalidArgumentError(
        absl::StrCat("error feedback kind ", spec.kind(), " is not supported"));
  }
  return absl::WrapUnique(new ErrorFeedback(spec.kind(), num_elements));
}

ErrorFeedback::ErrorFeedback(config::ErrorFeedback::Kind kind, size_t num_elements) : kind_(kind) {
  if (kind_ == config::ErrorFeedback::RESIDUAL) {
    residual_.assign(num_elements, 0.0f);
    compensated_.resize(num_elements);
    decoded_.resize(num_elements);
  }
}

absl::Status ErrorFeedback::Compress(Codec& codec, absl::Span<const float> input,
                                     const RandomKey& key, std::string* payload) {
  if (kind_ == config::ErrorFeedback::NONE) return codec.Encode(input, key, payload);

  CHECK_EQ(input.size(), residual_.size());
  CHECK_EQ(codec.size(), residual_.size());
  for (size_t i = 0; i < input.size(); ++i) compensated_[i] = input[i] + residual_[i];
  TAMP_RETURN_IF_ERROR(codec.Encode(compensated_, key, payload));
  // Decoding our own payload is what the receiver will do, so the residual holds exactly
  // what it will not see.
  TAMP_RETURN_IF_ERROR(codec.Decode(*payload, key, absl::MakeSpan(decoded_)));
  for (size_t i = 0; i < residual_.size(); ++i) residual_[i] = compensated_[i] - decoded_[i];
  return absl::OkStatus();
}

}  // namespace tamp::compress
