// Per-thread pieces of GPU top-k (compress/cuda/topk.cu), written once for host and device.
// Internal to compress/cuda/.
//
// The selection is compress/select.h's, exactly: keys MagnitudeKey(c) (31 bits: |c|'s bits,
// NaN as +inf); the k largest, ties to the lowest indices; indices ascending. It is found by
// radix select without sorting:
//   1. three histogram levels over the key bits 30..20, 19..9, 8..0 (each counts only the
//      keys that agree with the prefix found so far) give the cutoff key T and `ties`, how
//      many entries equal to T belong to the k (select.cc RadixCutoff(), same levels). Only
//      level 0 reads the whole chunk, and finds the cutoff's bin b0; levels 1 and 2
//      histogram the candidates, keys of b0 and above (key, index) gathered into scratch
//      in whatever order the blocks' atomics give, which histograms and counts do not see.
//      Level 0 itself gathers the keys >= a floor that a sample guessed (GatherHolds());
//      where that gather missed part of b0 or overflowed, a candidates pass counts per
//      tile the keys above b0 and gathers b0's. When b0 alone holds more than
//      CandidateCapacity() keys (many equal magnitudes), levels 1 and 2 and the tile counts
//      read the whole chunk instead, which gives the same counts;
//   2. per tile of kTopKTile entries, count (key > T, key == T): the candidates' (plus the
//      candidates pass's keys above b0), or counted over the tile; an exclusive scan of
//      the tile counts says where each tile's selected entries go and how many of the T's
//      before it were taken;
//   3. each tile writes its selected indices and values in index order (block scans).
// Body (compress/topk.h): k indices of IndexBits(n) bits (PackCodes order, zero-padded to a
// byte), then k values, fp32 or fp16 (sparse.h FloatToHalf(): saturating), unaligned.
//
// threshold (compress/threshold.h) is the same machinery with a fixed cutoff: the state is
// ThresholdState() (every key above the floor, no ties taken) instead of the histograms', and
// its body is an 8-byte count c followed by exactly a top-k body with k = c. Its passes read
// c from that count field (CountedLayout()), which the encode writes after the tile scan.
//
// Error feedback (compress/error_feedback.h) is fused through SparseFeedback: the first pass
// over the input stages what is encoded in the memory, the select pass leaves there what the
// memory keeps, RESIDUAL's residual or DGC_MOMENTUM's v (with its u).
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_TOPK_AGENT_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_TOPK_AGENT_H_

#include <cstdint>

#include "compress/cuda/internal/codec_math.h"

namespace tamp::compress::cuda_internal {

// Radix levels of select.cc: (shift, mask) for bits 30..20, 19..9, 8..0.
inline constexpr int kTopKLevels = 3;
TAMP_HD int LevelShift(int level) { return level == 0 ? 20 : (level == 1 ? 9 : 0); }
TAMP_HD uint32_t LevelMask(int level) { return level == 2 ? 0x1ffu : 0x7ffu; }
inline constexpr uint32_t kTopKBins = 2048;

struct TopKLayout {
  uint64_t n = 0;
  uint64_t k = 0;
  int index_bits = 1;
  bool fp16_values = false;

