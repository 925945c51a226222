// Codec "fp16" (id 2): every value as an IEEE 754 binary16 ("half"), rounded to nearest even.
//
// Body: n little-endian binary16 values. Payload bytes: 12 + 2n. Takes no parameters.
//
// Rounding is exact round-to-nearest-even over the whole range, subnormal halves included.
// FloatToFp16() below is the portable definition (integer and exact float operations only,
// so it gives the same bits on every platform whatever the FPU's rounding mode or
// flush-to-zero setting); on x86 CPUs with F16C the batch conversions use vcvtps2ph, which
// gives identical bits (checked by fp16_test):
//   - |x| >= 65520 (halfway between 65504, the largest half, and 2^16) becomes ±Inf;
//     65504 <= |x| < 65520 becomes ±65504. Under error feedback an overflow makes the
//     residual infinite, so a chunk that can exceed 65504 wants bf16 (or clipping) instead.
//   - |x| <= 2^-25 becomes ±0 (2^-25 is a tie and goes to the even 0); subnormal halves
//     (2^-24 .. 2^-14) keep what precision they have.
//   - ±0 and ±Inf are kept, sign included. Every NaN becomes the canonical 0x7e00, whatever
//     its sign and payload (compress/wire_format.h, canonical NaNs; version 2, where version
//     1 kept the sign and the top payload bits as vcvtps2ph does).
// Decoding is exact (every half is a float; a NaN comes back quiet, payload kept). Every
// 16-bit code is valid, so the decoder checks only the header and the length.
//
// Cost: one vectorised pass (F16C, else branch-free SSE code) over tiles of 1024 values.
//
// Example:
//   Fp16Codec codec(n);
//   TAMP_RETURN_IF_ERROR(codec.Encode(values, key, &payload));   // 12 + 2n bytes
#ifndef TAMP_COMPRESS_FP16_H_
#define TAMP_COMPRESS_FP16_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "compress/wire_format.h"
#include "proto/config.pb.h"

