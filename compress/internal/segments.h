// Chunk-wide statistics in segments: the summation order of terngrad (version 3) and efsign
// (version 2), chosen so that a GPU computes it with the whole grid and gets the same bits.
//
// A chunk of n values splits into NumSegments(n) segments of kStatSegment consecutive values
// (the last may be shorter). Each codec computes one partial per segment, in its own fixed
// order within the segment, and the partials combine in PairwiseLevels()' fixed tree: level
// by level, p'[i] = p[2i] + p[2i + 1], an odd last one carried up as it is. Segments are
// independent, so a GPU gives each its own threads; the tree is log2(segments) levels of
// independent additions. A chunk of at most kStatSegment values is one segment: its
// statistics are those of the earlier, whole-chunk definitions.
//
// compress/cuda/internal/codec_math.h restates this for the device (PairwiseLevel()).
#ifndef TAMP_COMPRESS_INTERNAL_SEGMENTS_H_
#define TAMP_COMPRESS_INTERNAL_SEGMENTS_H_

#include <cstddef>
#include <vector>

namespace tamp::compress::internal {

inline constexpr size_t kStatSegment = 8192;  // A multiple of 64 (efsign's blocks).

inline size_t NumSegments(size_t n) { return (n + kStatSegment - 1) / kStatSegment; }

// PairwiseLevels()
//
// The partials (at least one) combined level by level, `combine(a, b)` for each pair, in
// place. Example: 5 partials give ((p0 + p1) + (p2 + p3)) + p4.
template <typename T, typename Combine>
T PairwiseLevels(std::vector<T>* partials, Combine combine) {
  std::vector<T>& p = *partials;
  size_t m = p.size();
  while (m > 1) {
    for (size_t i = 0; i < m / 2; ++i) p[i] = combine(p[2 * i], p[2 * i + 1]);
    if (m % 2 == 1) p[m / 2] = p[m - 1];
    m = (m + 1) / 2;
  }
  return p[0];
}

}  // namespace tamp::compress::internal

#endif  // TAMP_COMPRESS_INTERNAL_SEGMENTS_H_
