#include "compress/error_feedback.h"

#include <algorithm>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

// DGC's u = m * u + g. One function for both places it is evaluated, so they round alike.
inline float NextVelocity(float m, float u, float g) { return m * u + g; }

absl::Status NoParameter(absl::string_view field_path, config::ErrorFeedback::Kind kind,
                         absl::string_view parameter) {
  return absl::InvalidArgumentError(absl::StrCat(field_path, ".", parameter,
                                                 ": error feedback kind ",
                                                 config::ErrorFeedback::Kind_Name(kind),
                                                 " takes no parameter '", parameter, "'"));
}

// Compress() and CompressAdded() take single-round codecs only.
absl::Status SingleRound(const Codec& codec) {
  if (codec.rounds() == 1) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("codec ", CodecName(codec.id()), " takes ",
                                                    codec.rounds(),
                                                    " rounds per step: use BeginRounds()"));
}

}  // namespace

absl::Status ValidateErrorFeedbackSpec(const config::ErrorFeedback& spec,
                                       absl::string_view field_path) {
  // proto3 enums are open: a config or peer may carry a kind this build does not know.
  if (!config::ErrorFeedback::Kind_IsValid(spec.kind())) {
    return absl::InvalidArgumentError(absl::StrCat(field_path, ".kind: error feedback kind ",
                                                   spec.kind(), " is not supported"));
  }
  if (spec.has_scale() && spec.kind() != config::ErrorFeedback::RESIDUAL) {
    return NoParameter(field_path, spec.kind(), "scale");
  }
  if (spec.has_momentum() && spec.kind() != config::ErrorFeedback::DGC_MOMENTUM) {
    return NoParameter(field_path, spec.kind(), "momentum");
  }
  // Written so that NaN fails too.
  if (spec.has_scale() && !(spec.scale() > 0 && spec.scale() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".scale: must be in (0, 1], got ", spec.scale()));
  }
  if (spec.has_momentum() && !(spec.momentum() >= 0 && spec.momentum() < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".momentum: must be in [0, 1), got ", spec.momentum()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ErrorFeedback>> ErrorFeedback::Create(
    const config::ErrorFeedback& spec, size_t num_elements) {
  // An unknown kind keeps its original, path-less message (peers may send one).
  if (!config::ErrorFeedback::Kind_IsValid(spec.kind())) {
    return absl::InvalidArgumentError(
        absl::StrCat("error feedback kind ", spec.kind(), " is not supported"));
  }
  TAMP_RETURN_IF_ERROR(ValidateErrorFeedbackSpec(spec, "error_feedback"));
  return absl::WrapUnique(new ErrorFeedback(spec, num_elements));
}

ErrorFeedback::ErrorFeedback(const config::ErrorFeedback& spec, size_t num_elements)
    : kind_(spec.kind()),
      scale_(spec.has_scale() ? spec.scale() : kDefaultResidualScale),
      momentum_(spec.has_momentum() ? spec.momentum() : kDefaultDgcMomentum) {
  switch (kind_) {
    case config::ErrorFeedback::DGC_MOMENTUM:
      velocity_.assign(num_elements, 0.0f);
      residual_.assign(num_elements, 0.0f);
      break;
    case config::ErrorFeedback::RESIDUAL:
      residual_.assign(num_elements, 0.0f);
      break;
    default:
      break;
  }
}

absl::Status ErrorFeedback::Compress(Codec& codec, absl::Span<const float> input,
                                     const RandomKey& key, std::string* payload) {
  TAMP_RETURN_IF_ERROR(SingleRound(codec));
  switch (kind_) {
    case config::ErrorFeedback::RESIDUAL:
      return CompressResidual(codec, input, key, payload);
    case config::ErrorFeedback::DGC_MOMENTUM:
      return CompressDgcMomentum(codec, input, key, payload);
    default:
      return codec.Encode(input, key, payload);
  }
}

absl::Span<float> ErrorFeedback::AddTarget() {
  if (kind_ != config::ErrorFeedback::RESIDUAL) return {};
  return absl::MakeSpan(residual_);
}

absl::Status ErrorFeedback::CompressAdded(Codec& codec, const RandomKey& key,
                                          std::string* payload) {
  CHECK_EQ(kind_, config::ErrorFeedback::RESIDUAL) << "CompressAdded() needs a RESIDUAL memory";
  TAMP_RETURN_IF_ERROR(SingleRound(codec));
  // The caller formed c in the residual, where EncodeResidual() reads it.
  return EncodeResidual(codec, key, payload);
}

absl::Status ErrorFeedback::CompressResidual(Codec& codec, absl::Span<const float> input,
                                             const RandomKey& key, std::string* payload) {
  CHECK_EQ(input.size(), residual_.size());
  for (size_t i = 0; i < input.size(); ++i) residual_[i] = input[i] + residual_[i];
  return EncodeResidual(codec, key, payload);
}

absl::Status ErrorFeedback::EncodeResidual(Codec& codec, const RandomKey& key,
                                           std::string* payload) {
  CHECK_EQ(codec.size(), residual_.size());
  TAMP_RETURN_IF_ERROR(codec.Encode(residual_, key, payload));
  // Decoding our own payload is what the receiver will do, so the residual holds exactly
  // what it will not see: s * (c - decode(payload)). s = 1 multiplies exactly, so the
  // default keeps the unscaled identity bit for bit.
  TAMP_ASSIGN_OR_RETURN(const bool sparse, codec.DecodeSparse(*payload, key, &sent_));
  if (sparse) {
    // decode(payload) is zero outside the sent entries: s * (c - 0) there, which skips the
    // dense decode and its pass (c - 0 == c, bit for bit). So the k sent entries first
    // become c - sent, then, at s != 1, one pass scales them all; at s = 1, c outside them
    // is already the residual.
    for (size_t j = 0; j < sent_.indices.size(); ++j) {
      const size_t i = sent_.indices[j];
      residual_[i] = residual_[i] - sent_.values[j];
    }
    if (scale_ != 1.0f) {
      for (size_t i = 0; i < residual_.size(); ++i) residual_[i] = scale_ * residual_[i];
    }
    return absl::OkStatus();
  }
  TAMP_RETURN_IF_ERROR(codec.Decode(*payload, key, Decoded()));
  for (size_t i = 0; i < residual_.size(); ++i) {
    residual_[i] = scale_ * (residual_[i] - decoded_[i]);
  }
  return absl::OkStatus();
}

absl::Status ErrorFeedback::CompressDgcMomentum(Codec& codec, absl::Span<const float> input,
                                                const RandomKey& key, std::string* payload) {
  CHECK_EQ(input.size(), residual_.size());
  CHECK_EQ(codec.size(), residual_.size());
  if (codec.id() == CodecId::kNone) {  // Sent whole: momentum SGD's velocity, no masking.
    for (size_t i = 0; i < input.size(); ++i) {
      velocity_[i] = NextVelocity(momentum_, velocity_[i], input[i]);
    }
    return codec.Encode(velocity_, key, payload);
  }
  CompensateDgcMomentum(input);
  TAMP_RETURN_IF_ERROR(codec.Encode(residual_, key, payload));
  TAMP_ASSIGN_OR_RETURN(const bool sparse, codec.DecodeSparse(*payload, key, &sent_));
  if (!sparse) {
    TAMP_RETURN_IF_ERROR(codec.Decode(*payload, key, Decoded()));
    MaskSentDgcMomentum();
    return absl::OkStatus();
  }
  // Only the k sent entries change (momentum factor masking, as MaskSentDgcMomentum()).
  for (size_t j = 0; j < sent_.indices.size(); ++j) {
    if (sent_.values[j] != 0.0f) {  // NaN counts as sent.
      velocity_[sent_.indices[j]] = 0.0f;
      residual_[sent_.indices[j]] = 0.0f;
    }
  }
  return absl::OkStatus();
}

void ErrorFeedback::CompensateDgcMomentum(absl::Span<const float> input) {
  CHECK_EQ(input.size(), residual_.size());
  // In place: one pass reading u, g and v and writing u and v back where they were read
  // (DGC's encode is memory-bound; separate output buffers cost two more streams).
  for (size_t i = 0; i < input.size(); ++i) {
    velocity_[i] = NextVelocity(momentum_, velocity_[i], input[i]);
    residual_[i] += velocity_[i];
  }
}

absl::Span<float> ErrorFeedback::Decoded() {
  // Sized on first use: a sparse codec (top-k, DGC) never decodes densely, and a chunk's
  // memory is then its residual (and velocity) alone, not a model-sized scratch more.
  if (decoded_.size() != residual_.size()) decoded_.resize(residual_.size());
  return absl::MakeSpan(decoded_);
}

void ErrorFeedback::MaskSentDgcMomentum() {
  for (size_t i = 0; i < residual_.size(); ++i) {
    const bool sent = decoded_[i] != 0.0f;  // NaN counts as sent.
    velocity_[i] = sent ? 0.0f : velocity_[i];
    residual_[i] = sent ? 0.0f : residual_[i];
  }
}

absl::Status ErrorFeedback::BeginRounds(Codec& codec, absl::Span<const float> input,
                                        const RandomKey& key, std::string* payload) {
  if (codec.rounds() == 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "codec ", CodecName(codec.id()), " takes one round per step: use Compress()"));
  }
  // What round 0 encodes goes to compensated_, which ReplayRounds() encodes again.
  switch (kind_) {
    case config::ErrorFeedback::RESIDUAL:
      CHECK_EQ(input.size(), residual_.size());
      compensated_.resize(input.size());
      for (size_t i = 0; i < input.size(); ++i) compensated_[i] = input[i] + residual_[i];
      break;
    case config::ErrorFeedback::DGC_MOMENTUM:
      CompensateDgcMomentum(input);
      compensated_.assign(residual_.begin(), residual_.end());
      break;
    default:
      compensated_.assign(input.begin(), input.end());
      break;
  }
  rounds_begun_ = true;
  return codec.EncodeRound(0, compensated_, {}, key, payload);
}

