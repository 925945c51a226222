#include "compress/none.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {

std::unique_ptr<Codec> NoneCodec::Create(const config::Codec& /*spec*/, size_t num_elements) {
  return std::make_unique<NoneCodec>(num_elements);
}

size_t NoneCodec::MaxPayloadBytes() const { return kHeaderBytes + sizeof(float) * size(); }

absl::Status NoneCodec::Encode(absl::Span<const float> input, const RandomKey& /*key*/,
                               std::string* payload) {
  CHECK_EQ(input.size(), size());
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kNone, kVersion, size(), payload);
  payload->resize(MaxPayloadBytes());
  StoreWireFloats(input.data(), size(), payload->data() + kHeaderBytes);
  return absl::OkStatus();
}

absl::StatusOr<absl::string_view> NoneCodec::Body(absl::string_view payload) const {
  absl::StatusOr<absl::string_view> body = ParseHeader(payload, CodecId::kNone, kVersion, size());
  if (body.ok() && body->size() != sizeof(float) * size()) {
    return absl::InvalidArgumentError(absl::StrCat("none payload body is ", body->size(),
                                                   " bytes, expected ", sizeof(float) * size()));
  }
  return body;
}

absl::Status NoneCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                               absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body, Body(payload));
  std::memcpy(out.data(), body.data(), body.size());
  return absl::OkStatus();
}

absl::Status NoneCodec::DecodeAdd(absl::string_view payload, const RandomKey& /*key*/,
                                  absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body, Body(payload));
  const char* values = body.data();  // Not necessarily 4-byte aligned.
  for (size_t i = 0; i < size(); ++i) {
    float v;
    std::memcpy(&v, values + sizeof(float) * i, sizeof(float));
    accumulator[i] += v;
  }
  return absl::OkStatus();
}

}  // namespace tamp::compress
