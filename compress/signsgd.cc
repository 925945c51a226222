#include "compress/signsgd.h"

#include "base/status_macros.h"
#include "compress/internal/sign_bits.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {

std::unique_ptr<Codec> SignSgdCodec::Create(const config::Codec& /*spec*/, size_t num_elements) {
  return std::make_unique<SignSgdCodec>(num_elements);
}

size_t SignSgdCodec::PayloadBytes(size_t num_elements) {
  return kHeaderBytes + internal::SignBytes(num_elements);
}

absl::Status SignSgdCodec::Encode(absl::Span<const float> input, const RandomKey& /*key*/,
                                  std::string* payload) {
  CHECK_EQ(input.size(), size());
  payload->clear();
  AppendHeader(CodecId::kSignSgd, kVersion, size(), payload);
  payload->resize(MaxPayloadBytes());
  internal::PackSigns(input, payload->data() + kHeaderBytes);
  return absl::OkStatus();
}

absl::StatusOr<absl::string_view> SignSgdCodec::Plane(absl::string_view payload) const {
  return internal::ParseSignPayload(payload, CodecId::kSignSgd, kVersion, size());
}

absl::Status SignSgdCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                                  absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const absl::string_view plane, Plane(payload));
  internal::UnpackSigns(plane, 1.0f, out);
  return absl::OkStatus();
}

absl::Status SignSgdCodec::DecodeAdd(absl::string_view payload, const RandomKey& /*key*/,
                                     absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const absl::string_view plane, Plane(payload));
  internal::UnpackSignsAdd(plane, 1.0f, accumulator);
  return absl::OkStatus();
}

void SignSgdCodec::FinishAggregate(int num_contributors, absl::Span<float> accumulator) const {
  CHECK_GT(num_contributors, 0);
  CHECK_LE(accumulator.size(), size());
  internal::MajorityVote(accumulator);
}

}  // namespace tamp::compress