absl::Status ErrorFeedback::ReplayRounds(Codec& codec, const RandomKey& key,
                                         std::string* payload) {
  if (!rounds_begun_) {
    return absl::FailedPreconditionError("ReplayRounds() before any BeginRounds()");
  }
  return codec.EncodeRound(0, compensated_, {}, key, payload);
}

absl::Status ErrorFeedback::NextRound(Codec& codec, int round, absl::string_view previous_answer,
                                      const RandomKey& key, std::string* payload) {
  return codec.EncodeRound(round, {}, previous_answer, key, payload);
}

absl::Status ErrorFeedback::FinishRounds(Codec& codec, absl::string_view final_answer,
                                         const RandomKey& key) {
  switch (kind_) {
    case config::ErrorFeedback::RESIDUAL:
      TAMP_RETURN_IF_ERROR(codec.FinishRounds(final_answer, key, Decoded()));
      for (size_t i = 0; i < residual_.size(); ++i) {
        residual_[i] = scale_ * (compensated_[i] - decoded_[i]);
      }
      return absl::OkStatus();
    case config::ErrorFeedback::DGC_MOMENTUM:
      TAMP_RETURN_IF_ERROR(codec.FinishRounds(final_answer, key, Decoded()));
      MaskSentDgcMomentum();
      return absl::OkStatus();
    default:
      return codec.FinishRounds(final_answer, key, {});
  }
}

void ErrorFeedback::Reset() {
  std::fill(residual_.begin(), residual_.end(), 0.0f);
  std::fill(velocity_.begin(), velocity_.end(), 0.0f);
}

}  // namespace tamp::compress
