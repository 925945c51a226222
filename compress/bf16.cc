#include "compress/bf16.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/internal/quantize.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {

namespace {

using internal::kTile;

TAMP_QUANTIZE_KERNEL void ToBf16s(const float* in, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(in[i]);
}

TAMP_QUANTIZE_KERNEL void FromBf16s(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}

}  // namespace

// A tile at a time through an aligned buffer (the payload bytes have no alignment).
void FloatsToBf16s(const float* in, size_t n, char* out) {
  uint16_t values[kTile];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = std::min(kTile, n - start);
    ToBf16s(in + start, count, values);
    std::memcpy(out + 2 * start, values, 2 * count);
  }
}

void Bf16sToFloats(const char* in, size_t n, float* out) {
  uint16_t values[kTile];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = std::min(kTile, n - start);
    std::memcpy(values, in + 2 * start, 2 * count);
    FromBf16s(values, count, out + start);
  }
}

std::unique_ptr<Codec> Bf16Codec::Create(const config::Codec& /*spec*/, size_t num_elements) {
  return std::make_unique<Bf16Codec>(num_elements);
}

size_t Bf16Codec::PayloadBytes(size_t num_elements) { return kHeaderBytes + 2 * num_elements; }

absl::Status Bf16Codec::Encode(absl::Span<const float> input, const RandomKey& /*key*/,
                               std::string* payload) {
  CHECK_EQ(input.size(), size());
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kBf16, kVersion, size(), payload);
  payload->resize(MaxPayloadBytes());
  FloatsToBf16s(input.data(), size(), payload->data() + kHeaderBytes);
  return absl::OkStatus();
}

absl::Status Bf16Codec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                               absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kBf16, kVersion, size()));
  if (body.size() != 2 * size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bf16 payload body is ", body.size(), " bytes, expected ", 2 * size()));
  }
  Bf16sToFloats(body.data(), size(), out.data());
  return absl::OkStatus();
}

}  // namespace tamp::compress
