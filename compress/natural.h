// Codec "natural" (id 13): natural compression (Horváth et al., 2019). Each value is rounded
// at random to one of the two powers of two around it, unbiasedly, and sent as its sign and
// 8-bit exponent.
//
// For |x| = 2^e * (1 + m), m in [0, 1): x' = sign * 2^(e+1) with probability m, else
// sign * 2^e. So E[x'] = x (up to the 2^-16 grain below), and Var[x'] = 4^e * m(1 - m) <=
// x^2 / 8. Float subnormals
// (|x| < 2^-126) round between 0 and 2^-126 the same way (P(2^-126) = |x| / 2^-126).
// The uniform of value i is U = PhiloxStream(key).Bits16(i) (16 bits: one Philox block
// serves 8 values): round up iff U * 2^7 < the 23 mantissa bits, so P(up) = m rounded up to
// a multiple of 2^-16, and E[x'] = x up to 2^-16 of the gap 2^e between the two powers.
//
// Code (9 bits): the exponent field E of the power (as in fp32: 2^(E - 127)) in the low 8
// bits, the sign (1 = negative) in bit 8. E = 0 is zero, sent without sign (so -0 decodes
// as +0), and the code with sign bit and E = 0 (0x100) is NaN. E = 255 is ±Inf: ±Inf stays
// ±Inf, and |x| >= 2^127 rounds up to Inf with probability m (fp32 has no 2^128).
// NaN stays NaN (as 0x100; sign and payload are not kept).
//
// Body: n codes of 9 bits (BitWriter order: 8 values = 9 bytes), zero-padded to a byte.
// Payload bytes: 12 + ceil(9n / 8). Takes no parameters. Every 9-bit code is valid, so the
// decoder checks the length and the padding bits only.
//
// Versions: 2 (this one); 1 compared the top 24 bits of a 32-bit Philox word per value
// (P(up) = m exactly). Payloads of another version are refused.
//
// Cost: per 1024-value tile, Philox words, a branch-free integer loop, packing 8 codes at a
// time (Philox and the loops have AVX-512/AVX2 versions, picked at run time); decoding is a
// few integer operations per value.
//
// Example:
//   NaturalCodec codec(n);   // 1000 values -> 12 + 1125 bytes.
#ifndef TAMP_COMPRESS_NATURAL_H_
#define TAMP_COMPRESS_NATURAL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class NaturalCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 2;
  static constexpr int kCodeBits = 9;

  // NaturalCodec::Create()
  //
  // Registry factory; `spec` has been validated (and has no parameters).
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // NaturalCodec::PayloadBytes()
  //
  // 12 + ceil(9n / 8).
  static size_t PayloadBytes(size_t num_elements);

  // 1 <= num_elements <= 2^34.
  explicit NaturalCodec(size_t num_elements);

  CodecId id() const override { return CodecId::kNatural; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(size()); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_NATURAL_H_
