// Building blocks of the quantizing codecs (fp16, bf16, qsgd, terngrad, natural, maxmin).
// Internal to compress/.
//
// The codecs work a tile of kTile elements at a time: draw the tile's random words, turn
// the tile (bucket by bucket: ForEachBucketSegment) into small integer codes with
// branch-free loops (TAMP_QUANTIZE_KERNEL: vectorised, with AVX-512/AVX2 versions), then
// pack the codes. Tiles start at multiples of kTile, so every tile starts on a Philox block
// (4 elements, 8 of the 16-bit stream) and on a byte of the packed code stream.
//
// PhiloxBits() draws exactly the words of PhiloxStream(key).Bits(i), and PhiloxBits16()
// the 16-bit values of PhiloxStream(key).Bits16(i) (half the blocks per element), 16 blocks
// per step with AVX-512 or AVX2 where the CPU has them (chosen once, at run time) and 1
// block per step elsewhere; all kernels give identical words (Philox is integer-only).
//
// PackCodes()/UnpackCodes() move `bits`-wide codes (1..16 bits) to and from the bit stream
// of compress/wire_format.h (code j occupies bits j*bits .. j*bits+bits-1, least
// significant bit first; the last byte is zero-padded): whole bytes at a time for 4, 8 and
// 16 bits, 32 codes (36 bytes) at a time for 9 bits with AVX-512 VBMI, else 8 codes
// (= `bits` bytes) per step.
//
// Example (a 9-bit codec; scratch arrays are kTile long):
//   for (size_t start = 0; start < n; start += kTile) {
//     const size_t m = std::min(kTile, n - start);
//     PhiloxBits(key, start, m, random);
//     ... codes[j] = f(input[start + j], random[j]) ...
//     PackCodes(codes, m, 9, body + start / 8 * 9);
//   }
#ifndef TAMP_COMPRESS_INTERNAL_QUANTIZE_H_
#define TAMP_COMPRESS_INTERNAL_QUANTIZE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/philox.h"
#include "proto/config.pb.h"

