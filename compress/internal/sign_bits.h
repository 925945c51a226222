// Sign bit-planes shared by the sign codecs (signsgd, efsign, signum). Internal to compress/.
//
// A sign plane of n values is ceil(n / 8) bytes: bit i (bit i % 8 of byte i / 8, the
// BitWriter order of compress/wire_format.h) is 1 iff value i is negative, i.e. x < 0.
// So +0, -0 and NaN (of either sign bit) all count as + and pack as 0. Bits from n up to
// the end of the last byte are padding and are 0.
//
// Packing works on blocks of 64 values: one compare per value into a byte mask (a loop the
// compiler vectorises), then a multiply gathers each 8 mask bytes into 8 bits. 64 bits
// stored little-endian are exactly bytes 8w..8w+7 of the plane, so whole words are
// memcpy'd into place.
//
// Example:
//   std::string plane(SignBytes(n), '\0');
//   PackSigns(x, plane.data());
//   if (!SignPaddingIsZero(plane, n)) ...;
//   UnpackSigns(plane, 1.0f, out);      // out[i] = x[i] < 0 ? -1 : +1
#ifndef TAMP_COMPRESS_INTERNAL_SIGN_BITS_H_
#define TAMP_COMPRESS_INTERNAL_SIGN_BITS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"

namespace tamp::compress::internal {

inline constexpr size_t kSignBlock = 64;  // Values per packed word.

// SignBytes()
//
// ceil(n / 8): bytes of the sign plane of n values.
inline constexpr size_t SignBytes(size_t n) { return n / 8 + (n % 8 != 0); }

// PackSignWord()
//
// Packs the 64 values at `x`: bit j of the result is 1 iff x[j] < 0.
inline uint64_t PackSignWord(const float* x) {
  // Each 8 mask bytes (each 0 or 1), read as a little-endian uint64, hold value k at bit 8k.
  // Times kGather = sum_j 2^(7j+7), value k lands at bit 8k + 7j + 7; all 64 of these
  // exponents are distinct (8k + 7j determines k and j for k, j < 8), so the product is a
  // carry-free OR, and bit 56 + k receives value k (from j = 7 - k) and nothing else.
  constexpr uint64_t kGather = 0x0102040810204080ull;
  uint8_t negative[kSignBlock];
  for (size_t j = 0; j < kSignBlock; ++j) negative[j] = x[j] < 0.0f;
  uint64_t word = 0;
  for (int k = 0; k < 8; ++k) {
    uint64_t bytes;
    std::memcpy(&bytes, negative + 8 * k, sizeof(bytes));
    word |= ((bytes * kGather) >> 56) << (8 * k);
  }
  return word;
}

// StoreSignWord()
//
// Writes the low `num_bytes` (1..8) bytes of `word`, little-endian, at `out`.
inline void StoreSignWord(uint64_t word, size_t num_bytes, char* out) {
  std::memcpy(out, &word, num_bytes);  // Little-endian host (wire_format.h asserts it).
}

// PackSignTail()
//
// Packs the last `count` < 64 values of a plane (those after the whole words) into
// SignBytes(count) bytes at `out`, padding bits 0. Does nothing for count == 0.
void PackSignTail(const float* x, size_t count, char* out);

// PackSigns()
//
// Writes the SignBytes(x.size()) bytes of the sign plane of `x` at `out`.
void PackSigns(absl::Span<const float> x, char* out);

// SignPaddingIsZero()
//
// Whether the padding bits of `plane` (SignBytes(n) bytes, checked by the caller) are 0.
bool SignPaddingIsZero(absl::string_view plane, size_t n);

// ParseSignPayload()
//
// For codecs whose body is just the sign plane (signsgd, signum): checks the header, that
// the body is SignBytes(n) bytes and that its padding is 0; returns the plane. Errors
// (INVALID_ARGUMENT) name the codec: "signsgd payload body is 3 bytes, expected 2",
// "signsgd sign padding bits are not zero".
absl::StatusOr<absl::string_view> ParseSignPayload(absl::string_view payload, CodecId id,
                                                   uint8_t version, size_t n);

// UnpackSigns()
//
// out[i] = bit i ? -magnitude : magnitude, as magnitude * (+-1.0f): a NaN magnitude gives
// NaN, +inf gives +-inf, 0 gives +-0. `plane` holds SignBytes(out.size()) bytes.
void UnpackSigns(absl::string_view plane, float magnitude, absl::Span<float> out);

// UnpackSignsAdd()
//
// accumulator[i] += magnitude * (+-1.0f), signs as in UnpackSigns().
void UnpackSignsAdd(absl::string_view plane, float magnitude, absl::Span<float> accumulator);

// MajorityVote()
//
// v = sign(v) for each entry: +1 if v > 0, -1 if v < 0, and 0 for a tie (v == 0) or NaN.
// Applied to a sum of +-1 votes, this is the majority vote; no division by the number of
// voters.
void MajorityVote(absl::Span<float> votes);

}  // namespace tamp::compress::internal

#endif  // TAMP_COMPRESS_INTERNAL_SIGN_BITS_H_
