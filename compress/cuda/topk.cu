// GPU top-k and threshold: exact selection without sorting, byte-identical to
// compress/topk.cc and compress/threshold.cc.
//
// Contract (layout: compress/cuda/internal/topk_agent.h):
//   encode   body = the k entries of largest |c| (select.h's order and tie rule), or for
//            threshold the count and the entries whose key is above the floor, c = input
//            with the memory of SparseFeedback fused: c staged in the memory (residual or
//            DGC's v) by the first pass, the memory's next value written by the select pass
//   check    *verdict = kValid or the first bad index (range, order), the padding, or (for
//            threshold) a count above n
//   decode   out = (zeros, then the values) or out += the values, only if valid
//
// Passes of a top-k encode over the n values (each a kernel; CUB only for the tile scan):
//   top histogram: level 0, stages c                                  reads c (1)
//   find b0 (the cutoff's level-0 bin)
//   candidates: per tile the keys above b0; gathers b0's keys          reads c (2)
//   level 1 histogram, find, level 2 histogram, find: over the candidates
//   tile counts: the candidates' added to the tiles'
//   cub::DeviceScan::ExclusiveSum over the tiles
//   select (indices, values, memory)                                   reads c (3)
//   pack
// so c is read three times and the memory written twice; the rest touches the candidates
// (gradient-like data: under k of them) and small arrays. More candidates than
// CandidateCapacity() (many equal magnitudes): the device sees it and the level histograms
// and the tile counts read c instead, six reads in all. A threshold encode knows its
// cutoff: tile counts (stages c), the scan (one more tile, whose offset is the count), the
// count into the body, select, pack; c is read twice.
// Scratch (two-pass sizing): histogram, state, tile counts and offsets, CUB's temp storage,
// k indices, and for top-k the candidates and their count.

#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>
#include <cub/device/device_scan.cuh>

#include "compress/cuda/internal/grid.cuh"
#include "compress/cuda/internal/launch.h"
#include "compress/cuda/internal/topk_agent.h"

namespace tamp::compress::cuda_internal {
namespace {

// Tuning constants.
constexpr int kItems = 16;                        // Per thread in the tile passes.
constexpr uint32_t kTile = kThreads * kItems;     // 4096 entries per tile
static_assert(kTile == kTopKTile, "the agents' tiles");
constexpr int kBinsPerThread = kTopKBins / kThreads;  // 8, in the find kernel
constexpr unsigned kMaxGrid = 1u << 16;
// The candidate passes' grid: enough threads to fill the device (grid-stride loops), few
// enough blocks that flushing their shared histograms stays cheap.
constexpr unsigned kCandidateGrid = 1024;

inline size_t Align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Scratch, carved from one allocation.
struct Scratch {
  uint32_t* histogram;  // kTopKBins
  SelectState* state;
  unsigned long long* tile_counts;   // (gt << 32) | eq per tile
  unsigned long long* tile_offsets;  // exclusive scan of tile_counts
  void* cub_temp;
  size_t cub_bytes;
  uint32_t* indices;  // k
  Candidate* candidates;                  // capacity (top-k only)
  unsigned long long* candidate_count;    // All gathered, also those past the capacity.
  uint64_t capacity;
};

// ---------------------------------------------------------------------------------------
// CUDA kernels
// ---------------------------------------------------------------------------------------

__global__ void init_kernel(uint32_t* histogram, SelectState* state,
                            unsigned long long* candidate_count) {
  for (uint32_t b = threadIdx.x; b < kTopKBins; b += blockDim.x) histogram[b] = 0;
  if (threadIdx.x == 0) {
    *state = InitialSelectState();
    *candidate_count = 0;
  }
}

// A block's histogram in shared memory: cleared, counted into, added to the global one.
__device__ void ClearBins(uint32_t* bins) {
  for (uint32_t b = threadIdx.x; b < kTopKBins; b += kThreads) bins[b] = 0;
  __syncthreads();
}
__device__ void FlushBins(const uint32_t* bins, uint32_t* histogram) {
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < kTopKBins; b += kThreads) {
    if (bins[b] != 0) atomicAdd(&histogram[b], bins[b]);
  }
}

// Level 0 over every key. With a memory it forms c and stages it there.
__global__ void __launch_bounds__(kThreads)
    top_histogram_kernel(TopKLayout l, const float* input, SparseFeedback feedback,
                         uint32_t* histogram) {
  __shared__ uint32_t bins[kTopKBins];
  ClearBins(bins);
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(kThreads) + threadIdx.x; i < l.n;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const float c = feedback.on() ? StageCompensated(feedback, input, i) : input[i];
    atomicAdd(&bins[LevelBin(0, MagnitudeKey(c))], 1u);
  }
  FlushBins(bins, histogram);
}

