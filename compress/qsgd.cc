#include "compress/qsgd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/numeric/bits.h"
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

// The documented norm: sqrt of the sum of squares in double, value j of the bucket in partial
// sum j % 8, partial sums added pairwise. NaN when it is not a finite fp32.
float NormFromLanes(const double* sums) {
  const double root = std::sqrt(((sums[0] + sums[1]) + (sums[2] + sums[3])) +
                                ((sums[4] + sums[5]) + (sums[6] + sums[7])));
  // Written so that NaN fails too; also keeps the conversion to float in range.
  if (!(root <= std::numeric_limits<float>::max())) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(root);
}

// The norm of one bucket.
float BucketNorm(const float* x, size_t length) {
  // Lanes 0-1, 2-3, 4-5, 6-7 as named accumulators, which stay in registers.
  internal::Double2 s01 = {}, s23 = {}, s45 = {}, s67 = {};
  size_t i = 0;
  for (; i + 8 <= length; i += 8) {
    const internal::Double2 v01 = internal::LoadDouble2(x + i);
    const internal::Double2 v23 = internal::LoadDouble2(x + i + 2);
    const internal::Double2 v45 = internal::LoadDouble2(x + i + 4);
    const internal::Double2 v67 = internal::LoadDouble2(x + i + 6);
    s01 += v01 * v01;
    s23 += v23 * v23;
    s45 += v45 * v45;
    s67 += v67 * v67;
  }
  double sums[8] = {s01[0], s01[1], s23[0], s23[1], s45[0], s45[1], s67[0], s67[1]};
  for (int k = 0; i < length; ++i, ++k) {
    const double v = x[i];
    sums[k] += v * v;
  }
  return NormFromLanes(sums);
}

// Buckets whose norms BucketNorms4() computes together.
constexpr size_t kNormBatch = 4;

// norms[b] = BucketNorm(x + b * length, length) for b < 4, the same sums in the same order:
// each lane's additions are serial, so one bucket alone waits on their latency, while the
// four buckets' chains run side by side.
TAMP_QUANTIZE_KERNEL void BucketNorms4(const float* x, size_t length, float* norms) {
  internal::Double8 s0 = {}, s1 = {}, s2 = {}, s3 = {};
  size_t i = 0;
  for (; i + 8 <= length; i += 8) {
    internal::Double8 v0, v1, v2, v3;
    internal::LoadDouble8(x + i, &v0);
    internal::LoadDouble8(x + length + i, &v1);
    internal::LoadDouble8(x + 2 * length + i, &v2);
    internal::LoadDouble8(x + 3 * length + i, &v3);
    s0 += v0 * v0;
    s1 += v1 * v1;
    s2 += v2 * v2;
    s3 += v3 * v3;
  }
  const internal::Double8 lanes[kNormBatch] = {s0, s1, s2, s3};
  for (size_t b = 0; b < kNormBatch; ++b) {
    double sums[8];
    for (int k = 0; k < 8; ++k) sums[k] = lanes[b][k];
    for (size_t j = i, k = 0; j < length; ++j, ++k) {
      const double v = x[b * length + j];
      sums[k] += v * v;
    }
    norms[b] = NormFromLanes(sums);
  }
}

// codes[j] for j < count, all values of one bucket with norm > 0 (finite); `inverse` =
// levels / norm. Rounding up with probability P(u < fraction) for the 16-bit uniform u =
// U / 2^16 (U = 0 .. 2^16 - 1) is ceil(fraction * 2^16) / 2^16: the expected level exceeds
// the exact one by less than 2^-16 of a level, the resolution of u (unbiased up to it).
TAMP_QUANTIZE_KERNEL void QuantizeSegment(const float* x, const uint16_t* random, size_t count,
                                          float inverse, float levels, int32_t sign_bit,
                                          uint32_t* codes) {
  for (size_t j = 0; j < count; ++j) {
    const int32_t bits = static_cast<int32_t>(FloatBits(x[j]));
    float v = std::fabs(x[j]) * inverse;
    v = internal::SelectFloat(v < levels, v, levels);  // In [0, s]: the conversion is exact.
    const int32_t whole = static_cast<int32_t>(v);
    const float fraction = v - static_cast<float>(whole);
    const float uniform = static_cast<float>(static_cast<int32_t>(random[j])) * (1.0f / 65536.0f);
    const int32_t level = whole + (Mask(uniform < fraction) & 1);
    const int32_t negative = Mask(bits < 0) & Mask(level > 0);
    codes[j] = static_cast<uint32_t>(level | (negative & sign_bit));
  }
}

