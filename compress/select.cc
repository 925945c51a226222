#include "compress/select.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "glog/logging.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tamp::compress {
namespace {

// Radix levels over the 31-bit keys: bits 30..20, 19..9, 8..0.
struct Level {
  int shift;
  uint32_t mask;
};
constexpr std::array<Level, 3> kLevels = {{{20, 0x7ff}, {9, 0x7ff}, {0, 0x1ff}}};
constexpr size_t kTopBins = 2048;

// Counts are 64-bit: a chunk may hold 2^32 or more entries.
using Histogram = std::array<uint64_t, kTopBins>;

// The bin (scanning from the top) that holds the `rank`-th largest key among those
// histogrammed, and how many keys lie in higher bins.
struct Bin {
  uint32_t bin;
  size_t above;
};
Bin FindBin(const uint64_t* histogram, size_t bins, size_t rank) {
  size_t above = 0;
  for (size_t b = bins; b-- > 0;) {
    if (above + histogram[b] >= rank) return {static_cast<uint32_t>(b), above};
    above += histogram[b];
  }
  LOG(FATAL) << "rank " << rank << " exceeds the " << above << " keys histogrammed";
}

// The exact cutoff of the k largest keys: they are the keys > `key` plus the first `ties`
// keys (in index order) equal to `key`, 1 <= ties.
struct Cutoff {
  uint32_t key;
  size_t ties;
};

// Radix select over m keys read through key_at(i). `top` optionally holds the histogram of
// level 0 over the same keys, saving that pass.
template <typename KeyAt>
Cutoff RadixCutoff(size_t m, size_t k, const KeyAt& key_at, const Histogram* top) {
  DCHECK(k >= 1 && k <= m) << k << " of " << m;
  Histogram histogram;
  uint32_t prefix = 0;
  size_t above = 0;
  int prefix_shift = 31;  // Keys agree with `prefix` above this bit (none yet: keys < 2^31).
  for (size_t level = 0; level < kLevels.size(); ++level) {
    const auto [shift, mask] = kLevels[level];
    if (level == 0 && top != nullptr) {
      histogram = *top;
    } else {
      histogram.fill(0);
      const uint32_t want = prefix >> prefix_shift;
      for (size_t i = 0; i < m; ++i) {
        const uint32_t key = key_at(i);
        if ((key >> prefix_shift) == want) ++histogram[(key >> shift) & mask];
      }
    }
    const Bin bin = FindBin(histogram.data(), mask + 1, k - above);
    prefix |= bin.bin << shift;
    above += bin.above;
    prefix_shift = shift;
  }
  return {prefix, k - above};
}

void TopHistogramOf(const float* x, size_t n, Histogram* out) {
  constexpr int kWays = 8;
  thread_local std::array<std::array<uint32_t, kTopBins>, kWays> partial;
  for (auto& h : partial) h.fill(0);
  size_t i = 0;
#if defined(__SSE4_1__)
  const __m128i abs_mask = _mm_set1_epi32(0x7fffffff);
  const __m128i infinity = _mm_set1_epi32(static_cast<int32_t>(kInfinityKey));
  const auto bins = [&](size_t at) {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + at));
    return _mm_srli_epi32(_mm_min_epu32(_mm_and_si128(bits, abs_mask), infinity), 20);
  };
  for (; i + 8 <= n; i += 8) {
    const __m128i lo = bins(i);
    const __m128i hi = bins(i + 4);
    const uint64_t a = _mm_cvtsi128_si64(lo), b = _mm_extract_epi64(lo, 1);
    const uint64_t c = _mm_cvtsi128_si64(hi), d = _mm_extract_epi64(hi, 1);
    ++partial[0][static_cast<uint32_t>(a)];
    ++partial[1][a >> 32];
    ++partial[2][static_cast<uint32_t>(b)];
    ++partial[3][b >> 32];
    ++partial[4][static_cast<uint32_t>(c)];
    ++partial[5][c >> 32];
    ++partial[6][static_cast<uint32_t>(d)];
    ++partial[7][d >> 32];
  }
#else
  for (; i + kWays <= n; i += kWays) {
    for (int w = 0; w < kWays; ++w) ++partial[w][MagnitudeKey(x[i + w]) >> 20];
  }
#endif
  for (; i < n; ++i) ++partial[0][MagnitudeKey(x[i]) >> 20];
  for (size_t b = 0; b < kTopBins; ++b) {
    for (int w = 0; w < kWays; ++w) (*out)[b] += partial[w][b];
  }
}

