#include "compress/terngrad.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compress/internal/quantize.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

using internal::FloatBits;
using internal::kTile;
using internal::Mask;

constexpr int kCodeBits = 2;

// codes[j] for j < count: 0, 1 (+1) or 2 (-1). `scale` is finite and > 0, the values finite.
TAMP_QUANTIZE_KERNEL void TernarizeValues(const float* x, const uint32_t* random, size_t count,
                                          float scale, uint32_t* codes) {
  for (size_t j = 0; j < count; ++j) {
    const int32_t bits = static_cast<int32_t>(FloatBits(x[j]));
    float clipped = std::fabs(x[j]);
    clipped = internal::SelectFloat(clipped < scale, clipped, scale);
    const float probability = clipped / scale;  // In [0, 1]; exactly 1 at the scale.
    const float uniform =
        static_cast<float>(static_cast<int32_t>(random[j] >> 8)) * (1.0f / 16777216.0f);
    const int32_t sent = Mask(uniform < probability);
    codes[j] = static_cast<uint32_t>(sent & (1 + (Mask(bits < 0) & 1)));
  }
}

// out[j] for j < count.
TAMP_QUANTIZE_KERNEL void ScaleTernaries(const uint32_t* codes, size_t count, float scale,
                                         float* out) {
  for (size_t j = 0; j < count; ++j) {
    const int32_t code = static_cast<int32_t>(codes[j]);
    // code 0 -> 0, 1 -> +1, 2 -> -1: (code & 1) - (code >> 1).
    out[j] = static_cast<float>((code & 1) - (code >> 1)) * scale;
  }
}

// Whether a packed 2-bit code stream holds a 3 (both bits of a pair set).
bool HasCodeThree(const char* packed, size_t bytes) {
  uint64_t found = 0;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, packed + i, 8);
    found |= word & (word >> 1) & 0x5555555555555555ull;
  }
  for (; i < bytes; ++i) {
    const auto byte = static_cast<uint8_t>(packed[i]);
    found |= byte & (byte >> 1) & 0x55u;
  }
  return found != 0;
}

bool AllZero(const char* bytes, size_t size) {
  return std::all_of(bytes, bytes + size, [](char c) { return c == 0; });
}

}  // namespace

float TernGradCodec::Scale(absl::Span<const float> input) {
  CHECK(!input.empty());
  const size_t n = input.size();
  const float* x = input.data();
  // Shifted sums over d = x - x[0]; element j goes to lane j % 8. Named accumulators (lane
  // pairs for the doubles, halves for the floats) stay in registers.
  const double shift = x[0];
  internal::Double2 s01 = {}, s23 = {}, s45 = {}, s67 = {};
  internal::Double2 q01 = {}, q23 = {}, q45 = {}, q67 = {};
  internal::Float4 max_low = {}, max_high = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const internal::Double2 d01 = internal::LoadDouble2(x + i) - shift;
    const internal::Double2 d23 = internal::LoadDouble2(x + i + 2) - shift;
    const internal::Double2 d45 = internal::LoadDouble2(x + i + 4) - shift;
    const internal::Double2 d67 = internal::LoadDouble2(x + i + 6) - shift;
    s01 += d01;
    s23 += d23;
    s45 += d45;
    s67 += d67;
    q01 += d01 * d01;
    q23 += d23 * d23;
    q45 += d45 * d45;
    q67 += d67 * d67;
    // |v|; NaN lanes do not matter (see below).
    const internal::Float4 low = internal::LoadFloat4(x + i);
    const internal::Float4 high = internal::LoadFloat4(x + i + 4);
    const internal::Float4 abs_low = low < 0 ? -low : low;
    const internal::Float4 abs_high = high < 0 ? -high : high;
    max_low = abs_low > max_low ? abs_low : max_low;
    max_high = abs_high > max_high ? abs_high : max_high;
  }
  double s[8] = {s01[0], s01[1], s23[0], s23[1], s45[0], s45[1], s67[0], s67[1]};
  double q[8] = {q01[0], q01[1], q23[0], q23[1], q45[0], q45[1], q67[0], q67[1]};
  float max_abs[8] = {max_low[0],  max_low[1],  max_low[2],  max_low[3],
                      max_high[0], max_high[1], max_high[2], max_high[3]};
  for (int k = 0; i < n; ++i, ++k) {
    const double d = x[i] - shift;
    s[k] += d;
    q[k] += d * d;
    max_abs[k] = std::max(max_abs[k], std::fabs(x[i]));
  }
  const double sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  const double squares = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
  // A NaN or ±Inf anywhere makes the sum of squares NaN or Inf (finite inputs cannot
  // overflow it: (2 * 3.4e38)^2 * 2^34 < 1.8e308).
  if (!std::isfinite(squares)) return std::numeric_limits<float>::quiet_NaN();
  const double count = static_cast<double>(n);
  const double variance = std::max(0.0, (squares - sum * sum / count) / count);
  const float largest = *std::max_element(max_abs, max_abs + 8);
  const double clip = kClipSigmas * std::sqrt(variance);
  if (clip == 0 || clip >= largest) return largest;
  return static_cast<float>(clip);  // < largest, so in range.
}