// Per tile: the keys above the cutoff's level-0 bin (into tile_counts, as "greater"), and
// the keys in it appended to `candidates` at one atomic offset per block; those past
// `capacity` are counted, not stored.
__global__ void __launch_bounds__(kThreads)
    candidates_kernel(TopKLayout l, const float* c, const SelectState* state, uint64_t capacity,
                      Candidate* candidates, unsigned long long* candidate_count,
                      unsigned long long* tile_counts) {
  using BlockScan = cub::BlockScan<uint32_t, kThreads>;
  using BlockReduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ union {
    typename BlockScan::TempStorage scan;
    typename BlockReduce::TempStorage reduce;
  } storage;
  __shared__ unsigned long long block_base;
  const SelectState s = *state;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kTile;
  uint32_t keys[kItems];
  uint32_t above = 0;
  uint32_t mine = 0;
  for (int j = 0; j < kItems; ++j) {
    const uint64_t i = first + static_cast<uint64_t>(j) * kThreads + threadIdx.x;  // Striped.
    keys[j] = i < l.n ? MagnitudeKey(c[i]) : 0;
    const Standing standing = i < l.n ? StandingOf(s, keys[j]) : Standing::kBelow;
    above += standing == Standing::kAbove;
    mine += standing == Standing::kCandidate;
  }
  uint32_t before;
  uint32_t block_total;
  BlockScan(storage.scan).ExclusiveSum(mine, before, block_total);
  if (threadIdx.x == 0) {
    block_base = block_total == 0 ? 0 : atomicAdd(candidate_count, block_total);
  }
  __syncthreads();  // block_base, and the scan's storage is the reduce's.
  unsigned long long at = block_base + before;
  for (int j = 0; j < kItems && mine != 0; ++j) {
    const uint64_t i = first + static_cast<uint64_t>(j) * kThreads + threadIdx.x;
    if (i >= l.n || StandingOf(s, keys[j]) != Standing::kCandidate) continue;
    if (at < capacity) candidates[at] = Candidate{keys[j], static_cast<uint32_t>(i)};
    ++at;
  }
  const uint32_t tile_above = BlockReduce(storage.reduce).Sum(above);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = TileCountOf(tile_above, 0);
}

// Level 1 or 2: the histogram of the keys that agree with the state's prefix, over the
// candidates when they all fit, else over the whole of c.
__global__ void __launch_bounds__(kThreads)
    level_kernel(int level, TopKLayout l, const float* c, const SelectState* state,
                 const Candidate* candidates, const unsigned long long* candidate_count,
                 uint64_t capacity, uint32_t* histogram) {
  __shared__ uint32_t bins[kTopKBins];
  ClearBins(bins);
  const SelectState s = *state;
  const bool fit = CandidatesFit(*candidate_count, capacity);
  const uint64_t m = fit ? *candidate_count : l.n;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(kThreads) + threadIdx.x; i < m;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const uint32_t key = fit ? candidates[i].key : MagnitudeKey(c[i]);
    if (InLevel(s, key)) atomicAdd(&bins[LevelBin(level, key)], 1u);
  }
  FlushBins(bins, histogram);
}

