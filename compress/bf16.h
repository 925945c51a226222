// Codec "bf16" (id 3): every value as a bfloat16 (the top 16 bits of an fp32), rounded to
// nearest even.
//
// Body: n little-endian bfloat16 values. Payload bytes: 12 + 2n. Takes no parameters.
//
// bfloat16 keeps fp32's 8-bit exponent, so there is no overflow short of the fp32 limit and
// no extra underflow: the low 16 bits are rounded away to nearest even (FloatToBf16()),
// subnormals included. Consequences:
//   - |x| >= 0x1.fep127 (3.3961e38, halfway between the largest bfloat16 0x7f7f and 2^128)
//     rounds to ±Inf, as fp32 arithmetic would; everything below stays finite.
//   - ±0 and ±Inf are kept, sign included. Every NaN becomes the canonical 0x7fc0, whatever
//     its sign and payload (compress/wire_format.h, canonical NaNs; version 2, where version
//     1 kept the top 16 bits with the quiet bit set).
// Decoding (x = bits << 16) is exact; every 16-bit code is valid, so the decoder checks only
// the header and the length.
//
// Cost: integer-only, branch-free loops over tiles of 1024 values, vectorised by the compiler
// (AVX-512/AVX2 versions picked at load time where the CPU has them).
//
// Example:
//   Bf16Codec codec(n);
//   TAMP_RETURN_IF_ERROR(codec.Encode(values, key, &payload));   // 12 + 2n bytes
#ifndef TAMP_COMPRESS_BF16_H_
#define TAMP_COMPRESS_BF16_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "compress/wire_format.h"
#include "proto/config.pb.h"

namespace tamp::compress {

// FloatToBf16()
//
// The bfloat16 bits of `x`, rounded to nearest even (every NaN: 0x7fc0).
// Example: FloatToBf16(1.0f) == 0x3f80; FloatToBf16(1.00390625f) (1 + 2^-8, a tie)
// == 0x3f80.
inline uint16_t FloatToBf16(float x) {
  // Signed arithmetic where it matters for vectorisation (SSE compares are signed); the
  // rounding add cannot overflow 32 bits: the largest non-NaN input, 0xff800000 (-Inf), plus
  // 0x7fff stays below 2^32.
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const int32_t magnitude = static_cast<int32_t>(bits & 0x7fffffffu);
  const int32_t is_nan = -static_cast<int32_t>(magnitude > 0x7f800000);
  return static_cast<uint16_t>((kWireBf16NaNBits & is_nan) | (rounded & ~is_nan));
}

// Bf16ToFloat()
//
// The float equal to bfloat16 `half` (exact).
inline float Bf16ToFloat(uint16_t half) {
  const uint32_t bits = static_cast<uint32_t>(half) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// FloatsToBf16s()
//
// out[i] = FloatToBf16(in[i]) for i < n; `out` is n * 2 bytes, little-endian, any
// alignment.
void FloatsToBf16s(const float* in, size_t n, char* out);

// Bf16sToFloats()
//
// out[i] = Bf16ToFloat(value i of in) for i < n; `in` is n * 2 bytes, any alignment.
void Bf16sToFloats(const char* in, size_t n, float* out);

class Bf16Codec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 2;

  // Bf16Codec::Create()
  //
  // Registry factory; `spec` has been validated (and has no parameters).
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // Bf16Codec::PayloadBytes()
  //
  // 12 + 2n.
  static size_t PayloadBytes(size_t num_elements);

  explicit Bf16Codec(size_t num_elements) : Codec(num_elements) {}

  CodecId id() const override { return CodecId::kBf16; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(size()); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_BF16_H_