  TAMP_HD uint64_t index_bytes() const { return (k * static_cast<uint64_t>(index_bits) + 7) / 8; }
  TAMP_HD uint64_t value_bytes() const { return fp16_values ? 2 : 4; }
  TAMP_HD uint64_t body_bytes() const { return index_bytes() + k * value_bytes(); }
  TAMP_HD uint64_t index_groups() const { return (k + 31) / 32; }
};

// compress/sparse.h IndexBits(): max(1, ceil(log2 n)).
inline TopKLayout MakeTopKLayout(uint64_t n, uint64_t k, bool fp16_values) {
  TopKLayout l;
  l.n = n;
  l.k = k;
  int width = 0;
  while (((n - 1) >> width) != 0) ++width;
  l.index_bits = width > 1 ? width : 1;
  l.fp16_values = fp16_values;
  return l;
}

// The state of the radix select, between passes (device memory, or host in the emulation).
struct SelectState {
  uint32_t prefix;      // Key bits found so far.
  int prefix_shift;     // Counted keys agree with `prefix` from this bit up (31: all keys).
  uint64_t above;       // Keys known to rank above the prefix's range.
  uint64_t ties;        // After level 2: entries equal to the cutoff key that are taken.
};

TAMP_HD SelectState InitialSelectState() { return SelectState{0, 31, 0, 0}; }

// Whether `key` is counted at this level, and its bin.
TAMP_HD bool InLevel(const SelectState& s, uint32_t key) {
  return (key >> s.prefix_shift) == (s.prefix >> s.prefix_shift);
}
TAMP_HD uint32_t LevelBin(int level, uint32_t key) {
  return (key >> LevelShift(level)) & LevelMask(level);
}

// After the histogram of `level`: the bin holding the rank-th largest counted key is `bin`,
// with `bin_above` counted keys in higher bins. Updates the state as select.cc does.
TAMP_HD void AdvanceSelect(SelectState* s, int level, uint32_t bin, uint64_t bin_above,
                           uint64_t k) {
  s->prefix |= bin << LevelShift(level);
  s->above += bin_above;
  s->prefix_shift = LevelShift(level);
  if (level == kTopKLevels - 1) s->ties = k - s->above;
}

// The sequential FindBin of select.cc (the kernel scans in parallel to the same answer).
TAMP_HD void FindBin(const uint32_t* histogram, uint32_t bins, uint64_t rank, uint32_t* bin,
                     uint64_t* bin_above) {
  uint64_t above = 0;
  for (uint32_t b = bins; b-- > 0;) {
    if (above + histogram[b] >= rank) {
      *bin = b;
      *bin_above = above;
      return;
    }
    above += histogram[b];
  }
  *bin = 0;
  *bin_above = above;
}

// ---------------------------------------------------------------------------------------
// Candidates and tile counts
// ---------------------------------------------------------------------------------------

inline constexpr uint32_t kTopKTile = 4096;  // Entries per tile of the count and select passes.

// An entry of the cutoff's level-0 bin, gathered after level 0.
struct Candidate {
  uint32_t key;
  uint32_t index;
};

// Candidates the scratch holds: select.cc's gather cap (4k + 65536), at most n. The level-0
// bin of the k-th key spans an eighth of an octave, which for gradient-like data holds
// less than k entries.
TAMP_HD uint64_t CandidateCapacity(const TopKLayout& l) {
  const uint64_t cap = 4 * l.k + 65536;
  return cap < l.n ? cap : l.n;
}

// Whether `count` candidates were all gathered; if not, levels 1 and 2 and the tile counts
// read the whole chunk.
TAMP_HD bool CandidatesFit(unsigned long long count, uint64_t capacity) {
  return count <= capacity;
}

// Where a key stands once level 0 has found the cutoff's bin (state `s` after level 0).
enum class Standing { kBelow, kCandidate, kAbove };
TAMP_HD Standing StandingOf(const SelectState& s, uint32_t key) {
  const uint32_t bin = key >> s.prefix_shift;
  const uint32_t cutoff_bin = s.prefix >> s.prefix_shift;
  return bin > cutoff_bin ? Standing::kAbove
                          : (bin == cutoff_bin ? Standing::kCandidate : Standing::kBelow);
}

// Tile counts pack (key > T) << 32 | (key == T); both < 2^32 since n < 2^32.
TAMP_HD unsigned long long TileCountOf(uint64_t greater, uint64_t equal) {
  return (static_cast<unsigned long long>(greater) << 32) | equal;
}

// An entry's share of its tile's count once the cutoff is final (state after level 2, or
// threshold's).
TAMP_HD unsigned long long TileCount(const SelectState& s, uint32_t key) {
  return key > s.prefix ? TileCountOf(1, 0) : (key == s.prefix ? TileCountOf(0, 1) : 0ull);
}

TAMP_HD uint64_t TileOf(uint64_t index) { return index / kTopKTile; }

// ---------------------------------------------------------------------------------------
// threshold: the count field
// ---------------------------------------------------------------------------------------

inline constexpr uint64_t kCountBytes = 8;  // ThresholdCodec::kCountBytes

// The selection of ThresholdCodec: keys above `key_floor` (ThresholdCodec::KeyFloor()), as the
// state after top-k's histograms with prefix = key_floor and no ties.
TAMP_HD SelectState ThresholdState(uint32_t key_floor) { return SelectState{key_floor, 0, 0, 0}; }

// The count, little-endian uint64 at the start of a 4-byte aligned body.
TAMP_HD void StoreCount(unsigned char* body, uint64_t count) {
  reinterpret_cast<uint32_t*>(body)[0] = static_cast<uint32_t>(count);
  reinterpret_cast<uint32_t*>(body)[1] = static_cast<uint32_t>(count >> 32);
}
TAMP_HD uint64_t LoadCount(const unsigned char* body) {
  return reinterpret_cast<const uint32_t*>(body)[0] |
         (static_cast<uint64_t>(reinterpret_cast<const uint32_t*>(body)[1]) << 32);
}

// The layout of the entries a pass works on: `l` itself for top-k (count == null), else `l`
// with k = the count in `count` (threshold; the host's layout has k = n, the most there can
// be, which sizes the grids).
TAMP_HD TopKLayout CountedLayout(const TopKLayout& l, const unsigned char* count) {
  if (count == nullptr) return l;
  TopKLayout counted = l;
  counted.k = LoadCount(count);
  return counted;
}

// threshold's whole body for `count` entries: ThresholdCodec::PayloadBytes() - header.
TAMP_HD uint64_t ThresholdBodyBytes(const TopKLayout& l, uint64_t count) {
  TopKLayout counted = l;
  counted.k = count;
  return kCountBytes + counted.body_bytes();
}

// kValid, or why a count cannot be read further (it exceeds n: ThresholdCodec's check).
TAMP_HD unsigned long long CheckCount(const TopKLayout& l, const unsigned char* count) {
  return LoadCount(count) <= l.n ? kValid : Verdict(0, kReasonCountRange);
}

// ---------------------------------------------------------------------------------------
// Fused error feedback
// ---------------------------------------------------------------------------------------

// The memory of compress/error_feedback.h in device memory (n values each), fused into the
// encode of a sparse codec:
//   RESIDUAL      residual set, velocity null:  c = g + r;  r = s * (c - decoded)
//   DGC_MOMENTUM  both set:  u = m * u + g;  v = v + u;  c = v;  where decoded != 0 (NaN
//                 counts as sent): u = v = 0 (momentum factor masking), elsewhere both kept
//   none          residual null.
// decoded is what the receiver decodes for the element: its sent value, 0 when not sent.
struct SparseFeedback {
  float* residual = nullptr;  // RESIDUAL's residual or DGC_MOMENTUM's v.
  float* velocity = nullptr;  // DGC_MOMENTUM's u.
  float scale = 1.0f;         // RESIDUAL
  float momentum = 0.0f;      // DGC_MOMENTUM