// One block: finds the bin of the (k - above)-th largest counted key, scanning the bins from
// the top in parallel (thread t owns the 8 bins t*8 .. t*8+7 counted from the top), updates
// the state and clears the histogram for the next level.
__global__ void __launch_bounds__(kThreads)
    find_kernel(int level, uint64_t k, uint32_t* histogram, SelectState* state) {
  using BlockScan = cub::BlockScan<unsigned long long, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  const uint32_t bins = LevelMask(level) + 1;
  SelectState s = *state;
  const uint64_t rank = k - s.above;
  uint32_t counts[kBinsPerThread];
  unsigned long long mine = 0;
  for (int j = 0; j < kBinsPerThread; ++j) {
    const uint32_t from_top = threadIdx.x * kBinsPerThread + j;
    counts[j] = from_top < bins ? histogram[bins - 1 - from_top] : 0;
    mine += counts[j];
  }
  unsigned long long before;
  BlockScan(scan_storage).ExclusiveSum(mine, before);
  __syncthreads();  // Every thread has read the state and its bins.
  for (int j = 0; j < kBinsPerThread; ++j) {
    const uint32_t from_top = threadIdx.x * kBinsPerThread + j;
    if (from_top < bins && before < rank && before + counts[j] >= rank) {
      AdvanceSelect(&s, level, bins - 1 - from_top, before, k);
      *state = s;
    }
    before += counts[j];
    if (from_top < kTopKBins) histogram[kTopKBins - 1 - from_top] = 0;
  }
}

// Tile blockIdx.x's count of TileCount() into tile_counts. `stage`: forms c from `values`
// (the input) and stages it in the memory, as threshold's first pass does; else `values`
// is c.
__device__ void CountTile(const TopKLayout& l, const float* values, const SparseFeedback& stage,
                          const SelectState& s, unsigned long long* tile_counts) {
  using BlockReduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kTile;
  unsigned long long counts = 0;
  for (int j = 0; j < kItems; ++j) {
    const uint64_t i = first + static_cast<uint64_t>(j) * kThreads + threadIdx.x;  // Striped.
    if (i >= l.n) break;
    const float c = stage.on() ? StageCompensated(stage, values, i) : values[i];
    counts += TileCount(s, MagnitudeKey(c));
  }
  const unsigned long long total = BlockReduce(reduce_storage).Sum(counts);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
}

// threshold's tile counts (a block per tile).
__global__ void __launch_bounds__(kThreads)
    count_kernel(TopKLayout l, const float* values, SparseFeedback stage,
                 const SelectState* state, unsigned long long* tile_counts) {
  CountTile(l, values, stage, *state, tile_counts);
}

// top-k's tile counts (a block per tile), the cutoff final: the candidates' shares added
// to the counts of the keys above b0 (atomics: the candidates are in no particular order),
// or, when they did not fit, each tile counted over c.
__global__ void __launch_bounds__(kThreads)
    tile_count_kernel(TopKLayout l, const float* c, const SelectState* state,
                      const Candidate* candidates, const unsigned long long* candidate_count,
                      uint64_t capacity, unsigned long long* tile_counts) {
  const SelectState s = *state;
  const unsigned long long gathered = *candidate_count;
  if (!CandidatesFit(gathered, capacity)) {
    CountTile(l, c, SparseFeedback{}, s, tile_counts);
    return;
  }
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(kThreads) + threadIdx.x; i < gathered;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const Candidate candidate = candidates[i];
    const unsigned long long share = TileCount(s, candidate.key);
    if (share != 0) atomicAdd(&tile_counts[TileOf(candidate.index)], share);
  }
}

