// Pieces shared by the sparsification codecs (topk, dgc, threshold, randomk, randomblock).
//
// Contents:
//   ValueFormat, FloatToHalf(), HalfToFloat()   how kept values travel: fp32 or fp16
//   AppendValues(), GatherValues(), ...          writing and reading value arrays
//   IndexBits(), AppendIndices(), ParseIndices() packed, strictly ascending index lists
//   EntriesKept(), ValidateRatioOrCount()        k from a spec's `ratio` or `count`
//   UniformDraws                                 integer draws in [0, bound) from Philox
//
// Everything here is integer or correctly rounded arithmetic, so a CUDA twin reproduces it
// bit for bit.
//
// Example (a body of k indices, then k values):
//   AppendIndices(indices, IndexBits(n), &payload);
//   GatherValues(input, indices, ValueFormat::kFp16, &payload);
//   ...
//   TAMP_ASSIGN_OR_RETURN(auto parsed, ParseIndices(index_bytes, k, IndexBits(n), n, "topk"));
//   ScatterValues(parsed, value_bytes, ValueFormat::kFp16, out.data());
#ifndef TAMP_COMPRESS_SPARSE_H_
#define TAMP_COMPRESS_SPARSE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/philox.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

// ValueFormat
//
// How a sparse codec's kept values travel: little-endian IEEE fp32 (bit-exact, except that
// every NaN is 0x7fc00000: compress/wire_format.h, canonical NaNs) or IEEE fp16
// (`fp16_values: true`; see FloatToHalf()).
enum class ValueFormat : uint8_t { kFp32, kFp16 };

// ValueFormatOf()
//
// kFp16 when the spec sets `fp16_values: true`.
inline ValueFormat ValueFormatOf(const config::Codec& spec) {
  return spec.fp16_values() ? ValueFormat::kFp16 : ValueFormat::kFp32;
}

// ValueBytes()
//
// Bytes per value: 4 or 2.
inline size_t ValueBytes(ValueFormat format) { return format == ValueFormat::kFp16 ? 2 : 4; }

// FloatToHalf()
//
// IEEE binary16 bits of `x`, rounded to nearest, ties to even. Finite values beyond the fp16
// range saturate to +-65504 (the largest finite fp16) instead of becoming infinite, so error
// feedback carries the excess to the next step rather than the receiver seeing an inf;
// +-inf stay +-inf; every NaN becomes the canonical 0x7e00 (sign and payload dropped).
// Values below 2^-25 in magnitude flush to a signed zero; subnormal fp16 results are rounded
// like any other.
uint16_t FloatToHalf(float x);

// HalfToFloat()
//
// The exact fp32 value of fp16 bits `h`.
float HalfToFloat(uint16_t h);

// AppendValues()
//
// Appends `values` in `format`.
void AppendValues(absl::Span<const float> values, ValueFormat format, std::string* out);

// GatherValues()
//
// Appends input[i] for each i in `indices`, in that order, in `format`.
void GatherValues(absl::Span<const float> input, absl::Span<const size_t> indices,
                  ValueFormat format, std::string* out);

// LoadValue()
//
// Value j of a (possibly unaligned) value array in `format`.
inline float LoadValue(const char* values, size_t j, ValueFormat format) {
  if (format == ValueFormat::kFp16) {
    uint16_t h;
    std::memcpy(&h, values + 2 * j, 2);
    return HalfToFloat(h);
  }
  float v;
  std::memcpy(&v, values + 4 * j, 4);
  return v;
}

// LoadValues()
//
// Decodes `count` values into out[0..count).
void LoadValues(const char* values, size_t count, ValueFormat format, float* out);

// AddValues()
//
// out[j] += value j, for j < count.
void AddValues(const char* values, size_t count, ValueFormat format, float* out);

// ScatterValues() / ScatterAddValues()
//
// out[indices[j]] = value j (or +=). Indices must be in range (checked by the caller).
void ScatterValues(absl::Span<const size_t> indices, const char* values, ValueFormat format,
                   float* out);
void ScatterAddValues(absl::Span<const size_t> indices, const char* values, ValueFormat format,
                      float* out);

// ---------------------------------------------------------------------------------------------
// Packed indices
// ---------------------------------------------------------------------------------------------

// IndexBits()
//
// b = max(1, ceil(log2(n))): the bits of one packed index into a chunk of n >= 1 elements.
int IndexBits(size_t n);

// PackedIndexBytes()
//
// ceil(count * bits / 8): the bytes of `count` packed indices.
inline size_t PackedIndexBytes(size_t count, int bits) {
  return (count * static_cast<size_t>(bits) + 7) / 8;
}