// Level-0 histogram of the keys of `input`. Eight interleaved sub-histograms keep runs of
// equal bins (common: most gradient entries share a few exponents) from serialising on one
// counter; with SSE4.1 the bins of four entries come from one vector. The 32-bit
// sub-histograms are summed into *out every 2^31 entries.
void TopHistogram(absl::Span<const float> input, Histogram* out) {
  out->fill(0);
  constexpr size_t kPiece = size_t{1} << 31;
  for (size_t start = 0; start < input.size(); start += kPiece) {
    TopHistogramOf(input.data() + start, std::min(kPiece, input.size() - start), out);
  }
}

// Candidates gathered by SelectLargestAtLeast(), in index order: the first `count` entries
// of the arrays, whose size is the capacity (kept across calls, grown geometrically).
struct Candidates {
  std::vector<size_t> indices;
  std::vector<uint32_t> keys;
  size_t count = 0;
};

// Gathers the entries with key >= min_key, at most `cap` of them (beyond: false). Room for a
// whole tile is made before each tile, so the loop over set bits does no bounds checks.
bool Gather(absl::Span<const float> input, uint32_t min_key, size_t cap, Candidates* out);

// Gathered entries are capped at this many, so scratch stays O(k); the top bin of
// gradient-like data holds around k entries.
size_t GatherCap(size_t k) { return 4 * k + 65536; }

}  // namespace

namespace select_internal {
namespace {

// Keys with the sign cleared are non-negative int32s (NaN ones above kInfinityKey), so a
// signed compare against min_key - 1 (-1 for a floor of 0) is exactly key >= min_key.
inline int32_t Below(uint32_t min_key) { return static_cast<int32_t>(min_key) - 1; }

// Entries [from, n) one at a time; masks[from / 64 ..] must be zero on entry.
void KeyMasksTail(const float* x, size_t from, size_t n, uint32_t min_key, uint64_t* masks) {
  for (size_t i = from; i < n; ++i) {
    masks[i / 64] |= uint64_t{MagnitudeKey(x[i]) >= min_key} << (i % 64);
  }
}

void ClearMasks(size_t n, uint64_t* masks) { std::fill(masks, masks + (n + 63) / 64, 0); }

void PortableKeyMasks(const float* x, size_t n, uint32_t min_key, uint64_t* masks) {
  ClearMasks(n, masks);
  KeyMasksTail(x, 0, n, min_key, masks);
}

#if defined(__x86_64__)
void Sse2KeyMasks(const float* x, size_t n, uint32_t min_key, uint64_t* masks) {
  ClearMasks(n, masks);
  const __m128i abs_mask = _mm_set1_epi32(0x7fffffff);
  const __m128i below = _mm_set1_epi32(Below(min_key));
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t word = 0;
    for (int v = 0; v < 16; ++v) {
      const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 4 * v));
      const __m128i above = _mm_cmpgt_epi32(_mm_and_si128(bits, abs_mask), below);
      word |= uint64_t(_mm_movemask_ps(_mm_castsi128_ps(above))) << (4 * v);
    }
    masks[i / 64] = word;
  }
  KeyMasksTail(x, i, n, min_key, masks);
}

__attribute__((target("avx2"))) void Avx2KeyMasks(const float* x, size_t n, uint32_t min_key,
                                                  uint64_t* masks) {
  ClearMasks(n, masks);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i below = _mm256_set1_epi32(Below(min_key));
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t word = 0;
    for (int v = 0; v < 8; ++v) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8 * v));
      const __m256i above = _mm256_cmpgt_epi32(_mm256_and_si256(bits, abs_mask), below);
      word |= uint64_t(uint32_t(_mm256_movemask_ps(_mm256_castsi256_ps(above)))) << (8 * v);
    }
    masks[i / 64] = word;
  }
  KeyMasksTail(x, i, n, min_key, masks);
}

__attribute__((target("avx512f"))) void Avx512KeyMasks(const float* x, size_t n, uint32_t min_key,
                                                       uint64_t* masks) {
  ClearMasks(n, masks);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i below = _mm512_set1_epi32(Below(min_key));
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t word = 0;
    for (int v = 0; v < 4; ++v) {
      const __m512i bits = _mm512_loadu_si512(x + i + 16 * v);
      word |= uint64_t(_mm512_cmpgt_epi32_mask(_mm512_and_si512(bits, abs_mask), below))
              << (16 * v);
    }
    masks[i / 64] = word;
  }
  KeyMasksTail(x, i, n, min_key, masks);
}
#endif  // defined(__x86_64__)