// out[j] for j < count, all values of one bucket.
TAMP_QUANTIZE_KERNEL void DequantizeSegment(const uint32_t* codes, size_t count, float scale,
                                            int32_t level_mask, int level_bits, float* out) {
  for (size_t j = 0; j < count; ++j) {
    const float magnitude = static_cast<float>(static_cast<int32_t>(codes[j]) & level_mask) * scale;
    const uint32_t bits = FloatBits(magnitude) | (codes[j] >> level_bits << 31);
    std::memcpy(&out[j], &bits, sizeof(float));
  }
}

// Whether any of codes[0..count) is invalid for a bucket with a positive norm.
TAMP_QUANTIZE_KERNEL bool HasBadCode(const uint32_t* codes, size_t count, int32_t levels,
                                     int32_t level_mask, int32_t sign_bit) {
  int32_t bad = 0;
  for (size_t j = 0; j < count; ++j) {
    const int32_t code = static_cast<int32_t>(codes[j]);
    bad |= Mask((code & level_mask) > levels) | Mask(code == sign_bit);
  }
  return bad != 0;
}

}  // namespace

absl::Status QsgdCodec::ValidateSpec(const config::Codec& spec, absl::string_view field_path) {
  if (!spec.has_levels()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ": codec 'qsgd' needs 'levels' (quantization levels s)"));
  }
  if (spec.levels() < 1 || spec.levels() > kMaxLevels) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".levels: must be in [1, ", kMaxLevels, "], got ", spec.levels()));
  }
  return internal::ValidateBucketSize(spec, field_path, kMaxBucketSize);
}

std::unique_ptr<Codec> QsgdCodec::Create(const config::Codec& spec, size_t num_elements) {
  return std::make_unique<QsgdCodec>(
      num_elements, spec.levels(),
      internal::BucketSizeOf(spec, kDefaultBucketSize));
}

int QsgdCodec::CodeBits(uint32_t levels) { return static_cast<int>(absl::bit_width(levels)) + 1; }

size_t QsgdCodec::PayloadBytes(size_t num_elements, uint32_t levels, uint32_t bucket_size) {
  const size_t buckets = (num_elements + bucket_size - 1) / bucket_size;
  return kHeaderBytes + sizeof(float) * buckets +
         internal::PackedBytes(num_elements, CodeBits(levels));
}

QsgdCodec::QsgdCodec(size_t num_elements, uint32_t levels, uint32_t bucket_size)
    : Codec(num_elements),
      levels_(levels),
      bucket_size_(bucket_size),
      code_bits_(CodeBits(levels)) {
  CHECK_GE(num_elements, 1u);
  CHECK_LE(num_elements, uint64_t{1} << 34);  // Philox block numbers are 32-bit.
  CHECK(levels >= 1 && levels <= kMaxLevels) << levels;
  CHECK(bucket_size >= 1 && bucket_size <= kMaxBucketSize) << bucket_size;
}

absl::Status QsgdCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                               std::string* payload) {
  CHECK_EQ(input.size(), size());
  const size_t n = size();
  const size_t buckets = NumBuckets();
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kQsgd, kVersion, n, payload);
  payload->resize(MaxPayloadBytes());
  char* const norms = payload->data() + kHeaderBytes;
  char* const packed = norms + sizeof(float) * buckets;

  const float levels = static_cast<float>(levels_);
  const int32_t sign_bit = int32_t{1} << (code_bits_ - 1);
  uint16_t random[kTile];
  const size_t full_buckets = n / bucket_size_;
  size_t norms_done = 0;
  internal::PackTilesByBucket(
      n, code_bits_, bucket_size_, packed,
      [&](size_t start, size_t count) {
        // Norms of the buckets this tile reaches, each computed once (four at a time while
        // four whole buckets are left); the tile's values are then still in cache.
        while (norms_done < buckets && norms_done * bucket_size_ < start + count) {
          const float* const x = input.data() + norms_done * bucket_size_;
          char* const out = norms + sizeof(float) * norms_done;
          if (norms_done + kNormBatch <= full_buckets) {
            float batch[kNormBatch];
            BucketNorms4(x, bucket_size_, batch);
            std::memcpy(out, batch, sizeof(batch));
            norms_done += kNormBatch;
          } else {
            const size_t length = std::min<size_t>(bucket_size_, n - norms_done * bucket_size_);
            internal::StoreFloat(BucketNorm(x, length), out);
            ++norms_done;
          }
        }
        internal::PhiloxBits16(key, start, count, random);
      },
      [&](uint64_t b, size_t start, size_t begin, size_t end, uint32_t* codes) {
        const float norm = internal::LoadFloat(norms + sizeof(float) * b);
        if (norm > 0) {  // Not 0 and not NaN: the values are all finite.
          QuantizeSegment(input.data() + start + begin, random + begin, end - begin,
                          levels / norm, levels, sign_bit, codes + begin);
        } else {
          std::fill(codes + begin, codes + end, 0u);
        }
      });
  return absl::OkStatus();
}

