// Exact selection of the k entries of largest magnitude, shared by topk and dgc.
//
// Order: entries compare by MagnitudeKey(x), which orders like |x| with NaN (any payload,
// either sign) counted as +inf, so a NaN is always selected ahead of finite values and
// surfaces at the receiver instead of vanishing into a residual; +0 and -0 are equal. Among
// equal keys the lower index ranks higher. The selection is therefore a pure function of
// the input: the same k indices on every platform.
//
// Algorithm (radix select on the 31-bit keys; float bits with the sign cleared are monotonic
// in |x|):
//   1. One pass histograms the top 11 key bits (8 exponent + 3 mantissa bits) of all n
//      entries and finds the bin B holding the k-th largest key.
//   2. One vectorised pass (ForEachKeyAtLeast(): AVX-512, AVX2 or SSE2 compares into bit
//      masks, chosen at run time) gathers (index, key) of the entries in B or above: about k
//      plus one bin, a few percent of n for gradient-like data.
//   3. Three histogram rounds (11/11/9 bits) over the gathered keys, each keeping only the
//      chosen bin for the next, find the exact k-th key T and how many entries equal to T
//      are needed; one branch-free pass over the gathered entries emits the selection in
//      index order.
// When B alone holds very many entries (more than 4k + 65536: many equal magnitudes, e.g.
// mostly zeros), step 2 would gather most of the chunk, so instead rounds 2 and 3 histogram
// the input itself and one compaction pass emits the selection: at most five passes and
// O(1) extra memory. Scratch (O(k) gathered entries) is thread-local, so concurrent calls
// from different threads are safe.
//
// Example:
//   std::vector<size_t> indices;
//   SelectLargestMagnitudes(gradient, k, &indices);  // k indices, ascending
#ifndef TAMP_COMPRESS_SELECT_H_
#define TAMP_COMPRESS_SELECT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/numeric/bits.h"
#include "absl/types/span.h"

namespace tamp::compress {

// Bits of +inf: the key of every infinity and NaN.
inline constexpr uint32_t kInfinityKey = 0x7f800000;

// MagnitudeKey()
//
// The sort key of |x|: the bits of |x| (monotonic in |x| for every non-NaN float, +0 and -0
// both 0), with NaN mapped to the key of +inf.
inline uint32_t MagnitudeKey(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits &= 0x7fffffffu;
  return bits < kInfinityKey ? bits : kInfinityKey;
}

// SelectLargestMagnitudes()
//
// Sets *indices to the k (1 <= k <= input.size()) indices of the largest keys, ties going to
// the lowest indices, in ascending order.
void SelectLargestMagnitudes(absl::Span<const float> input, size_t k, std::vector<size_t>* indices);

// SelectOutcome
//
// How SelectLargestAtLeast() ended.
enum class SelectOutcome {
  kSelected,  // *indices holds the selection.
  kTooFew,    // Fewer than k entries have a key >= min_key.
  kTooMany,   // More than max_candidates do.
};

// SelectLargestAtLeast()
//
// Steps 2-3 above with a floor the caller already knows (dgc estimates it from a sample):
// gathers the entries with key >= min_key; if there are at least k and at most
// max_candidates of them, sets *indices to exactly what SelectLargestMagnitudes() would
// (every entry below the floor ranks below all of at least k gathered ones, so the k largest
// are all gathered) and returns kSelected. Otherwise returns why not, with *indices
// unspecified; the scan stops as soon as max_candidates is exceeded. 1 <= k <= input.size().
SelectOutcome SelectLargestAtLeast(absl::Span<const float> input, size_t k, uint32_t min_key,
                                   size_t max_candidates, std::vector<size_t>* indices);

// KthLargestKey()
//
// The r-th largest of `keys` (1 <= r <= keys.size()), by radix select. `keys` is unchanged.
uint32_t KthLargestKey(absl::Span<const uint32_t> keys, size_t r);

namespace select_internal {

// Entries per tile of ForEachKeyAtLeast(): a multiple of 64, small enough that a tile's masks
// (kScanTile / 8 bytes) stay in registers or L1.
inline constexpr size_t kScanTile = 2048;

// KeyMasks()
//
// For n <= kScanTile entries x[0..n): bit b of masks[w] is set iff
// MagnitudeKey(x[64 w + b]) >= min_key; bits past n are 0. Vectorised with AVX-512, AVX2 or
// SSE2, whichever the CPU has (chosen once, at run time); all give identical masks.
void KeyMasks(const float* x, size_t n, uint32_t min_key, uint64_t* masks);

// The implementations behind KeyMasks(), for tests that check them against each other.
enum class ScanKernel { kPortable, kSse2, kAvx2, kAvx512 };
bool ScanKernelSupported(ScanKernel kernel);
void KeyMasksWith(ScanKernel kernel, const float* x, size_t n, uint32_t min_key, uint64_t* masks);

}  // namespace select_internal

// ForEachKeyAtLeast()
//
// Calls f(i) for every i, ascending, with MagnitudeKey(input[i]) >= min_key, until f
// returns false. Returns false iff f did. Each tile of 2048 entries is first tested into a
// bit mask with vector compares, then the set bits are visited, so the cost is about that of
// reading the input when few entries qualify.
template <typename F>
bool ForEachKeyAtLeast(absl::Span<const float> input, uint32_t min_key, F&& f) {
  using select_internal::kScanTile;
  uint64_t masks[kScanTile / 64];
  const size_t n = input.size();
  for (size_t start = 0; start < n; start += kScanTile) {
    const size_t m = n - start < kScanTile ? n - start : kScanTile;
    select_internal::KeyMasks(input.data() + start, m, min_key, masks);
    for (size_t w = 0; w < (m + 63) / 64; ++w) {
      for (uint64_t bits = masks[w]; bits != 0; bits &= bits - 1) {
        if (!f(start + 64 * w + absl::countr_zero(bits))) return false;
      }
    }
  }
  return true;
}

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_SELECT_H_
