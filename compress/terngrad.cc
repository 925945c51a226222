#include "compress/terngrad.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/internal/quantize.h"
#include "compress/internal/segments.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

using internal::FloatBits;
using internal::kTile;
using internal::Mask;

constexpr int kCodeBits = 2;

// codes[j] for j < count: 0, 1 (+1) or 2 (-1). `scale` is finite and > 0, the values finite.
// Sent iff u * scale < |x| for the 16-bit uniform u = U / 2^16 (U = 0 .. 2^16 - 1): no
// clipping needed (u * scale < scale) and no division. P(sent) is |x| / scale rounded up to
// a multiple of 2^-16 (give or take the rounding of u * scale), so E[x'] is the clipped value
// up to 2^-16 of the scale, the resolution of u.
TAMP_QUANTIZE_KERNEL void TernarizeValues(const float* x, const uint16_t* random, size_t count,
                                          float scale, uint8_t* codes) {
  for (size_t j = 0; j < count; ++j) {
    const int32_t bits = static_cast<int32_t>(FloatBits(x[j]));
    const float uniform = static_cast<float>(static_cast<int32_t>(random[j])) * (1.0f / 65536.0f);
    const int32_t sent = Mask(uniform * scale < std::fabs(x[j]));
    codes[j] = static_cast<uint8_t>(sent & (1 + (Mask(bits < 0) & 1)));
  }
}

// Packs 2-bit codes (one per byte, each < 4) 4 to a byte: out[i] = codes[4i] | codes[4i + 1]
// << 2 | ... Of the little-endian word w of codes 4i..4i+3, w >> 6, w >> 12 and w >> 18 move
// codes 1-3 to their places in the low byte (the codes' other bits land above it).
TAMP_QUANTIZE_KERNEL void PackTernaries(const uint8_t* codes, size_t bytes, uint8_t* out) {
  for (size_t i = 0; i < bytes; ++i) {
    uint32_t w;
    std::memcpy(&w, codes + 4 * i, sizeof(w));
    out[i] = static_cast<uint8_t>(w | (w >> 6) | (w >> 12) | (w >> 18));
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

// The statistics of x[0..n) by lane (element j goes to lane j % 8), of the shifted values
// d = x - shift: sum[k] and squares[k] of d and d^2 in double, max_abs[k] of |x| (NaN lanes
// do not matter: see Scale()). Each lane's additions are in element order.
TAMP_QUANTIZE_KERNEL void LaneStats(const float* x, size_t n, double shift, double* sum,
                                    double* squares, float* max_abs) {
  internal::Double8 s = {}, q = {};
  internal::Float8 largest = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    internal::Double8 d;
    internal::LoadDouble8(x + i, &d);
    d -= shift;
    s += d;
    q += d * d;
    internal::Float8 v;
    std::memcpy(&v, x + i, sizeof(v));
    const internal::Float8 magnitude = v < 0 ? -v : v;
    largest = magnitude > largest ? magnitude : largest;
  }
  for (int k = 0; k < 8; ++k) {
    sum[k] = s[k];
    squares[k] = q[k];
    max_abs[k] = largest[k];
  }
  for (int k = 0; i < n; ++i, ++k) {
    const double d = x[i] - shift;
    sum[k] += d;
    squares[k] += d * d;
    max_abs[k] = std::max(max_abs[k], std::fabs(x[i]));
  }
}

double Pairwise8(const double* v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

}  // namespace

TernGradCodec::Moments TernGradCodec::ShiftedMoments(absl::Span<const float> input) {
  CHECK(!input.empty());
  const size_t n = input.size();
  const double shift = input[0];
  // One per segment (compress/internal/segments.h): its 8 lanes added pairwise.
  thread_local std::vector<Moments> partials;
  partials.resize(internal::NumSegments(n));
  for (size_t segment = 0; segment < partials.size(); ++segment) {
    const size_t first = segment * internal::kStatSegment;
    double s[8], q[8];
    float max_abs[8];
    LaneStats(input.data() + first, std::min(internal::kStatSegment, n - first), shift, s, q,
              max_abs);
    partials[segment] = {Pairwise8(s), Pairwise8(q), *std::max_element(max_abs, max_abs + 8)};
  }
  return internal::PairwiseLevels(&partials, [](const Moments& a, const Moments& b) {
    return Moments{a.sum + b.sum, a.squares + b.squares, std::max(a.max_abs, b.max_abs)};
  });
}

float TernGradCodec::Scale(absl::Span<const float> input) {
  const size_t n = input.size();
  const Moments total = ShiftedMoments(input);
  const double sum = total.sum;
  const double squares = total.squares;
  // A NaN or ±Inf anywhere makes the sum of squares NaN or Inf (finite inputs cannot
  // overflow it: (2 * 3.4e38)^2 * 2^34 < 1.8e308).
  if (!std::isfinite(squares)) return std::numeric_limits<float>::quiet_NaN();
  const double count = static_cast<double>(n);
  const double variance = std::max(0.0, (squares - sum * sum / count) / count);
  const float largest = total.max_abs;
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

  auto* const packed = reinterpret_cast<uint8_t*>(body + sizeof(float));
  uint16_t random[kTile];
  uint8_t codes[kTile];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = std::min(kTile, n - start);
    internal::PhiloxBits16(key, start, count, random);
    TernarizeValues(input.data() + start, random, count, scale, codes);
    std::fill(codes + count, codes + (count + 3) / 4 * 4, 0);  // The last byte's padding.
    PackTernaries(codes, internal::PackedBytes(count, kCodeBits), packed + start / 4);
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
