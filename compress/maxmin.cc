#include "compress/maxmin.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/internal/quantize.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

using internal::kTile;
using internal::Mask;
using internal::SelectFloat;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Range {
  float min;
  float max;
};

// The grid step of a valid range: (max - min) / L in fp32.
inline float Step(const Range& range, int bits) {
  return (range.max - range.min) / static_cast<float>((1 << bits) - 1);
}

// Whether `range` is valid on the wire: (NaN, NaN), or finite with min <= max and a finite
// max - min.
inline bool IsValidRange(const Range& range) {
  if (std::isnan(range.min) && std::isnan(range.max)) return true;
  return std::isfinite(range.min) && std::isfinite(range.max) && range.min <= range.max &&
         std::isfinite(range.max - range.min);
}

// Whether a valid range's codes must all be 0 (NaN bucket, or max = min).
inline bool ZeroCodesOnly(const Range& range) { return !(range.max > range.min); }

// Min and max of x[0..length), or (NaN, NaN) when a value is NaN or ±Inf or max - min
// overflows. Element j goes to lane j % 8; named accumulators (lanes 0-3, 4-7) stay in
// registers.
Range BucketRange(const float* x, size_t length) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  internal::Float4 lo_low = {kInf, kInf, kInf, kInf}, lo_high = lo_low;
  internal::Float4 hi_low = -lo_low, hi_high = -lo_low;
  internal::Float4 poison_low = {}, poison_high = {};  // NaN once a value is NaN or ±Inf.
  size_t i = 0;
  for (; i + 8 <= length; i += 8) {
    const internal::Float4 low = internal::LoadFloat4(x + i);
    const internal::Float4 high = internal::LoadFloat4(x + i + 4);
    lo_low = low < lo_low ? low : lo_low;
    lo_high = high < lo_high ? high : lo_high;
    hi_low = low > hi_low ? low : hi_low;
    hi_high = high > hi_high ? high : hi_high;
    poison_low += low - low;
    poison_high += high - high;
  }
  float lo[8] = {lo_low[0],  lo_low[1],  lo_low[2],  lo_low[3],
                 lo_high[0], lo_high[1], lo_high[2], lo_high[3]};
  float hi[8] = {hi_low[0],  hi_low[1],  hi_low[2],  hi_low[3],
                 hi_high[0], hi_high[1], hi_high[2], hi_high[3]};
  float poison = ((poison_low[0] + poison_low[1]) + (poison_low[2] + poison_low[3])) +
                 ((poison_high[0] + poison_high[1]) + (poison_high[2] + poison_high[3]));
  for (int k = 0; i < length; ++i, ++k) {
    const float v = x[i];
    lo[k] = v < lo[k] ? v : lo[k];
    hi[k] = v > hi[k] ? v : hi[k];
    poison += v - v;
  }
  const float min = *std::min_element(lo, lo + 8);
  const float max = *std::max_element(hi, hi + 8);
  if (std::isnan(poison) || !std::isfinite(max - min)) return {kNaN, kNaN};
  return {min, max};
}

// codes[j] for j < count, all values of one bucket with finite min < max. `random` is
// unused for nearest rounding.
template <bool kStochastic>
TAMP_QUANTIZE_KERNEL void QuantizeSegment(const float* x, const uint32_t* random, size_t count,
                                          Range range, int bits, uint32_t* codes) {
  const float step = Step(range, bits);
  const float top = static_cast<float>((1 << bits) - 1);
  for (size_t j = 0; j < count; ++j) {
    // x - min is in [0, max - min] (finite), so q is finite and >= 0.
    float q = (x[j] - range.min) / step;
    q = SelectFloat(q < top, q, top);
    const int32_t whole = static_cast<int32_t>(q);
    const float fraction = q - static_cast<float>(whole);
    int32_t up;
    if constexpr (kStochastic) {
      const float uniform =
          static_cast<float>(static_cast<int32_t>(random[j] >> 8)) * (1.0f / 16777216.0f);
      up = Mask(uniform < fraction) & 1;
    } else {
      up = Mask(fraction >= 0.5f) & 1;
    }
    codes[j] = static_cast<uint32_t>(whole + up);
  }
}

// out[j] for j < count, all values of one bucket.
TAMP_QUANTIZE_KERNEL void DequantizeSegment(const uint32_t* codes, size_t count, float min,
                                            float step, float* out) {
  for (size_t j = 0; j < count; ++j) {
    out[j] = min + static_cast<float>(static_cast<int32_t>(codes[j])) * step;
  }
}


Range LoadRange(const char* ranges, uint64_t bucket) {
  return {internal::LoadFloat(ranges + 8 * bucket), internal::LoadFloat(ranges + 8 * bucket + 4)};
}

}  // namespace

absl::Status MaxMinCodec::ValidateSpec(const config::Codec& spec, absl::string_view field_path) {
  if (!spec.has_bits()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ": codec 'maxmin' needs 'bits' (bits per value, 1..8)"));
  }
  if (spec.bits() < 1 || spec.bits() > kMaxBits) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".bits: must be in [1, ", kMaxBits, "], got ", spec.bits()));
  }
  return internal::ValidateBucketSize(spec, field_path, kMaxBucketSize);
}

std::unique_ptr<Codec> MaxMinCodec::Create(const config::Codec& spec, size_t num_elements) {
  return std::make_unique<MaxMinCodec>(
      num_elements, static_cast<int>(spec.bits()),
      internal::BucketSizeOf(spec, kDefaultBucketSize), spec.stochastic());
}

