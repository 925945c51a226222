// GPU top-k and threshold: exact selection without sorting, byte-identical to
// compress/topk.cc and compress/threshold.cc.
//
// Contract (layout: compress/cuda/internal/topk_agent.h):
//   encode   body = the k entries of largest |c| (select.h's order and tie rule), or for
//            threshold the count and the entries whose key is above the floor, c = input
//            with the memory of SparseFeedback fused: c staged in the memory (residual or
//            DGC's v) by the first pass, the memory's next value written by the select pass
//   check, decode: topk_decode.cu
//
// Passes of a top-k encode over the n values (each a kernel; CUB only for the tile scan):
//   prepare: a sample of kSampleSize keys of c gives the floor of level 0's gather
//   level 0: stages c, histograms every key, gathers the keys >= floor        reads c (1)
//   find b0 (the cutoff's level-0 bin); the gather holds if it covers b0 and fits
//   candidates: only if it did not: per tile the keys above b0, b0's keys gathered
//                                                                              reads c (+1)
//   level 1 histogram, find, level 2 histogram, find: over the candidates
//   tile counts: the candidates' shares
//   cub::DeviceScan::ExclusiveSum over the tiles
//   select (indices, values, memory)                                           reads c (2)
//   pack
// so c is read twice (three times where the sample misled) and the memory written twice;
// the rest touches the candidates (for gradient-like data a few k) and small arrays. When
// b0 alone holds more than CandidateCapacity() keys (many equal magnitudes) the level
// histograms and the tile counts read c instead, six reads in all. The device decides;
// the host never waits. A threshold encode knows its cutoff: tile counts (stages c), the
// scan (one more tile, whose offset is the count), the count into the body, select, pack;
// c is read twice.
// Scratch (two-pass sizing): histogram, state, tile counts and offsets, CUB's temp storage,
// k indices, and for top-k the candidates and their gather state.

#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
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
// The grid of the passes that loop (over tiles or candidates): enough threads to fill the
// device, few enough blocks that flushing their shared histograms stays cheap.
constexpr unsigned kLoopGrid = 1024;
constexpr int kSampleItems = kSampleSize / kThreads;  // 16 sampled keys per thread
static_assert(kSampleItems * kThreads == kSampleSize, "the sample fills the block");

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
  Candidate* candidates;  // capacity (top-k only)
  GatherState* gather;
  uint64_t capacity;
};

// ---------------------------------------------------------------------------------------
// CUDA kernels
// ---------------------------------------------------------------------------------------