// `count`: threshold's count field (k), null for top-k; `body`: the entries (after the
// count).
__global__ void __launch_bounds__(kThreads)
    select_kernel(TopKLayout host_layout, const float* values, const SelectState* state,
                  const unsigned long long* tile_offsets, SparseFeedback feedback,
                  const unsigned char* count, uint32_t* indices, unsigned char* body) {
  // Blocked order in registers (thread t: tile entries t*16 .. t*16+15, so each thread's
  // selections are in index order), coalesced in device memory: the transposes go through
  // shared memory.
  using BlockLoad = cub::BlockLoad<float, kThreads, kItems, cub::BLOCK_LOAD_TRANSPOSE>;
  using BlockStore = cub::BlockStore<float, kThreads, kItems, cub::BLOCK_STORE_TRANSPOSE>;
  using BlockScan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ union {
    typename BlockLoad::TempStorage load;
    typename BlockStore::TempStorage store;
    typename BlockScan::TempStorage scan;
  } storage;
  const TopKLayout l = CountedLayout(host_layout, count);
  const SelectState s = *state;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kTile;
  const uint32_t valid = l.n - first < kTile ? static_cast<uint32_t>(l.n - first) : kTile;
  float c[kItems];
  BlockLoad(storage.load).Load(values + first, c, static_cast<int>(valid), 0.0f);
  __syncthreads();

  uint32_t keys[kItems];
  uint32_t eq = 0;
  for (int j = 0; j < kItems; ++j) {
    keys[j] = MagnitudeKey(c[j]);
    const bool in_range = threadIdx.x * kItems + j < valid;
    eq += in_range && keys[j] == s.prefix;
  }
  uint32_t eq_before_thread;
  BlockScan(storage.scan).ExclusiveSum(eq, eq_before_thread);
  __syncthreads();

  const unsigned long long offset = tile_offsets[blockIdx.x];
  const uint64_t gt_before_tile = offset >> 32;
  const uint64_t eq_before_tile = offset & 0xffffffffull;
  uint64_t eq_rank = eq_before_tile + eq_before_thread;
  bool selected[kItems];
  uint32_t taken = 0;
  for (int j = 0; j < kItems; ++j) {
    const bool in_range = threadIdx.x * kItems + j < valid;
    bool take = in_range && keys[j] > s.prefix;
    if (in_range && keys[j] == s.prefix) {
      take = eq_rank < s.ties;
      ++eq_rank;
    }
    selected[j] = take;
    taken += take;
  }
  uint32_t taken_before_thread;
  BlockScan(storage.scan).ExclusiveSum(taken, taken_before_thread);

  uint64_t position = gt_before_tile + (eq_before_tile < s.ties ? eq_before_tile : s.ties) +
                      taken_before_thread;
  float next_residual[kItems];
  for (int j = 0; j < kItems; ++j) {
    const uint32_t local = threadIdx.x * kItems + j;
    float decoded = 0.0f;
    if (local < valid && selected[j]) {
      indices[position] = static_cast<uint32_t>(first + local);
      StoreValue(l, body, position, c[j], &decoded);
      ++position;
      // Momentum factor masking: only selected entries decode to non-zero (k writes).
      if (feedback.dgc() && DgcMasks(decoded)) feedback.velocity[first + local] = 0.0f;
    }
    next_residual[j] = NextMemory(feedback, c[j], decoded);
  }
  if (!feedback.on()) return;
  __syncthreads();  // The scan's storage is the store's.
  BlockStore(storage.store).Store(feedback.residual + first, next_residual,
                                  static_cast<int>(valid));
}

__global__ void pack_kernel(TopKLayout host_layout, const unsigned char* count,
                            const uint32_t* indices, unsigned char* body) {
  const TopKLayout l = CountedLayout(host_layout, count);
  for (uint64_t g = blockIdx.x * static_cast<uint64_t>(kThreads) + threadIdx.x;
       g < l.index_groups(); g += static_cast<uint64_t>(gridDim.x) * kThreads) {
    PackIndexGroup(l, indices, g, body);
  }
}