size_t MaxMinCodec::PayloadBytes(size_t num_elements, int bits, uint32_t bucket_size) {
  const size_t buckets = (num_elements + bucket_size - 1) / bucket_size;
  return kHeaderBytes + 2 * sizeof(float) * buckets + internal::PackedBytes(num_elements, bits);
}

MaxMinCodec::MaxMinCodec(size_t num_elements, int bits, uint32_t bucket_size, bool stochastic)
    : Codec(num_elements), bits_(bits), bucket_size_(bucket_size), stochastic_(stochastic) {
  CHECK_GE(num_elements, 1u);
  CHECK_LE(num_elements, uint64_t{1} << 34);  // Philox block numbers are 32-bit.
  CHECK(bits >= 1 && bits <= static_cast<int>(kMaxBits)) << bits;
  CHECK(bucket_size >= 1 && bucket_size <= kMaxBucketSize) << bucket_size;
}

absl::Status MaxMinCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                                 std::string* payload) {
  CHECK_EQ(input.size(), size());
  const size_t n = size();
  const size_t buckets = NumBuckets();
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kMaxMin, kVersion, n, payload);
  payload->resize(MaxPayloadBytes());
  char* const ranges = payload->data() + kHeaderBytes;
  char* const packed = ranges + 2 * sizeof(float) * buckets;

  uint32_t random[kTile];
  size_t ranges_done = 0;
  internal::PackTilesByBucket(
      n, bits_, bucket_size_, packed,
      [&](size_t start, size_t count) {
        // Ranges of the buckets this tile reaches, each computed once; the tile's values are
        // then still in cache.
        for (; ranges_done < buckets && ranges_done * bucket_size_ < start + count;
             ++ranges_done) {
          const size_t begin = ranges_done * bucket_size_;
          const Range range =
              BucketRange(input.data() + begin, std::min<size_t>(bucket_size_, n - begin));
          internal::StoreFloat(range.min, ranges + 8 * ranges_done);
          internal::StoreFloat(range.max, ranges + 8 * ranges_done + 4);
        }
        if (stochastic_) internal::PhiloxBits(key, start, count, random);
      },
      [&](uint64_t b, size_t start, size_t begin, size_t end, uint32_t* codes) {
        const Range range = LoadRange(ranges, b);
        if (ZeroCodesOnly(range)) {
          std::fill(codes + begin, codes + end, 0u);
        } else {
          const float* x = input.data() + start + begin;
          if (stochastic_) {
            QuantizeSegment<true>(x, random + begin, end - begin, range, bits_, codes + begin);
          } else {
            QuantizeSegment<false>(x, nullptr, end - begin, range, bits_, codes + begin);
          }
        }
      });
  return absl::OkStatus();
}

absl::Status MaxMinCodec::Validate(absl::string_view body) const {
  const size_t n = size();
  const size_t buckets = NumBuckets();
  const size_t expected = 2 * sizeof(float) * buckets + internal::PackedBytes(n, bits_);
  if (body.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("maxmin payload body is ", body.size(),
                                                   " bytes, expected ", expected, " (", buckets,
                                                   " buckets, ", bits_, " bits per value)"));
  }
  const char* const ranges = body.data();
  const char* const packed = ranges + 2 * sizeof(float) * buckets;
  bool zero_buckets = false;
  for (size_t b = 0; b < buckets; ++b) {
    const Range range = LoadRange(ranges, b);
    if (!IsValidRange(range)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "maxmin bucket ", b, " has min ", range.min, " and max ", range.max,
          "; they must both be NaN, or finite with min <= max and a finite max - min"));
    }
    zero_buckets |= ZeroCodesOnly(range);
  }
  if (!internal::PaddingIsZero(packed, n, bits_)) {
    return absl::InvalidArgumentError("maxmin padding bits are not zero");
  }
  if (!zero_buckets) return absl::OkStatus();  // Every code is valid elsewhere.
  return internal::UnpackTilesByBucket(
      packed, n, bits_, bucket_size_,
      [&](uint64_t b, size_t start, size_t begin, size_t end, const uint32_t* codes) {
        const Range range = LoadRange(ranges, b);
        if (!ZeroCodesOnly(range) || !internal::AnyNonzero(codes + begin, end - begin)) {
          return absl::OkStatus();
        }
        const size_t j =
            std::find_if(codes + begin, codes + end, [](uint32_t code) { return code != 0; }) -
            codes;
        return absl::InvalidArgumentError(absl::StrCat(
            "maxmin element ", start + j, " has code ", codes[j], " in bucket ", b,
            ", whose min and max are ", range.min, " and ", range.max, "; it must be 0"));
      });
}

absl::Status MaxMinCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                                 absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kMaxMin, kVersion, size()));
  TAMP_RETURN_IF_ERROR(Validate(body));

  const size_t n = size();
  const char* const ranges = body.data();
  const char* const packed = ranges + 2 * sizeof(float) * NumBuckets();
  return internal::UnpackTilesByBucket(
      packed, n, bits_, bucket_size_,
      [&](uint64_t b, size_t start, size_t begin, size_t end, const uint32_t* codes) {
        // NaN buckets give NaN everywhere; max = min gives min (codes 0, step 0).
        const Range range = LoadRange(ranges, b);
        DequantizeSegment(codes + begin, end - begin, range.min, Step(range, bits_),
                          out.data() + start + begin);
        return absl::OkStatus();
      });
}

}  // namespace tamp::compress
