// Codec "qsgd" (id 8): QSGD (Alistarh et al., 2017), bucketed, with s = `levels`.
//
// Each bucket of `bucket_size` consecutive values (the last one may be shorter) travels as
// its L2 norm (fp32) and, per value, a sign and a level l in [0, s]: with
// v = min(|x| * (s / norm), s), l = floor(v) + 1 with probability v - floor(v), else
// floor(v) (s / norm rounded to fp32 once per bucket, so no division per value). Decoding
// gives x' = sign * l * (norm / s), norm / s rounded to fp32 once per bucket.
// E[x'] = x up to fp32 rounding and the 2^-16 grain of the uniforms (P(up) is v - floor(v)
// rounded up to a multiple of 2^-16, so E[l] - v is in [0, 2^-16)), and per value
// Var[x'] = (norm / s)^2 * p(1 - p) <= (norm / s)^2 / 4, so per bucket of d values
// E||x' - x||^2 <= min(d / s^2, sqrt(d) / s) * ||x||^2 (the QSGD bound).
//
// The uniform of value i of the chunk is u = PhiloxStream(key).Bits16(i) / 2^16 (16 bits: one
// Philox block serves 8 values), so the same key gives the same bytes. The norm is sqrt of the sum of squares accumulated in double, in 8
// interleaved partial sums (value j goes to sum j % 8 of its bucket) added pairwise: a
// fixed order, so the encoding is deterministic on every platform.
//
// Parameters: `levels` s, required, 1..32767; `bucket_size` d, 1..2^20, default 512.
//
// Body: the ceil(n / d) bucket norms (fp32), then n codes of B = ceil(log2(s + 1)) + 1 bits
// (BitWriter order, zero-padded to a byte): the level in the low B - 1 bits, the sign
// (1 = negative) in the top bit.
// Payload bytes: 12 + 4 * ceil(n / d) + ceil(n * B / 8).
//
// NaN/Inf: a bucket whose norm is not a finite fp32 (it holds a NaN or ±Inf, or its norm
// exceeds 3.4e38) is sent with a NaN norm and all-zero codes, and every value of it decodes
// to NaN: the problem shows on the receiver instead of vanishing. Other buckets are not
// affected.
//
// The decoder checks everything before writing: exact body length; each norm is NaN or a
// finite fp32 >= +0; each level <= s; no sign bit on a zero level; all codes zero in a
// bucket whose norm is NaN or 0; zero padding. So every chunk has exactly one valid
// encoding per key.
//
// Versions: 2 (this one); 1 drew 24-bit uniforms from PhiloxStream::Uniform(i) and divided
// |x| by the norm per value. Payloads of another version are refused.
//
// Cost: encode = the norms, four buckets at a time, then per 1024-value tile: Philox words, a
// branch-free quantize loop, packing (Philox and the loops have AVX-512/AVX2 versions, picked
// at run time). Decode = a validation pass over the codes, then the decode pass.
//
// Example:
//   levels: 127 bucket_size: 512   -> B = 8: 12 + 4 * ceil(n / 512) + n bytes.
#ifndef TAMP_COMPRESS_QSGD_H_
#define TAMP_COMPRESS_QSGD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class QsgdCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 2;
  static constexpr uint32_t kMaxLevels = 32767;  // Codes fit in 16 bits.
  static constexpr uint32_t kDefaultBucketSize = 512;
  static constexpr uint32_t kMaxBucketSize = uint32_t{1} << 20;

  // QsgdCodec::ValidateSpec()
  //
  // Registry check: `levels` is set and in [1, 32767]; `bucket_size`, if set, in [1, 2^20].
  static absl::Status ValidateSpec(const config::Codec& spec, absl::string_view field_path);

  // QsgdCodec::Create()
  //
  // Registry factory; `spec` has been validated and num_elements >= 1.
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // QsgdCodec::CodeBits()
  //
  // B = ceil(log2(levels + 1)) + 1: bits per value, sign included.
  static int CodeBits(uint32_t levels);

  // QsgdCodec::PayloadBytes()
  //
  // 12 + 4 * ceil(n / bucket_size) + ceil(n * B / 8).
  static size_t PayloadBytes(size_t num_elements, uint32_t levels, uint32_t bucket_size);

  // 1 <= levels <= 32767, 1 <= bucket_size <= 2^20, 1 <= num_elements <= 2^34.
  QsgdCodec(size_t num_elements, uint32_t levels, uint32_t bucket_size);

  uint32_t levels() const { return levels_; }
  uint32_t bucket_size() const { return bucket_size_; }

  CodecId id() const override { return CodecId::kQsgd; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(size(), levels_, bucket_size_); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;

 private:
  size_t NumBuckets() const { return (size() + bucket_size_ - 1) / bucket_size_; }
  // Checks the body (everything but the header) without writing anything.
  absl::Status Validate(absl::string_view body) const;

  const uint32_t levels_;
  const uint32_t bucket_size_;
  const int code_bits_;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_QSGD_H_