namespace tamp::compress::internal {

// TAMP_QUANTIZE_KERNEL
//
// Marks a loop function to be compiled for AVX-512, AVX2 and the build's baseline, the
// best one picked when the program loads (function multiversioning; x86-64 GCC/Clang only,
// nothing elsewhere). The loops use only IEEE-exact operations and the build does not
// contract a * b + c into an FMA (-ffp-contract=off), so every version gives the same bits.
// Baseline only under ThreadSanitizer: the resolver that picks a version runs while the
// libraries are relocated, before the TSan runtime is up, and its instrumentation crashes.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define TAMP_QUANTIZE_KERNEL __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TAMP_QUANTIZE_KERNEL
#endif

// Elements per tile: a multiple of 64 (whole Philox blocks, whole bytes of codes of any
// width), small enough that a tile's scratch stays in L1.
inline constexpr size_t kTile = 1024;

// PackedBytes()
//
// ceil(count * bits / 8): the bytes of `count` packed `bits`-wide codes.
inline constexpr uint64_t PackedBytes(uint64_t count, int bits) {
  return (count / 8) * bits + ((count % 8) * bits + 7) / 8;
}

// ForEachBucketSegment()
//
// Splits the tile [start, start + count) at the boundaries of buckets of `bucket_size`
// elements and calls f(bucket, begin, end) for each piece, begin/end relative to `start`.
template <typename F>
inline void ForEachBucketSegment(uint64_t start, size_t count, uint64_t bucket_size, F&& f) {
  size_t begin = 0;
  while (begin < count) {
    const uint64_t bucket = (start + begin) / bucket_size;
    const uint64_t bucket_end = (bucket + 1) * bucket_size - start;
    const size_t end = bucket_end < count ? static_cast<size_t>(bucket_end) : count;
    f(bucket, begin, end);
    begin = end;
  }
}

// Mask()
//
// -1 (all bits) when `condition` holds, else 0. Selects written with masks keep loops
// branch-free: a ternary tends to become a branch, into which the compiler sinks float work,
// and float work may trap, so it can then no longer vectorise the loop.
inline int32_t Mask(bool condition) { return -static_cast<int32_t>(condition); }

// SelectFloat()
//
// condition ? a : b for floats, as a mask (see Mask()).
inline float SelectFloat(bool condition, float a, float b) {
  int32_t a_bits, b_bits;
  std::memcpy(&a_bits, &a, sizeof(a_bits));
  std::memcpy(&b_bits, &b, sizeof(b_bits));
  const int32_t mask = Mask(condition);
  const int32_t bits = (a_bits & mask) | (b_bits & ~mask);
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

// Float4, Float2, Double2
//
// Native 16-byte (and 8-byte) vectors (GCC and Clang vector extensions) for the per-bucket
// reductions, which keep 8 lanes in fixed order (lane k accumulates elements k, k + 8, ...)
// as two Float4 or four Double2 accumulators; plain loops over such lanes do not stay in
// registers, and wider generic vectors are lowered badly on SSE-only targets.
typedef float Float4 __attribute__((vector_size(16)));
typedef float Float2 __attribute__((vector_size(8)));
typedef double Double2 __attribute__((vector_size(16)));

// Float8, Double8
//
// All 8 lanes in one vector, for reductions inside TAMP_QUANTIZE_KERNEL functions, whose
// AVX-512 and AVX2 versions hold them in one or two registers.
typedef float Float8 __attribute__((vector_size(32)));
typedef double Double8 __attribute__((vector_size(64)));

// LoadFloat4(), LoadDouble2(), LoadDouble8()
//
// x[0..4) as floats; x[0..2) and x[0..8) widened to doubles (exactly). Any alignment.
inline Float4 LoadFloat4(const float* x) {
  Float4 v;
  std::memcpy(&v, x, sizeof(v));
  return v;
}
inline Double2 LoadDouble2(const float* x) {
  Float2 v;
  std::memcpy(&v, x, sizeof(v));
  return __builtin_convertvector(v, Double2);
}
// (Through a pointer: returning a vector wider than the baseline's registers would be an
// ABI the build warns about.)
inline void LoadDouble8(const float* x, Double8* out) {
  Float8 v;
  std::memcpy(&v, x, sizeof(v));
  *out = __builtin_convertvector(v, Double8);
}

// LoadFloat(), StoreFloat()
//
// An fp32 at any alignment (payload bodies are byte strings).
inline float LoadFloat(const char* p) {
  float x;
  std::memcpy(&x, p, sizeof(x));
  return x;
}
inline void StoreFloat(float x, char* p) { std::memcpy(p, &x, sizeof(x)); }

// FloatBits()
//
// The bits of an fp32.
inline uint32_t FloatBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

// PhiloxBits()
//
// out[j] = PhiloxStream(key).Bits(first + j) for j < count. `first` is a multiple of 4 and
// first + count <= 2^34 (Philox block numbers are 32-bit).
void PhiloxBits(const RandomKey& key, uint64_t first, size_t count, uint32_t* out);

// PhiloxBits16()
//
// out[j] = PhiloxStream(key).Bits16(first + j) for j < count: half the Philox blocks of
// PhiloxBits() per element. `first` is a multiple of 8 and first + count <= 2^35.
void PhiloxBits16(const RandomKey& key, uint64_t first, size_t count, uint16_t* out);

// PhiloxUniform()
//
// PhiloxStream::ToUniform() of a word from PhiloxBits(): (bits >> 8) * 2^-24, in [0, 1).
inline float PhiloxUniform(uint32_t bits) { return PhiloxStream::ToUniform(bits); }

// PhiloxKernel
//
// The implementations behind PhiloxBits(), for tests that check them against each other.
enum class PhiloxKernel { kPortable, kAvx2, kAvx512 };

// PhiloxKernelSupported()
//
// Whether this build and CPU can run `kernel`; kPortable always can.
bool PhiloxKernelSupported(PhiloxKernel kernel);

// PhiloxBitsWith(), PhiloxBits16With()
//
// PhiloxBits() and PhiloxBits16() with the given kernel, which must be supported.
void PhiloxBitsWith(PhiloxKernel kernel, const RandomKey& key, uint64_t first, size_t count,
                    uint32_t* out);
void PhiloxBits16With(PhiloxKernel kernel, const RandomKey& key, uint64_t first, size_t count,
                      uint16_t* out);

// PackCodes()
//
// Writes codes[0..count) (each < 2^bits, 1 <= bits <= 16) to out[0..PackedBytes(count, bits)),
// zero-padding the last byte.
void PackCodes(const uint32_t* codes, size_t count, int bits, char* out);

// PaddingIsZero()
//
// Whether the bits after `count` packed `bits`-wide codes, up to the end of the last of
// their PackedBytes(count, bits) bytes at `packed`, are all zero.
inline bool PaddingIsZero(const char* packed, uint64_t count, int bits) {
  const int used = static_cast<int>((count % 8) * bits % 8);  // Bits used in the last byte.
  if (used == 0) return true;
  const auto last = static_cast<uint8_t>(packed[PackedBytes(count, bits) - 1]);
  return (last >> used) == 0;
}

// UnpackCodes()
//
// Reads `count` codes from in[0..PackedBytes(count, bits)) into codes[0..count). Returns
// false when the padding bits after the last code are not all zero (codes are read anyway).
bool UnpackCodes(const char* in, size_t count, int bits, uint32_t* codes);

// Whether any of codes[0..count) is nonzero.
bool AnyNonzero(const uint32_t* codes, size_t count);

// PackTilesByBucket()
//
// The encoding walk of the bucketed codecs (qsgd, maxmin) over n elements, a tile at a time:
// tile(start, count) for the tile [start, start + count) (draw its random words, ready the
// statistics of the buckets it reaches), then code(bucket, start, begin, end, codes) for each
// piece of a bucket in it (ForEachBucketSegment()), which writes codes[begin..end) of the
// tile's kTile codes; then the tile's codes are packed, `bits` wide, into `packed`.
template <typename Tile, typename Code>
inline void PackTilesByBucket(size_t n, int bits, uint64_t bucket_size, char* packed, Tile&& tile,
                              Code&& code) {
  uint32_t codes[kTile];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = n - start < kTile ? n - start : kTile;
    tile(start, count);
    ForEachBucketSegment(start, count, bucket_size, [&](uint64_t bucket, size_t begin, size_t end) {
      code(bucket, start, begin, end, codes);
    });
    PackCodes(codes, count, bits, packed + start / 8 * bits);
  }
}

// UnpackTilesByBucket()
//
// The decoding walk: unpacks the n `bits`-wide codes at `packed` a tile at a time and calls
// f(bucket, start, begin, end, codes) for each piece of a bucket in the tile that starts at
// element `start`; codes[begin..end) (of the tile's kTile) are those of elements
// start + begin .. start + end - 1. f returns an absl::Status: the first error ends the walk
// and is returned. The padding is not checked here (PaddingIsZero()).
template <typename F>
inline absl::Status UnpackTilesByBucket(const char* packed, size_t n, int bits,
                                        uint64_t bucket_size, F&& f) {
  uint32_t codes[kTile];
  for (size_t start = 0; start < n; start += kTile) {
    const size_t count = n - start < kTile ? n - start : kTile;
    UnpackCodes(packed + start / 8 * bits, count, bits, codes);
    absl::Status status;
    ForEachBucketSegment(start, count, bucket_size, [&](uint64_t bucket, size_t begin, size_t end) {
      if (status.ok()) status = f(bucket, start, begin, end, static_cast<const uint32_t*>(codes));
    });
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// Bucketed codecs (qsgd, maxmin): checks an explicitly set `bucket_size` is in
// [1, max_bucket_size], the error naming "<field_path>.bucket_size".
absl::Status ValidateBucketSize(const config::Codec& spec, absl::string_view field_path,
                                uint32_t max_bucket_size);

// The spec's `bucket_size`, or `default_bucket_size` when it is not set.
inline uint32_t BucketSizeOf(const config::Codec& spec, uint32_t default_bucket_size) {
  return spec.has_bucket_size() ? spec.bucket_size() : default_bucket_size;
}

}  // namespace tamp::compress::internal

#endif  // TAMP_COMPRESS_INTERNAL_QUANTIZE_H_