// One block: clears the histogram and the select state, and sets the floor of level 0's
// gather from the sample (sorted, the rank-th largest key's bin).
__global__ void __launch_bounds__(kThreads)
    prepare_kernel(TopKLayout l, const float* input, SparseFeedback feedback, uint64_t capacity,
                   uint32_t* histogram, SelectState* state, GatherState* gather) {
  using BlockSort = cub::BlockRadixSort<uint32_t, kThreads, kSampleItems>;
  __shared__ typename BlockSort::TempStorage sort_storage;
  for (uint32_t b = threadIdx.x; b < kTopKBins; b += kThreads) histogram[b] = 0;
  const uint32_t rank = SampleRank(l, capacity);
  if (threadIdx.x == 0) {
    *state = InitialSelectState();
    if (rank == 0) *gather = GatherState{0, 0, 0};
  }
  if (rank == 0) return;
  uint32_t keys[kSampleItems];
  for (int q = 0; q < kSampleItems; ++q) {
    const uint32_t j = threadIdx.x * kSampleItems + q;
    keys[q] = MagnitudeKey(PeekCompensated(feedback, input, SamplePosition(l.n, j)));
  }
  BlockSort(sort_storage).SortDescending(keys);  // Blocked: thread t holds ranks 16t ...
  for (int q = 0; q < kSampleItems; ++q) {
    if (threadIdx.x * kSampleItems + q == rank - 1) {
      *gather = GatherState{0, BinFloor(keys[q]), 0};
    }
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

// Entry j of this thread's items of the tile at `first` (striped: coalesced loads).
__device__ uint64_t Striped(uint64_t first, int j) {
  return first + static_cast<uint64_t>(j) * kThreads + threadIdx.x;
}

// Appends this thread's items flagged in `take` (bit j: Striped(first, j), key keys[j]) to
// the candidates at one atomic offset per block; those past `capacity` are counted, not
// stored. Every thread of the block calls it (barriers).
__device__ void AppendCandidates(const uint32_t (&keys)[kItems], uint32_t take, uint64_t first,
                                 uint64_t capacity, Candidate* candidates,
                                 unsigned long long* count) {
  using BlockScan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ unsigned long long block_base;
  uint32_t before;
  uint32_t block_total;
  BlockScan(scan_storage).ExclusiveSum(static_cast<uint32_t>(__popc(take)), before, block_total);
  if (threadIdx.x == 0) block_base = block_total == 0 ? 0 : atomicAdd(count, block_total);
  __syncthreads();
  unsigned long long at = block_base + before;
  for (int j = 0; j < kItems && take != 0; ++j) {
    if (((take >> j) & 1u) == 0) continue;
    if (at < capacity) {
      candidates[at] = Candidate{keys[j], static_cast<uint32_t>(Striped(first, j))};
    }
    ++at;
  }
  __syncthreads();  // The next call reuses block_base and the scan's storage.
}

// Level 0, tile after tile: stages c (with a memory), histograms every key, gathers the
// keys >= the sampled floor, and zeroes the tiles' counts.
__global__ void __launch_bounds__(kThreads)
    level_zero_kernel(TopKLayout l, const float* input, SparseFeedback feedback,
                      GatherState* gather, uint64_t capacity, Candidate* candidates,
                      uint32_t* histogram, unsigned long long* tile_counts) {
  __shared__ uint32_t bins[kTopKBins];
  ClearBins(bins);
  const uint32_t floor = gather->floor;
  const uint64_t tiles = (l.n + kTile - 1) / kTile;
  for (uint64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const uint64_t first = t * kTile;
    // Every load of the tile first (the memory's stores could alias them), then c.
    float c[kItems];
    Remembered memory[kItems];
    for (int j = 0; j < kItems; ++j) {
      const uint64_t i = Striped(first, j);
      c[j] = i < l.n ? input[i] : 0.0f;
      if (i < l.n) memory[j] = LoadMemory(feedback, i);
    }
    uint32_t keys[kItems];
    uint32_t take = 0;
    for (int j = 0; j < kItems; ++j) {
      const uint64_t i = Striped(first, j);
      keys[j] = 0;
      if (i >= l.n) continue;
      if (feedback.on()) {
        c[j] = Compensated(feedback, c[j], &memory[j]);
        StoreStaged(feedback, i, c[j], memory[j]);
      }
      keys[j] = MagnitudeKey(c[j]);
      atomicAdd(&bins[LevelBin(0, keys[j])], 1u);
      take |= static_cast<uint32_t>(keys[j] >= floor) << j;
    }
    AppendCandidates(keys, take, first, capacity, candidates, &gather->count);
    if (threadIdx.x == 0) tile_counts[t] = 0;
  }
  FlushBins(bins, histogram);
}

// Where level 0's gather did not hold (find_kernel said so): per tile, the keys above the
// cutoff's level-0 bin (into tile_counts, as "greater"), and the keys in it gathered afresh.
__global__ void __launch_bounds__(kThreads)
    candidates_kernel(TopKLayout l, const float* c, const SelectState* state, uint64_t capacity,
                      Candidate* candidates, GatherState* gather,
                      unsigned long long* tile_counts) {
  if (!gather->again) return;
  using BlockReduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  const SelectState s = *state;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kTile;
  uint32_t keys[kItems];
  uint32_t above = 0;
  uint32_t take = 0;
  for (int j = 0; j < kItems; ++j) {
    const uint64_t i = Striped(first, j);
    keys[j] = i < l.n ? MagnitudeKey(c[i]) : 0;
    const Standing standing = i < l.n ? StandingOf(s, keys[j]) : Standing::kBelow;
    above += standing == Standing::kAbove;
    take |= static_cast<uint32_t>(standing == Standing::kCandidate) << j;
  }
  AppendCandidates(keys, take, first, capacity, candidates, &gather->count);
  const uint32_t tile_above = BlockReduce(reduce_storage).Sum(above);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = TileCountOf(tile_above, 0);
}

// Level 1 or 2: the histogram of the keys that agree with the state's prefix, over the
// candidates (those outside the cutoff's bin do not agree) when they all fit, else over
// the whole of c.
__global__ void __launch_bounds__(kThreads)
    level_kernel(int level, TopKLayout l, const float* c, const SelectState* state,
                 const Candidate* candidates, const GatherState* gather, uint64_t capacity,
                 uint32_t* histogram) {
  __shared__ uint32_t bins[kTopKBins];
  ClearBins(bins);
  const SelectState s = *state;
  const unsigned long long gathered = gather->count;
  const bool fit = CandidatesFit(gathered, capacity);
  const uint64_t m = fit ? gathered : l.n;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(kThreads) + threadIdx.x; i < m;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    const uint32_t key = fit ? candidates[i].key : MagnitudeKey(c[i]);
    if (InLevel(s, key)) atomicAdd(&bins[LevelBin(level, key)], 1u);
  }
  FlushBins(bins, histogram);
}

// One block: finds the bin of the (k - above)-th largest counted key, scanning the bins from
// the top in parallel (thread t owns the 8 bins t*8 .. t*8+7 counted from the top), updates
// the state and clears the histogram for the next level. After level 0 it also judges
// level 0's gather (GatherHolds()); where it failed, the candidates pass gathers again.
__global__ void __launch_bounds__(kThreads)
    find_kernel(int level, uint64_t k, uint32_t* histogram, SelectState* state,
                GatherState* gather, uint64_t capacity) {
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
  if (level != 0) return;
  __syncthreads();  // The state's writer is in this block.
  if (threadIdx.x == 0 && !GatherHolds(*state, *gather, capacity)) {
    gather->count = 0;  // The candidates pass gathers afresh.
    gather->again = 1;
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
// to the tiles' counts (zero, or the candidates pass's keys above b0; atomics: the
// candidates are in no particular order), or, when they did not fit, each tile counted
// over c.
__global__ void __launch_bounds__(kThreads)
    tile_count_kernel(TopKLayout l, const float* c, const SelectState* state,
                      const Candidate* candidates, const GatherState* gather,
                      uint64_t capacity, unsigned long long* tile_counts) {
  const SelectState s = *state;
  const unsigned long long gathered = gather->count;
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
      Align256(sizeof(Candidate) * capacity),     Align256(sizeof(GatherState)),
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
  s->gather = reinterpret_cast<GatherState*>(base + offsets[7]);
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
  const unsigned loop_grid = tiles < kLoopGrid ? tiles : kLoopGrid;
  const unsigned candidate_grid = GridFor(s.capacity, kLoopGrid);
  prepare_kernel<<<1, kThreads, 0, stream>>>(l, input, feedback, s.capacity, s.histogram, s.state,
                                            s.gather);
  TAMP_LAUNCH_CHECK();
  level_zero_kernel<<<loop_grid, kThreads, 0, stream>>>(l, input, feedback, s.gather, s.capacity,
                                                        s.candidates, s.histogram, s.tile_counts);
  TAMP_LAUNCH_CHECK();
  find_kernel<<<1, kThreads, 0, stream>>>(0, l.k, s.histogram, s.state, s.gather, s.capacity);
  TAMP_LAUNCH_CHECK();
  const float* c = feedback.on() ? feedback.residual : input;  // Staged by level 0.
  candidates_kernel<<<tiles, kThreads, 0, stream>>>(l, c, s.state, s.capacity, s.candidates,
                                                     s.gather, s.tile_counts);
  TAMP_LAUNCH_CHECK();
  for (int level = 1; level < kTopKLevels; ++level) {
    level_kernel<<<candidate_grid, kThreads, 0, stream>>>(level, l, c, s.state, s.candidates,
                                                          s.gather, s.capacity, s.histogram);
    TAMP_LAUNCH_CHECK();
    find_kernel<<<1, kThreads, 0, stream>>>(level, l.k, s.histogram, s.state, s.gather,
                                            s.capacity);
    TAMP_LAUNCH_CHECK();
  }
  tile_count_kernel<<<tiles, kThreads, 0, stream>>>(l, c, s.state, s.candidates, s.gather,
                                                    s.capacity, s.tile_counts);
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

}  // namespace tamp::compress::cuda_internal