using KeyMasksFn = void (*)(const float*, size_t, uint32_t, uint64_t*);

KeyMasksFn KernelFn(ScanKernel kernel) {
  switch (kernel) {
#if defined(__x86_64__)
    case ScanKernel::kSse2:
      return &Sse2KeyMasks;
    case ScanKernel::kAvx2:
      return &Avx2KeyMasks;
    case ScanKernel::kAvx512:
      return &Avx512KeyMasks;
#endif
    default:
      return &PortableKeyMasks;
  }
}

KeyMasksFn BestKernel() {
  for (ScanKernel kernel : {ScanKernel::kAvx512, ScanKernel::kAvx2, ScanKernel::kSse2}) {
    if (ScanKernelSupported(kernel)) return KernelFn(kernel);
  }
  return &PortableKeyMasks;
}

}  // namespace

bool ScanKernelSupported(ScanKernel kernel) {
  switch (kernel) {
    case ScanKernel::kPortable:
      return true;
#if defined(__x86_64__)
    case ScanKernel::kSse2:
      return true;
    case ScanKernel::kAvx2:
      return __builtin_cpu_supports("avx2");
    case ScanKernel::kAvx512:
      return __builtin_cpu_supports("avx512f");
#endif
    default:
      return false;
  }
}

void KeyMasksWith(ScanKernel kernel, const float* x, size_t n, uint32_t min_key, uint64_t* masks) {
  CHECK(ScanKernelSupported(kernel)) << static_cast<int>(kernel);
  CHECK_LE(n, kScanTile);
  KernelFn(kernel)(x, n, min_key, masks);
}

void KeyMasks(const float* x, size_t n, uint32_t min_key, uint64_t* masks) {
  static const KeyMasksFn best = BestKernel();
  best(x, n, min_key, masks);
}

}  // namespace select_internal

namespace {

bool Gather(absl::Span<const float> input, uint32_t min_key, size_t cap, Candidates* out) {
  using select_internal::kScanTile;
  const float* x = input.data();
  const size_t n = input.size();
  uint64_t masks[kScanTile / 64];
  size_t count = 0;
  for (size_t start = 0; start < n; start += kScanTile) {
    const size_t m = std::min(kScanTile, n - start);
    if (count + m + 2 > out->indices.size()) {
      const size_t capacity = std::max(2 * out->indices.size(), count + m + 2);
      out->indices.resize(capacity);
      out->keys.resize(capacity);
    }
    size_t* indices = out->indices.data();
    uint32_t* keys = out->keys.data();
    select_internal::KeyMasks(x + start, m, min_key, masks);
    // Mask words mostly hold 0, 1 or 2 set bits in no predictable pattern, so each word
    // stores its first two candidates unconditionally (a word without them stores entries
    // that the count then leaves out) and only words with more take a loop.
    for (size_t w = 0; w < (m + 63) / 64; ++w) {
      const uint64_t bits = masks[w];
      const size_t base = start + 64 * w;
      const uint64_t rest = bits & (bits - 1);
      const size_t first = base + (absl::countr_zero(bits) & 63);
      const size_t second = base + (absl::countr_zero(rest) & 63);
      indices[count] = first;
      keys[count] = MagnitudeKey(x[first]);
      indices[count + 1] = second;
      keys[count + 1] = MagnitudeKey(x[second]);
      const int set = absl::popcount(bits);
      if (set > 2) {
        size_t j = count + 2;
        for (uint64_t more = rest & (rest - 1); more != 0; more &= more - 1, ++j) {
          indices[j] = base + absl::countr_zero(more);
          keys[j] = MagnitudeKey(x[indices[j]]);
        }
      }
      count += set;
    }
    if (count > cap) return false;
  }
  out->count = count;
  return true;
}

// The cutoff of the k largest of keys[0..m) (1 <= k <= m): like RadixCutoff(), but each
// level keeps only the keys of the chosen bin for the next, so the later levels see a
// fraction of the keys.
Cutoff CutoffOfKeys(const uint32_t* keys, size_t m, size_t k) {
  DCHECK(k >= 1 && k <= m) << k << " of " << m;
  thread_local std::vector<uint32_t> kept;
  std::array<uint64_t, kTopBins> histogram;
  const uint32_t* current = keys;
  uint32_t prefix = 0;
  size_t above = 0;
  for (size_t level = 0; level < kLevels.size(); ++level) {
    const auto [shift, mask] = kLevels[level];
    std::fill(histogram.begin(), histogram.begin() + mask + 1, 0);
    for (size_t i = 0; i < m; ++i) ++histogram[(current[i] >> shift) & mask];
    const Bin bin = FindBin(histogram.data(), mask + 1, k - above);
    prefix |= bin.bin << shift;
    above += bin.above;
    if (level + 1 == kLevels.size()) break;
    // Keep the bin's keys, in place once `kept` holds them. The branch-free loop stores one
    // past the last kept key; sizes only shrink after the first level, so `kept` is never
    // reallocated while `current` points into it.
    kept.resize(std::max<size_t>(kept.size(), histogram[bin.bin] + 1));
    size_t j = 0;
    for (size_t i = 0; i < m; ++i) {
      kept[j] = current[i];
      j += ((current[i] >> shift) & mask) == bin.bin;
    }
    DCHECK_EQ(j, histogram[bin.bin]);
    current = kept.data();
    m = j;
  }
  return {prefix, k - above};
}

}  // namespace