__global__ void check_kernel(TopKLayout host_layout, const unsigned char* count,
                             const unsigned char* body, unsigned long long* verdict) {
  if (count != nullptr) {
    if (const unsigned long long v = CheckCount(host_layout, count); v != kValid) {
      if (blockIdx.x == 0 && threadIdx.x == 0) atomicMin(verdict, v);
      return;
    }
  }
  const TopKLayout l = CountedLayout(host_layout, count);
  for (uint64_t g = blockIdx.x * static_cast<uint64_t>(kThreads) + threadIdx.x;
       g < l.index_groups(); g += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const unsigned long long v = CheckIndexGroup(l, g, body);
    if (v != kValid) atomicMin(verdict, v);
  }
}

__global__ void zero_kernel(uint64_t n, float* out, const unsigned long long* verdict) {
  if (*verdict != kValid) return;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    out[i] = 0.0f;
  }
}

__global__ void scatter_kernel(TopKLayout host_layout, const unsigned char* count,
                               const unsigned char* body, float* out, bool accumulate,
                               const unsigned long long* verdict) {
  if (*verdict != kValid) return;
  const TopKLayout l = CountedLayout(host_layout, count);
  for (uint64_t g = blockIdx.x * static_cast<uint64_t>(kThreads) + threadIdx.x;
       g < l.index_groups(); g += static_cast<uint64_t>(gridDim.x) * kThreads) {
    ScatterIndexGroup(l, g, body, out, accumulate);
  }
}

// threshold: the fixed cutoff, and a zero count for the extra tile its scan sums into the
// total.
__global__ void threshold_init_kernel(uint32_t key_floor, SelectState* state,
                                      unsigned long long* extra_tile) {
  *state = ThresholdState(key_floor);
  *extra_tile = 0;
}

// threshold: the count (the "greater" half of the extra tile's offset) into the body.
__global__ void store_count_kernel(const unsigned long long* total, unsigned char* body) {
  StoreCount(body, *total >> 32);
}

inline uint64_t TilesOf(const TopKLayout& l) { return (l.n + kTile - 1) / kTile; }