namespace tamp::compress {

namespace fp16_internal {

// condition ? a : b as bit masks. Written as a ternary, the compiler turns it into a branch,
// sinks the float work of the unused side into it, and can then no longer vectorise the
// loops below (float operations may trap, so they cannot be made unconditional again).
inline int32_t Select(bool condition, int32_t a, int32_t b) {
  const int32_t mask = -static_cast<int32_t>(condition);
  return (a & mask) | (b & ~mask);
}

}  // namespace fp16_internal

// FloatToFp16()
//
// The binary16 bits of `x`, rounded to nearest even, with the overflow and NaN rules above
// (x86's F16C keeps NaN payloads: the batch conversion canonicalises NaNs first).
// Example: FloatToFp16(1.0f) == 0x3c00, FloatToFp16(65520.0f) == 0x7c00 (+Inf).
inline uint16_t FloatToFp16(float x) {
  // Signed 32-bit arithmetic throughout: SSE has signed compares and conversions only, and
  // with them this loop vectorises. |x|'s bits fit in 31 bits.
  int32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  const int32_t sign = (bits >> 16) & 0x8000;
  const int32_t magnitude = bits & 0x7fffffff;
  // Normal halves (2^-14 <= |x| < 65520): rebias the exponent (127 -> 15) and round the 23
  // mantissa bits to 10 with the usual add-half-minus-one-plus-lsb; a carry out of the
  // mantissa correctly bumps the exponent (up to 0x7c00, Inf, at 65520).
  const int32_t normal = (magnitude - (112 << 23) + 0xfff + ((magnitude >> 13) & 1)) >> 13;
  // Subnormal halves (|x| < 2^-14): the half is round(|x| * 2^24) as an integer. The
  // clamp keeps the float finite (and the conversion defined) for the lanes that do not use
  // it; |x| * 2^24 <= 1024 is exact, as are its integer part and the fraction.
  const int32_t clamped = magnitude < 0x38800000 ? magnitude : 0x38800000;
  float scaled;
  std::memcpy(&scaled, &clamped, sizeof(scaled));
  scaled *= 16777216.0f;  // 2^24
  // Truncation is floor here (scaled >= 0), and unlike std::floor it vectorises without
  // -fno-trapping-math.
  const int32_t whole_int = static_cast<int32_t>(scaled);
  const float fraction = scaled - static_cast<float>(whole_int);
  const int32_t round_up = fp16_internal::Select(
      fraction > 0.5f, 1, fp16_internal::Select(fraction == 0.5f, whole_int & 1, 0));
  const int32_t subnormal = whole_int + round_up;  // 0x400 (= 2^-14) is right too.

  int32_t half = fp16_internal::Select(magnitude < 0x38800000, subnormal, normal);
  half = fp16_internal::Select(magnitude >= 0x477ff000, 0x7c00, half);  // 65520 up, Inf.
  return static_cast<uint16_t>(
      fp16_internal::Select(magnitude > 0x7f800000, kWireHalfNaNBits, sign | half));
}

// Fp16ToFloat()
//
// The float equal to binary16 `half`, exactly; a NaN comes back quiet with its payload
// (what vcvtph2ps does).
inline float Fp16ToFloat(uint16_t half) {
  const int32_t sign = static_cast<int32_t>(half & 0x8000) << 16;
  const int32_t magnitude = half & 0x7fff;
  const int32_t normal = (magnitude << 13) + (112 << 23);
  const int32_t infinity = (magnitude << 13) + (224 << 23);                      // Exponent 255.
  const int32_t nan = infinity | 0x00400000;                                     // Quiet.
  const float subnormal = static_cast<float>(magnitude) * (1.0f / 16777216.0f);  // Exact.
  int32_t subnormal_bits;
  std::memcpy(&subnormal_bits, &subnormal, sizeof(subnormal_bits));
  int32_t bits = fp16_internal::Select(magnitude < 0x0400, subnormal_bits, normal);
  bits = fp16_internal::Select(magnitude >= 0x7c00, infinity, bits);
  bits = fp16_internal::Select(magnitude > 0x7c00, nan, bits);
  bits |= sign;
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// FloatsToFp16s()
//
// out[i] = FloatToFp16(in[i]) for i < n; `out` is n * 2 bytes, little-endian, any alignment.
void FloatsToFp16s(const float* in, size_t n, char* out);

// Fp16sToFloats()
//
// out[i] = Fp16ToFloat(half i of in) for i < n; `in` is n * 2 bytes, any alignment.
void Fp16sToFloats(const char* in, size_t n, float* out);

// Fp16Kernel
//
// The implementations behind the batch conversions, for tests that check them against each
// other: kPortable (FloatToFp16/Fp16ToFloat in vectorised loops) and kF16c (x86 F16C).
enum class Fp16Kernel { kPortable, kF16c };

// Fp16KernelSupported()
//
// Whether this build and CPU can run `kernel`; kPortable always can.
bool Fp16KernelSupported(Fp16Kernel kernel);

// FloatsToFp16sWith(), Fp16sToFloatsWith()
//
// The batch conversions with a given (supported) kernel.
void FloatsToFp16sWith(Fp16Kernel kernel, const float* in, size_t n, char* out);
void Fp16sToFloatsWith(Fp16Kernel kernel, const char* in, size_t n, float* out);

class Fp16Codec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 2;

  // Fp16Codec::Create()
  //
  // Registry factory; `spec` has been validated (and has no parameters).
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // Fp16Codec::PayloadBytes()
  //
  // 12 + 2n.
  static size_t PayloadBytes(size_t num_elements);

  explicit Fp16Codec(size_t num_elements) : Codec(num_elements) {}

  CodecId id() const override { return CodecId::kFp16; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(size()); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_FP16_H_