void SelectLargestMagnitudes(absl::Span<const float> input, size_t k,
                             std::vector<size_t>* indices) {
  const size_t n = input.size();
  CHECK(k >= 1 && k <= n) << k << " of " << n;
  indices->clear();
  if (k == n) {
    indices->resize(n);
    std::iota(indices->begin(), indices->end(), size_t{0});
    return;
  }
  Histogram top;
  TopHistogram(input, &top);
  const Bin bin = FindBin(top.data(), kTopBins, k);
  const size_t at_least = bin.above + top[bin.bin];
  if (at_least <= GatherCap(k)) {
    const SelectOutcome outcome =
        SelectLargestAtLeast(input, k, bin.bin << kLevels[0].shift, at_least, indices);
    CHECK(outcome == SelectOutcome::kSelected) << static_cast<int>(outcome);
    return;
  }
  // The bin is huge: resolve it with passes over the input, then compact.
  const float* x = input.data();
  const Cutoff cutoff = RadixCutoff(
      n, k, [x](size_t i) { return MagnitudeKey(x[i]); }, &top);
  indices->reserve(k);
  size_t ties = cutoff.ties;
  for (size_t i = 0; i < n && indices->size() < k; ++i) {
    const uint32_t key = MagnitudeKey(x[i]);
    if (key > cutoff.key || (key == cutoff.key && ties > 0)) {
      if (key == cutoff.key) --ties;
      indices->push_back(i);
    }
  }
  DCHECK_EQ(indices->size(), k);
}

SelectOutcome SelectLargestAtLeast(absl::Span<const float> input, size_t k, uint32_t min_key,
                                   size_t max_candidates, std::vector<size_t>* indices) {
  CHECK(k >= 1 && k <= input.size()) << k << " of " << input.size();
  thread_local Candidates candidates;
  if (!Gather(input, min_key, max_candidates, &candidates)) return SelectOutcome::kTooMany;
  const size_t m = candidates.count;
  if (m < k) return SelectOutcome::kTooFew;
  const size_t* gathered = candidates.indices.data();
  if (m == k) {
    indices->assign(gathered, gathered + k);
    return SelectOutcome::kSelected;
  }
  indices->resize(k + 1);  // The branch-free loop below stores one past the last taken.
  size_t* out = indices->data();
  const uint32_t* keys = candidates.keys.data();
  const Cutoff cutoff = CutoffOfKeys(keys, m, k);
  // Everything above the cutoff key, and the first `ties` entries equal to it.
  size_t taken = 0;
  size_t ties = cutoff.ties;
  for (size_t j = 0; j < m; ++j) {
    const uint32_t key = keys[j];
    const bool tie = key == cutoff.key && ties > 0;
    ties -= tie;
    out[taken] = gathered[j];
    taken += key > cutoff.key || tie;
  }
  DCHECK_EQ(taken, k);
  indices->resize(k);
  return SelectOutcome::kSelected;
}

uint32_t KthLargestKey(absl::Span<const uint32_t> keys, size_t r) {
  CHECK(r >= 1 && r <= keys.size()) << r << " of " << keys.size();
  return CutoffOfKeys(keys.data(), keys.size(), r).key;
}

}  // namespace tamp::compress