// AppendIndices()
//
// Appends `indices` (each < 2^bits) with BitWriter packing, zero-padded to a byte.
void AppendIndices(absl::Span<const size_t> indices, int bits, std::string* out);

// ParseIndices()
//
// Reads `count` packed `bits`-wide indices from `bytes`, which must be exactly
// PackedIndexBytes(count, bits) long (the caller checks the body length first). Checks that
// each is < n, that they strictly increase and that the padding bits are zero. The result
// lives in a thread-local buffer, valid until this thread's next call. Errors
// (INVALID_ARGUMENT) name the codec, e.g.
//   "topk index 6 (entry 1) is out of range for 5 elements"
//   "topk indices not strictly increasing: entry 1 is 1 after 4"
//   "topk index padding bits are not zero"
absl::StatusOr<absl::Span<const size_t>> ParseIndices(absl::string_view bytes, size_t count,
                                                      int bits, size_t n, absl::string_view codec);

// IndexedValues
//
// A checked body of packed indices followed by their values (topk, dgc, threshold).
// `indices` lives in ParseIndices()'s thread-local buffer; `values` points into the payload
// (unaligned).
struct IndexedValues {
  absl::Span<const size_t> indices;
  const char* values;
};

// ParseIndexedValues()
//
// Checks that `body` is exactly k packed indices (IndexBits(n) bits each) then k values in
// `format`, and the indices as ParseIndices() does. Length errors read
//   "topk payload body is 8 bytes, expected 9 (k = 2, 3 bits per index)"
absl::StatusOr<IndexedValues> ParseIndexedValues(absl::string_view body, size_t k, size_t n,
                                                 ValueFormat format, absl::string_view codec);

// ---------------------------------------------------------------------------------------------
// k from a spec
// ---------------------------------------------------------------------------------------------

// EntriesKept()
//
// k for a chunk of n >= 1 values: with `count`, min(count, n); with `ratio`,
// clamp(round(ratio * n), 1, n). round, not ceil: ratio * n is a double product and often
// an ulp off, e.g. 0.07 * 100 == 7.000000000000001, which ceil would make 8.
size_t EntriesKept(const config::Codec& spec, size_t n);

// ValidateRatioOrCount()
//
// Exactly one of `ratio` (in (0, 1]) and `count` (>= 1) is set; errors name the field:
//   "push: codec 'randomk' needs exactly one of 'ratio' and 'count', got both"
//   "push.ratio: must be in (0, 1], got 0"
absl::Status ValidateRatioOrCount(const config::Codec& spec, absl::string_view field_path,
                                  absl::string_view codec);

// ValidateRatio()
//
// `ratio` is set and in (0, 1]:
//   "push: codec 'dgc' needs 'ratio'"
absl::Status ValidateRatio(const config::Codec& spec, absl::string_view field_path,
                           absl::string_view codec);

// ---------------------------------------------------------------------------------------------
// Random draws
// ---------------------------------------------------------------------------------------------

// UniformDraws
//
// Integer draws from a Philox stream: draw d is the 64-bit number whose low and high words
// are stream elements 2d and 2d + 1, mapped to [0, bound) by the high half of the 128-bit
// product with `bound` (Lemire's method without rejection: a bias below bound / 2^64, and
// no data-dependent loop, so it is cheap on a GPU too). Caches the last Philox block, so
// sequential draws cost half a block each. Not thread-safe; cheap to construct.
//
// Example:
//   UniformDraws draws({.seed = s, .step = t, .chunk = c, .worker = kSharedStream});
//   uint64_t start = draws.Below(0, n - length + 1);
class UniformDraws {
 public:
  explicit UniformDraws(const RandomKey& key) : stream_(key) {}

  // UniformDraws::Bits64()
  //
  // The raw 64 bits of draw d (d < 2^33).
  uint64_t Bits64(uint64_t d) {
    const uint64_t block = d >> 1;
    if (block != cached_block_) {
      words_ = stream_.Block(static_cast<uint32_t>(block));
      cached_block_ = block;
    }
    const int lane = static_cast<int>(d & 1) * 2;
    return uint64_t{words_.v[lane]} | (uint64_t{words_.v[lane + 1]} << 32);
  }

  // UniformDraws::Below()
  //
  // Draw d mapped to [0, bound); bound >= 1.
  uint64_t Below(uint64_t d, uint64_t bound) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Bits64(d)) * bound) >> 64);
  }

 private:
  PhiloxStream stream_;
  r123::Philox4x32::ctr_type words_ = {};
  uint64_t cached_block_ = ~uint64_t{0};
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_SPARSE_H_