absl::Status QsgdCodec::Validate(absl::string_view body) const {
  const size_t n = size();
  const size_t buckets = NumBuckets();
  const size_t expected = sizeof(float) * buckets + internal::PackedBytes(n, code_bits_);
  if (body.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("qsgd payload body is ", body.size(),
                                                   " bytes, expected ", expected, " (", buckets,
                                                   " buckets, ", code_bits_, " bits per value)"));
  }
  const char* const norms = body.data();
  const char* const packed = norms + sizeof(float) * buckets;
  for (size_t b = 0; b < buckets; ++b) {
    const float norm = internal::LoadFloat(norms + sizeof(float) * b);
    if (std::isnan(norm)) continue;
    if (std::signbit(norm) || !std::isfinite(norm)) {
      return absl::InvalidArgumentError(absl::StrCat("qsgd norm of bucket ", b, " is ", norm,
                                                     "; it must be NaN or finite and >= +0"));
    }
  }
  if (!internal::PaddingIsZero(packed, n, code_bits_)) {
    return absl::InvalidArgumentError("qsgd padding bits are not zero");
  }
  const int32_t levels = static_cast<int32_t>(levels_);
  const int32_t sign_bit = int32_t{1} << (code_bits_ - 1);
  const int32_t level_mask = sign_bit - 1;
  return internal::UnpackTilesByBucket(
      packed, n, code_bits_, bucket_size_,
      [&](uint64_t b, size_t start, size_t begin, size_t end, const uint32_t* codes) {
        const float norm = internal::LoadFloat(norms + sizeof(float) * b);
        const bool zero_only = !(norm > 0);
        if (zero_only ? !internal::AnyNonzero(codes + begin, end - begin)
                      : !HasBadCode(codes + begin, end - begin, levels, level_mask, sign_bit)) {
          return absl::OkStatus();
        }
        // Name the first bad value.
        for (size_t j = begin; j < end; ++j) {
          const uint64_t i = start + j;
          const int32_t code = static_cast<int32_t>(codes[j]);
          if (zero_only && code != 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                "qsgd element ", i, " has a nonzero code in bucket ", b, ", whose norm is ", norm));
          }
          if ((code & level_mask) > levels) {
            return absl::InvalidArgumentError(absl::StrCat(
                "qsgd level ", code & level_mask, " of element ", i, " exceeds levels ", levels));
          }
          if (code == sign_bit) {
            return absl::InvalidArgumentError(
                absl::StrCat("qsgd element ", i, " has a sign bit but level 0"));
          }
        }
        return absl::OkStatus();
      });
}

absl::Status QsgdCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                               absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kQsgd, kVersion, size()));
  TAMP_RETURN_IF_ERROR(Validate(body));

  const size_t n = size();
  const char* const norms = body.data();
  const char* const packed = norms + sizeof(float) * NumBuckets();
  const int level_bits = code_bits_ - 1;
  const int32_t level_mask = (int32_t{1} << level_bits) - 1;
  const float levels = static_cast<float>(levels_);
  return internal::UnpackTilesByBucket(
      packed, n, code_bits_, bucket_size_,
      [&](uint64_t b, size_t start, size_t begin, size_t end, const uint32_t* codes) {
        // A NaN norm gives NaN everywhere (the codes are 0), a zero norm zeros.
        const float scale = internal::LoadFloat(norms + sizeof(float) * b) / levels;
        DequantizeSegment(codes + begin, end - begin, scale, level_mask, level_bits,
                          out.data() + start + begin);
        return absl::OkStatus();
      });
}

}  // namespace tamp::compress
