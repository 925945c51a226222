#include "compress/natural.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/internal/quantize.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

using internal::FloatBits;
using internal::kTile;
using internal::Mask;

constexpr int32_t kNaNCode = 0x100;

// codes[j] for j < count. Integer-only and branch-free (signed compares, which SSE has).
TAMP_QUANTIZE_KERNEL void EncodeValues(const float* x, const uint16_t* random, size_t count,
                                       uint32_t* codes) {
  for (size_t j = 0; j < count; ++j) {
    const uint32_t bits = FloatBits(x[j]);
    const int32_t mantissa = static_cast<int32_t>(bits & 0x7fffff);
    // P(up) = ceil(mantissa / 2^7) / 2^16, mantissa / 2^23 up to 2^-16; never for Inf
    // (mantissa 0).
    const int32_t up = Mask((static_cast<int32_t>(random[j]) << 7) < mantissa) & 1;
    // Sign and exponent fields, the exponent rounded up: bits 8 and 0-7 of the code, as the
    // exponent + up <= 255 unless x is NaN.
    const int32_t rounded = static_cast<int32_t>(bits >> 23) + up;
    const int32_t code = rounded & Mask((rounded & 0xff) != 0);  // Zero goes without sign.
    const int32_t nan = Mask(static_cast<int32_t>(bits & 0x7fffffff) > 0x7f800000);
    codes[j] = static_cast<uint32_t>((kNaNCode & nan) | (code & ~nan));
  }
}

// out[j] for j < count.
TAMP_QUANTIZE_KERNEL void DecodeValues(const uint32_t* codes, size_t count, float* out) {
  for (size_t j = 0; j < count; ++j) {
    const uint32_t code = codes[j];
    const uint32_t power = ((code & 0x100u) << 23) | ((code & 0xffu) << 23);
    const int32_t is_nan = Mask(code == static_cast<uint32_t>(kNaNCode));
    const uint32_t bits =
        (0x7fc00000u & static_cast<uint32_t>(is_nan)) | (power & ~static_cast<uint32_t>(is_nan));
    std::memcpy(&out[j], &bits, sizeof(float));
  }
}

}  // namespace

std::unique_ptr<Codec> NaturalCodec::Create(const config::Codec& /*spec*/, size_t num_elements) {
  return std::make_unique<NaturalCodec>(num_elements);
}

size_t NaturalCodec::PayloadBytes(size_t num_elements) {
  return kHeaderBytes + internal::PackedBytes(num_elements, kCodeBits);
}

NaturalCodec::NaturalCodec(size_t num_elements) : Codec(num_elements) {
  CHECK_GE(num_elements, 1u);
  CHECK_LE(num_elements, uint64_t{1} << 34);  // Philox block numbers are 32-bit.
}

absl::Status NaturalCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                                  std::string* payload) {
  CHECK_EQ(input.size(), size());
  const size_t n = size();
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kNatural, kVersion, n, payload);
  payload->resize(MaxPayloadBytes());
  char* const packed = payload->data() + kHeaderBytes;
  uint16_t random[kTile];
  uint32_t codes[kTile];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = std::min(kTile, n - start);
    internal::PhiloxBits16(key, start, count, random);
    EncodeValues(input.data() + start, random, count, codes);
    internal::PackCodes(codes, count, kCodeBits, packed + start / 8 * kCodeBits);
  }
  return absl::OkStatus();
}

absl::Status NaturalCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                                  absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  const size_t n = size();
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kNatural, kVersion, n));
  const size_t expected = internal::PackedBytes(n, kCodeBits);
  if (body.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("natural payload body is ", body.size(), " bytes, expected ", expected));
  }
  if (!internal::PaddingIsZero(body.data(), n, kCodeBits)) {
    return absl::InvalidArgumentError("natural padding bits are not zero");
  }
  uint32_t codes[kTile];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = std::min(kTile, n - start);
    internal::UnpackCodes(body.data() + start / 8 * kCodeBits, count, kCodeBits, codes);
    DecodeValues(codes, count, out.data() + start);
  }
  return absl::OkStatus();
}

}  // namespace tamp::compress
