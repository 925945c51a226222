// Codec "maxmin" (id 14): bucketed min-max linear quantization.
//
// Each bucket of `bucket_size` consecutive values (the last one may be shorter) travels as
// its min and max (fp32 each) and, per value, a `bits`-wide code c in [0, L], L = 2^bits - 1,
// on the uniform grid min + c * step, step = (max - min) / L (computed in fp32 by both
// sides). With q = (x - min) / step:
//   - nearest (default): c = floor(q + 1/2) (ties up), so |x - x'| <= step / 2;
//   - stochastic: c = floor(q) + 1 with probability q - floor(q), using
//     PhiloxStream(key).Uniform(i) for value i, so E[x'] = x and |x - x'| < step
// (both up to fp32 rounding). Decoding gives x' = min + c * step.
//
// Parameters: `bits` 1..8, required; `bucket_size` 1..2^20, default 512; `stochastic`,
// default false.
//
// Body: the ceil(n / d) (min, max) pairs (fp32), then n codes of `bits` bits (BitWriter
// order, zero-padded to a byte).
// Payload bytes: 12 + 8 * ceil(n / d) + ceil(n * bits / 8).
//
// NaN/Inf: a bucket holding a NaN or ±Inf, or whose range max - min overflows fp32, is sent
// with min = max = NaN and all-zero codes, and every value of it decodes to NaN (the
// problem shows instead of vanishing). A bucket of equal values (max = min) has zero codes
// and decodes exactly.
//
// The decoder checks before writing: exact body length; each pair is (NaN, NaN) or finite
// with min <= max and a finite max - min; all codes zero in NaN buckets and in buckets with
// max = min; zero padding. So every chunk has exactly one valid encoding per key.
//
// Cost: encode = per 1024-value tile, the ranges of the buckets it reaches (one pass each),
// Philox words when stochastic, a branch-free quantize loop and packing (Philox and the loops
// have AVX-512/AVX2 versions, picked at run time). Decode = one pass (plus a check pass over
// the codes only when some bucket must have zero codes).
//
// Example:
//   bits: 4 bucket_size: 512   -> 12 + 8 * ceil(n / 512) + ceil(n / 2) bytes.
#ifndef TAMP_COMPRESS_MAXMIN_H_
#define TAMP_COMPRESS_MAXMIN_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class MaxMinCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 1;
  static constexpr uint32_t kMaxBits = 8;
  static constexpr uint32_t kDefaultBucketSize = 512;
  static constexpr uint32_t kMaxBucketSize = uint32_t{1} << 20;

  // MaxMinCodec::ValidateSpec()
  //
  // Registry check: `bits` is set and in [1, 8]; `bucket_size`, if set, in [1, 2^20].
  static absl::Status ValidateSpec(const config::Codec& spec, absl::string_view field_path);

  // MaxMinCodec::Create()
  //
  // Registry factory; `spec` has been validated and num_elements >= 1.
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // MaxMinCodec::PayloadBytes()
  //
  // 12 + 8 * ceil(n / bucket_size) + ceil(n * bits / 8).
  static size_t PayloadBytes(size_t num_elements, int bits, uint32_t bucket_size);

  // 1 <= bits <= 8, 1 <= bucket_size <= 2^20, 1 <= num_elements <= 2^34.
  MaxMinCodec(size_t num_elements, int bits, uint32_t bucket_size, bool stochastic);

  int bits() const { return bits_; }
  uint32_t bucket_size() const { return bucket_size_; }
  bool stochastic() const { return stochastic_; }

  CodecId id() const override { return CodecId::kMaxMin; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(size(), bits_, bucket_size_); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;

 private:
  size_t NumBuckets() const { return (size() + bucket_size_ - 1) / bucket_size_; }
  // Checks the body (everything but the header) without writing anything.
  absl::Status Validate(absl::string_view body) const;

  const int bits_;
  const uint32_t bucket_size_;
  const bool stochastic_;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_MAXMIN_H_