std::unique_ptr<Codec> TernGradCodec::Create(const config::Codec& /*spec*/, size_t num_elements) {
  return std::make_unique<TernGradCodec>(num_elements);
}

size_t TernGradCodec::PayloadBytes(size_t num_elements) {
  return kHeaderBytes + sizeof(float) + internal::PackedBytes(num_elements, kCodeBits);
}

TernGradCodec::TernGradCodec(size_t num_elements) : Codec(num_elements) {
  CHECK_GE(num_elements, 1u);
  CHECK_LE(num_elements, uint64_t{1} << 34);  // Philox block numbers are 32-bit.
}

absl::Status TernGradCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                                   std::string* payload) {
  CHECK_EQ(input.size(), size());
  const size_t n = size();
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kTernGrad, kVersion, n, payload);
  payload->resize(MaxPayloadBytes());  // Zero-filled: the codes of a NaN or zero scale.
  char* const body = payload->data() + kHeaderBytes;
  const float scale = Scale(input);
  internal::StoreFloat(scale, body);
  if (!(scale > 0)) return absl::OkStatus();  // 0 or NaN: all codes 0.

  char* const packed = body + sizeof(float);
  uint32_t random[kTile];
  uint32_t codes[kTile];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = std::min(kTile, n - start);
    internal::PhiloxBits(key, start, count, random);
    TernarizeValues(input.data() + start, random, count, scale, codes);
    internal::PackCodes(codes, count, kCodeBits, packed + start / 8 * kCodeBits);
  }
  return absl::OkStatus();
}

absl::Status TernGradCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                                   absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  const size_t n = size();
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kTernGrad, kVersion, n));
  const size_t code_bytes = internal::PackedBytes(n, kCodeBits);
  if (body.size() != sizeof(float) + code_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "terngrad payload body is ", body.size(), " bytes, expected ", sizeof(float) + code_bytes));
  }
  const float scale = internal::LoadFloat(body.data());
  if (!std::isnan(scale) && (std::signbit(scale) || !std::isfinite(scale))) {
    return absl::InvalidArgumentError(
        absl::StrCat("terngrad scale is ", scale, "; it must be NaN or finite and >= +0"));
  }
  const char* const packed = body.data() + sizeof(float);
  if (!(scale > 0) && !AllZero(packed, code_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("terngrad codes must all be 0 when the scale is ", scale));
  }
  if (!internal::PaddingIsZero(packed, n, kCodeBits)) {
    return absl::InvalidArgumentError("terngrad padding bits are not zero");
  }
  if (HasCodeThree(packed, code_bytes)) {
    return absl::InvalidArgumentError("terngrad payload holds the invalid code 3");
  }
  uint32_t codes[kTile];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = std::min(kTile, n - start);
    internal::UnpackCodes(packed + start / 8 * kCodeBits, count, kCodeBits, codes);
    // A NaN scale gives NaN everywhere (the codes are 0).
    ScaleTernaries(codes, count, scale, out.data() + start);
  }
  return absl::OkStatus();
}

}  // namespace tamp::compress