  TAMP_HD bool on() const { return residual != nullptr; }
  TAMP_HD bool dgc() const { return velocity != nullptr; }
};

// An element's memory as loaded (the kernels load a tile's first, then compute).
struct Remembered {
  float residual = 0.0f;  // Or v.
  float velocity = 0.0f;  // u (DGC_MOMENTUM)
};

TAMP_HD Remembered LoadMemory(const SparseFeedback& f, uint64_t i) {
  Remembered m;
  if (f.on()) m.residual = f.residual[i];
  if (f.dgc()) m.velocity = f.velocity[i];
  return m;
}

// c from input value g and memory m (memory on), in the order error_feedback.cc computes
// it; m->velocity becomes DGC's new u.
TAMP_HD float Compensated(const SparseFeedback& f, float g, Remembered* m) {
  if (!f.dgc()) return Compensate(g, m->residual);
  m->velocity = AddRn(MulRn(f.momentum, m->velocity), g);
  return AddRn(m->residual, m->velocity);
}

// Stages c (memory on) for element i: residual[i] = c; velocity[i] = the new u.
TAMP_HD void StoreStaged(const SparseFeedback& f, uint64_t i, float c, const Remembered& m) {
  if (f.dgc()) f.velocity[i] = m.velocity;
  f.residual[i] = c;
}

// Element i's c, staged in the memory.
TAMP_HD float StageCompensated(const SparseFeedback& f, const float* input, uint64_t i) {
  Remembered m = LoadMemory(f, i);
  const float c = Compensated(f, input[i], &m);
  StoreStaged(f, i, c, m);
  return c;
}

// Element i's c, read without staging (the input itself without a memory).
TAMP_HD float PeekCompensated(const SparseFeedback& f, const float* input, uint64_t i) {
  if (!f.on()) return input[i];
  Remembered m = LoadMemory(f, i);
  return Compensated(f, input[i], &m);
}

// ---------------------------------------------------------------------------------------
// The level-0 gather: a floor guessed from a sample
// ---------------------------------------------------------------------------------------

// Before level 0, a sample of kSampleSize keys of c (evenly spaced) guesses a floor under
// the cutoff, a level-0 bin boundary, and level 0 gathers every key >= floor as it
// histograms. Once level 0 has found the cutoff's bin b0, GatherHolds() says whether
// that gather holds all of b0 and above (floor <= b0's start) within the capacity; then
// the candidates pass is skipped (its "above b0" keys are among the gathered, and counted
// from there). Otherwise the candidates pass gathers b0 afresh. Either way the selection
// is exact: the sample only decides how many passes it takes.
inline constexpr uint32_t kSampleSize = 4096;

TAMP_HD uint64_t SamplePosition(uint64_t n, uint32_t j) {
  return (2 * static_cast<uint64_t>(j) + 1) * n / (2 * static_cast<uint64_t>(kSampleSize));
}

// The rank in the sample (1: its largest key) whose bin's start is the floor: where the
// sample puts the chunk's midpoint between k and the capacity, keys enough to cover the
// k-th with room to spare. 0: floor 0, everything (the capacity holds the chunk).
TAMP_HD uint32_t SampleRank(const TopKLayout& l, uint64_t capacity) {
  const uint64_t target = (l.k + capacity) / 2;
  if (target >= l.n) return 0;
  const uint64_t rank = target * kSampleSize / l.n;
  return rank < 1 ? 1u : static_cast<uint32_t>(rank);
}

// The start of `key`'s level-0 bin.
TAMP_HD uint32_t BinFloor(uint32_t key) { return key >> LevelShift(0) << LevelShift(0); }

// The candidate gathers' state (scratch).
struct GatherState {
  unsigned long long count;  // Gathered so far, also those past the capacity.
  uint32_t floor;            // Level 0 gathered the keys >= floor.
  uint32_t again;            // 1: it did not hold; the candidates pass gathers b0.
};

// After level 0 (state `s`): whether level 0's gather holds every key of the cutoff's bin
// and above, all stored.
TAMP_HD bool GatherHolds(const SelectState& s, const GatherState& g, uint64_t capacity) {
  return CandidatesFit(g.count, capacity) && g.floor <= s.prefix;
}

// How a top-k encode reached its cutoff, and so how often it read c.
enum class TopKPath {
  kLevelZeroGather,  // Level 0's gather held: 2 reads (level 0, select).
  kCandidates,       // The candidates pass gathered b0: 3 reads.
  kWholeChunk,       // b0 held more than the capacity: 6 reads (levels and counts over c).
};

// Whether DGC_MOMENTUM zeroes an element's u and v: what the receiver decodes is not 0.
TAMP_HD bool DgcMasks(float decoded) { return decoded != 0.0f; }

// What the memory keeps of staged c once `decoded` has been sent (the residual or v; for
// DGC_MOMENTUM the caller also zeroes u where DgcMasks(decoded)).
TAMP_HD float NextMemory(const SparseFeedback& f, float c, float decoded) {
  if (f.dgc()) return DgcMasks(decoded) ? 0.0f : c;
  return NextResidual(f.scale, c, decoded);
}

// Value j of the body's value array, and storing it (bytewise: the array is unaligned).
TAMP_HD void StoreValue(const TopKLayout& l, unsigned char* body, uint64_t j, float c,
                        float* decoded) {
  unsigned char* p = body + l.index_bytes() + j * l.value_bytes();
  if (l.fp16_values) {
    const uint16_t h = FloatToHalfSaturating(c);
    p[0] = static_cast<unsigned char>(h);
    p[1] = static_cast<unsigned char>(h >> 8);
    *decoded = HalfToFloat(h);
  } else {
    const uint32_t bits = WireFloatBits(c);
    for (int b = 0; b < 4; ++b) p[b] = static_cast<unsigned char>(bits >> (8 * b));
    *decoded = BitsFloat(bits);
  }
}

TAMP_HD float LoadValue(const TopKLayout& l, const unsigned char* body, uint64_t j) {
  const unsigned char* p = body + l.index_bytes() + j * l.value_bytes();
  if (l.fp16_values) return HalfToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8)));
  uint32_t bits = 0;
  for (int b = 0; b < 4; ++b) bits |= static_cast<uint32_t>(p[b]) << (8 * b);
  return BitsFloat(bits);
}

