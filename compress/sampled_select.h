// Exact top-k selection found from a sampled floor, after Deep Gradient Compression's
// sampled threshold (Lin et al., 2018). Shared by the topk and dgc codecs.
//
// SelectLargestSampled() returns exactly what SelectLargestMagnitudes() (compress/select.h)
// returns for the same input: the k largest magnitudes, NaN counted as +inf, ties to the
// lowest indices. The sample only decides how fast that selection is found:
//   1. Sample s entries, one per stratum (SamplePositions(): positions drawn from
//      PhiloxStream(key)), and take as floor t the r-th largest sampled magnitude,
//      r = r0 + ceil(3 sqrt(r0)) + 1 with r0 = ceil(k s / n): the margin of about three
//      standard deviations makes about (1 + 3 / sqrt(r0)) k entries clear the floor (1.3k at
//      k = s = n / 100 and n = 2^20) and the chance that fewer than k do about 0.1%.
//   2. Gather the entries with |x| >= t (one vectorised pass). If there are at least k of
//      them (and at most 4k + 65536), the exact k largest among them are selected: every
//      entry left out is smaller than k gathered ones.
//   3. If fewer than k clear the floor, halve t and repeat, at most kMaxFloorRetries times;
//      if t reaches 0, too many entries clear it, or the sample cannot resolve rank r
//      (r > s, e.g. small chunks), fall back to the exact radix select over the whole chunk.
// Cost: s random reads, one vectorised pass and O(k) work, against SelectLargestMagnitudes()'s
// histogram pass plus that vectorised pass.
#ifndef TAMP_COMPRESS_SAMPLED_SELECT_H_
#define TAMP_COMPRESS_SAMPLED_SELECT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "base/philox.h"

namespace tamp::compress {

// Halvings of the floor before falling back to exact selection.
inline constexpr int kMaxFloorRetries = 3;

// SampledSelectStats
//
// How the selections were found (for monitoring and tests).
struct SampledSelectStats {
  uint64_t selections = 0;
  uint64_t sampled = 0;          // Found from the sampled floor (after any retries).
  uint64_t retries = 0;          // Floor halvings, over all selections.
  uint64_t exact_fallbacks = 0;  // Exact selection over the whole chunk.
};

// SamplePositions()
//
// The s positions the sample of `key` reads, ascending: the chunk splits into s strata,
// [floor(j n / s), floor((j + 1) n / s)), and sample j lies in stratum j at offset
// floor(w_j * length_j / 2^32), w_j = PhiloxStream(key).Bits(j) (UniformDraws::Below(j,
// length_j) when a stratum may reach 2^32 entries). Strata keep the estimate steady when
// magnitudes vary along the chunk (rows of a layer), and memory is read in order.
// 1 <= sample_size <= num_elements.
void SamplePositions(const RandomKey& key, size_t num_elements, size_t sample_size,
                     std::vector<size_t>* positions);

// SampleSize()
//
// s = clamp(round(sample_ratio * n), 1, n); sample_ratio > 0.
size_t SampleSize(double sample_ratio, size_t num_elements);

// SelectLargestSampled()
//
// Sets *indices to SelectLargestMagnitudes(input, k)'s indices (ascending), found as the top
// of this file says with a sample of `sample_size` entries drawn by `key`; counts into
// *stats. 1 <= k <= input.size(), 1 <= sample_size <= input.size(). Scratch is per thread.
void SelectLargestSampled(absl::Span<const float> input, size_t k, size_t sample_size,
                          const RandomKey& key, std::vector<size_t>* indices,
                          SampledSelectStats* stats);

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_SAMPLED_SELECT_H_