// Carves `temp` (or sizes it, temp == nullptr): room to scan one tile more than the chunk has
// (threshold's total), and for `capacity` candidates (0 for threshold).
cudaError_t Carve(void* temp, const TopKLayout& l, uint64_t capacity, Scratch* s,
                  size_t* total) {
  const uint64_t tiles = TilesOf(l) + 1;
  size_t cub_bytes = 0;
  if (const cudaError_t e = cub::DeviceScan::ExclusiveSum(
          nullptr, cub_bytes, static_cast<unsigned long long*>(nullptr),
          static_cast<unsigned long long*>(nullptr), static_cast<int>(tiles));
      e != cudaSuccess) {
    return e;
  }
  constexpr int kParts = 8;
  const size_t sizes[kParts] = {
      Align256(sizeof(uint32_t) * kTopKBins),   Align256(sizeof(SelectState)),
      Align256(sizeof(unsigned long long) * tiles), Align256(sizeof(unsigned long long) * tiles),
      Align256(cub_bytes),                        Align256(sizeof(uint32_t) * l.k),
      Align256(sizeof(Candidate) * capacity),     Align256(sizeof(unsigned long long)),
  };
  size_t offset = 0;
  size_t offsets[kParts];
  for (int j = 0; j < kParts; ++j) {
    offsets[j] = offset;
    offset += sizes[j];
  }
  *total = offset;
  if (temp == nullptr) return cudaSuccess;
  auto* base = static_cast<unsigned char*>(temp);
  s->histogram = reinterpret_cast<uint32_t*>(base + offsets[0]);
  s->state = reinterpret_cast<SelectState*>(base + offsets[1]);
  s->tile_counts = reinterpret_cast<unsigned long long*>(base + offsets[2]);
  s->tile_offsets = reinterpret_cast<unsigned long long*>(base + offsets[3]);
  s->cub_temp = base + offsets[4];
  s->cub_bytes = sizes[4];
  s->indices = reinterpret_cast<uint32_t*>(base + offsets[5]);
  s->candidates = reinterpret_cast<Candidate*>(base + offsets[6]);
  s->candidate_count = reinterpret_cast<unsigned long long*>(base + offsets[7]);
  s->capacity = capacity;
  return cudaSuccess;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Kernel launchers
// ---------------------------------------------------------------------------------------

#define TAMP_LAUNCH_CHECK()                                                   \
  do {                                                                        \
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e; \
  } while (0)

namespace {

// The tile passes once the cutoff (state) and the tile counts are on the device: the scan
// over `scanned` tiles, threshold's count (`count` non-null), select and pack. `c`: c.
cudaError_t ScanAndSelect(const Scratch& s, const TopKLayout& l, const float* c,
                          const SparseFeedback& feedback, uint64_t scanned, unsigned char* count,
                          unsigned char* entries, cudaStream_t stream) {
  const uint64_t tiles = TilesOf(l);
  size_t cub_bytes = s.cub_bytes;
  if (const cudaError_t e = cub::DeviceScan::ExclusiveSum(s.cub_temp, cub_bytes, s.tile_counts,
                                                          s.tile_offsets,
                                                          static_cast<int>(scanned), stream);
      e != cudaSuccess) {
    return e;
  }
  if (count != nullptr) {
    store_count_kernel<<<1, 1, 0, stream>>>(s.tile_offsets + tiles, count);
    TAMP_LAUNCH_CHECK();
  }
  select_kernel<<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(
      l, c, s.state, s.tile_offsets, feedback, count, s.indices, entries);
  TAMP_LAUNCH_CHECK();
  pack_kernel<<<GridFor(l.index_groups(), kMaxGrid), kThreads, 0, stream>>>(l, count, s.indices,
                                                                            entries);
  TAMP_LAUNCH_CHECK();
  return cudaSuccess;
}

// Carves `temp`; *ready is false when the call only sized it (or failed: see the result).
cudaError_t Prepare(void* temp, size_t* temp_bytes, const TopKLayout& l, uint64_t capacity,
                    Scratch* s, bool* ready) {
  *ready = false;
  size_t needed = 0;
  if (const cudaError_t e = Carve(temp, l, capacity, s, &needed); e != cudaSuccess) return e;
  if (temp == nullptr) {
    *temp_bytes = needed;
    return cudaSuccess;
  }
  if (*temp_bytes < needed) return cudaErrorInvalidValue;
  *ready = true;
  return cudaSuccess;
}

}  // namespace

cudaError_t EncodeTopK(void* temp, size_t* temp_bytes, const TopKLayout& l, const float* input,
                       const SparseFeedback& feedback, unsigned char* body,
                       cudaStream_t stream) {
  Scratch s{};
  bool ready;
  if (const cudaError_t e = Prepare(temp, temp_bytes, l, CandidateCapacity(l), &s, &ready);
      e != cudaSuccess || !ready) {
    return e;
  }
  const unsigned tiles = static_cast<unsigned>(TilesOf(l));
  const unsigned candidate_grid = GridFor(s.capacity, kCandidateGrid);
  init_kernel<<<1, kThreads, 0, stream>>>(s.histogram, s.state, s.candidate_count);
  TAMP_LAUNCH_CHECK();
  top_histogram_kernel<<<GridFor(l.n, kMaxGrid), kThreads, 0, stream>>>(l, input, feedback,
                                                                        s.histogram);
  TAMP_LAUNCH_CHECK();
  find_kernel<<<1, kThreads, 0, stream>>>(0, l.k, s.histogram, s.state);
  TAMP_LAUNCH_CHECK();
  const float* c = feedback.on() ? feedback.residual : input;  // Staged by level 0.
  candidates_kernel<<<tiles, kThreads, 0, stream>>>(l, c, s.state, s.capacity, s.candidates,
                                                     s.candidate_count, s.tile_counts);
  TAMP_LAUNCH_CHECK();
  for (int level = 1; level < kTopKLevels; ++level) {
    level_kernel<<<candidate_grid, kThreads, 0, stream>>>(level, l, c, s.state, s.candidates,
                                                          s.candidate_count, s.capacity,
                                                          s.histogram);
    TAMP_LAUNCH_CHECK();
    find_kernel<<<1, kThreads, 0, stream>>>(level, l.k, s.histogram, s.state);
    TAMP_LAUNCH_CHECK();
  }
  tile_count_kernel<<<tiles, kThreads, 0, stream>>>(l, c, s.state, s.candidates,
                                                    s.candidate_count, s.capacity,
                                                    s.tile_counts);
  TAMP_LAUNCH_CHECK();
  return ScanAndSelect(s, l, c, feedback, tiles, nullptr, body, stream);
}

cudaError_t EncodeThreshold(void* temp, size_t* temp_bytes, const TopKLayout& l,
                            uint32_t key_floor, const float* input,
                            const SparseFeedback& feedback, unsigned char* body,
                            cudaStream_t stream) {
  Scratch s{};
  bool ready;
  if (const cudaError_t e = Prepare(temp, temp_bytes, l, 0, &s, &ready);
      e != cudaSuccess || !ready) {
    return e;
  }
  const uint64_t tiles = TilesOf(l);
  threshold_init_kernel<<<1, 1, 0, stream>>>(key_floor, s.state, s.tile_counts + tiles);
  TAMP_LAUNCH_CHECK();
  count_kernel<<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(l, input, feedback, s.state,
                                                                     s.tile_counts);
  TAMP_LAUNCH_CHECK();
  return ScanAndSelect(s, l, feedback.on() ? feedback.residual : input, feedback, tiles + 1, body,
                       body + kCountBytes, stream);
}

#undef TAMP_LAUNCH_CHECK

namespace {

cudaError_t CheckEntries(const TopKLayout& l, const unsigned char* count,
                         const unsigned char* entries, unsigned long long* verdict,
                         cudaStream_t stream) {
  if (const cudaError_t e = cudaMemsetAsync(verdict, 0xff, sizeof(*verdict), stream);
      e != cudaSuccess) {
    return e;
  }
  check_kernel<<<GridFor(l.index_groups(), kMaxGrid), kThreads, 0, stream>>>(l, count, entries,
                                                                             verdict);
  return cudaGetLastError();
}

cudaError_t DecodeEntries(const TopKLayout& l, const unsigned char* count,
                          const unsigned char* entries, float* out, bool accumulate,
                          const unsigned long long* verdict, cudaStream_t stream) {
  if (!accumulate) {
    zero_kernel<<<GridFor(l.n, kMaxGrid), kThreads, 0, stream>>>(l.n, out, verdict);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  scatter_kernel<<<GridFor(l.index_groups(), kMaxGrid), kThreads, 0, stream>>>(
      l, count, entries, out, accumulate, verdict);
  return cudaGetLastError();
}

}  // namespace

cudaError_t CheckTopK(const TopKLayout& l, const unsigned char* body,
                      unsigned long long* verdict, cudaStream_t stream) {
  return CheckEntries(l, nullptr, body, verdict, stream);
}

cudaError_t DecodeTopK(const TopKLayout& l, const unsigned char* body, float* out,
                       bool accumulate, const unsigned long long* verdict, cudaStream_t stream) {
  return DecodeEntries(l, nullptr, body, out, accumulate, verdict, stream);
}

cudaError_t CheckThreshold(const TopKLayout& l, const unsigned char* body,
                           unsigned long long* verdict, cudaStream_t stream) {
  return CheckEntries(l, body, body + kCountBytes, verdict, stream);
}

cudaError_t DecodeThreshold(const TopKLayout& l, const unsigned char* body, float* out,
                            bool accumulate, const unsigned long long* verdict,
                            cudaStream_t stream) {
  return DecodeEntries(l, body, body + kCountBytes, out, accumulate, verdict, stream);
}

}  // namespace tamp::compress::cuda_internal