// Packs indices[32g ..] (index group g) into the body's index stream.
TAMP_HD void PackIndexGroup(const TopKLayout& l, const uint32_t* indices, uint64_t g,
                            unsigned char* body) {
  const uint64_t first = 32 * g;
  const uint32_t count = l.k - first < 32 ? static_cast<uint32_t>(l.k - first) : 32u;
  BitSink sink(body + 4 * static_cast<uint64_t>(l.index_bits) * g);
  for (uint32_t j = 0; j < count; ++j) sink.Put(indices[first + j], l.index_bits);
  sink.Finish();
}

// kValid or the smallest verdict (element = entry) of index group g; group 0 also checks
// the padding.
TAMP_HD unsigned long long CheckIndexGroup(const TopKLayout& l, uint64_t g,
                                           const unsigned char* body) {
  const uint64_t first = 32 * g;
  const uint32_t count = l.k - first < 32 ? static_cast<uint32_t>(l.k - first) : 32u;
  const uint64_t offset = 4 * static_cast<uint64_t>(l.index_bits) * g;
  BitSource source(body + offset, l.index_bytes() - offset);
  bool has_previous = first > 0;
  uint64_t previous = has_previous ? CodeAt(body, l.index_bytes(), first - 1, l.index_bits) : 0;
  unsigned long long verdict = kValid;
  for (uint32_t j = 0; j < count; ++j) {
    const uint64_t index = source.Get(l.index_bits);
    if (index >= l.n) return Verdict(first + j, kReasonIndexRange);
    if (has_previous && index <= previous) {
      return Verdict(first + j, kReasonIndexOrder);
    }
    previous = index;
    has_previous = true;
  }
  if (g == 0) {
    const int used = static_cast<int>((l.k * static_cast<uint64_t>(l.index_bits)) % 8);
    if (used != 0 && (body[l.index_bytes() - 1] >> used) != 0) {
      verdict = Verdict(l.k, kReasonPadding);
    }
  }
  return verdict;
}

// Scatters index group g's values: out[index] = (or +=) value.
TAMP_HD void ScatterIndexGroup(const TopKLayout& l, uint64_t g, const unsigned char* body,
                               float* out, bool accumulate) {
  const uint64_t first = 32 * g;
  const uint32_t count = l.k - first < 32 ? static_cast<uint32_t>(l.k - first) : 32u;
  const uint64_t offset = 4 * static_cast<uint64_t>(l.index_bits) * g;
  BitSource source(body + offset, l.index_bytes() - offset);
  for (uint32_t j = 0; j < count; ++j) {
    const uint64_t index = source.Get(l.index_bits);
    const float v = LoadValue(l, body, first + j);
    out[index] = accumulate ? AddRn(out[index], v) : v;
  }
}

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_TOPK_AGENT_H_
