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
//   histogram level 0 (stages c)  find   histogram level 1  find   histogram level 2  find
//   tile counts   cub::DeviceScan::ExclusiveSum   select (indices, values, memory)   pack
// so c is read five times and the memory written twice; the finds and the scan touch
// only small arrays. A threshold encode knows its cutoff: tile counts (stages c), the scan
// (one more tile, whose offset is the count), the count into the body, select, pack.
// Scratch (two-pass sizing): histogram, state, tile counts and offsets, CUB's temp storage,
// k indices.

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
constexpr int kBinsPerThread = kTopKBins / kThreads;  // 8, in the find kernel
constexpr unsigned kMaxGrid = 1u << 16;

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
};

// ---------------------------------------------------------------------------------------
// CUDA kernels
// ---------------------------------------------------------------------------------------

__global__ void init_kernel(uint32_t* histogram, SelectState* state) {
  for (uint32_t b = threadIdx.x; b < kTopKBins; b += blockDim.x) histogram[b] = 0;
  if (threadIdx.x == 0) *state = InitialSelectState();
}

// Level `level` histogram of the keys that agree with the state's prefix. With a memory,
// level 0 forms c and stages it there; the later levels read it back.
__global__ void __launch_bounds__(kThreads)
    histogram_kernel(int level, TopKLayout l, const float* input, SparseFeedback feedback,
                     const SelectState* state, uint32_t* histogram) {
  __shared__ uint32_t bins[kTopKBins];
  for (uint32_t b = threadIdx.x; b < kTopKBins; b += kThreads) bins[b] = 0;
  __syncthreads();
  const SelectState s = *state;
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(kThreads) + threadIdx.x; i < l.n;
       i += static_cast<uint64_t>(gridDim.x) * kThreads) {
    float c;
    if (!feedback.on()) {
      c = input[i];
    } else {
      c = level == 0 ? StageCompensated(feedback, input, i) : feedback.residual[i];
    }
    const uint32_t key = MagnitudeKey(c);
    if (InLevel(s, key)) atomicAdd(&bins[LevelBin(level, key)], 1u);
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b < kTopKBins; b += kThreads) {
    if (bins[b] != 0) atomicAdd(&histogram[b], bins[b]);
  }
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

// Per tile: (key > cutoff, key == cutoff) counts. `stage`: forms c from `values` (the input)
// and stages it in the memory, as threshold's first pass does; else `values` is c.
__global__ void __launch_bounds__(kThreads)
    count_kernel(TopKLayout l, const float* values, SparseFeedback stage,
                 const SelectState* state, unsigned long long* tile_counts) {
  using BlockReduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  const SelectState s = *state;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kTile;
  unsigned long long counts = 0;  // (gt << 32) | eq; both < 2^32 since n < 2^32.
  for (int j = 0; j < kItems; ++j) {
    const uint64_t i = first + static_cast<uint64_t>(j) * kThreads + threadIdx.x;  // Striped.
    if (i >= l.n) break;
    const uint32_t key = MagnitudeKey(stage.on() ? StageCompensated(stage, values, i) : values[i]);
    counts += key > s.prefix ? (1ull << 32) : (key == s.prefix ? 1ull : 0ull);
  }
  const unsigned long long total = BlockReduce(reduce_storage).Sum(counts);
  if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
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
// (threshold's total).
cudaError_t Carve(void* temp, const TopKLayout& l, Scratch* s, size_t* total) {
  const uint64_t tiles = TilesOf(l) + 1;
  size_t cub_bytes = 0;
  if (const cudaError_t e = cub::DeviceScan::ExclusiveSum(
          nullptr, cub_bytes, static_cast<unsigned long long*>(nullptr),
          static_cast<unsigned long long*>(nullptr), static_cast<int>(tiles));
      e != cudaSuccess) {
    return e;
  }
  const size_t sizes[] = {
      Align256(sizeof(uint32_t) * kTopKBins),   Align256(sizeof(SelectState)),
      Align256(sizeof(unsigned long long) * tiles), Align256(sizeof(unsigned long long) * tiles),
      Align256(cub_bytes),                        Align256(sizeof(uint32_t) * l.k),
  };
  size_t offset = 0;
  size_t offsets[6];
  for (int j = 0; j < 6; ++j) {
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

// The tile passes after the cutoff is known (state on the device): counts (which stage c
// when `stage` is on), the scan over `scanned` tiles, threshold's count (`count` non-null),
// select and pack. `values`: c, or the input when staging.
cudaError_t SelectTiles(const Scratch& s, const TopKLayout& l, const float* values,
                        const SparseFeedback& stage, const SparseFeedback& feedback,
                        uint64_t scanned, unsigned char* count, unsigned char* entries,
                        cudaStream_t stream) {
  const uint64_t tiles = TilesOf(l);
  count_kernel<<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(l, values, stage, s.state,
                                                                     s.tile_counts);
  TAMP_LAUNCH_CHECK();
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
  const float* c = feedback.on() ? feedback.residual : values;
  select_kernel<<<static_cast<unsigned>(tiles), kThreads, 0, stream>>>(
      l, c, s.state, s.tile_offsets, feedback, count, s.indices, entries);
  TAMP_LAUNCH_CHECK();
  pack_kernel<<<GridFor(l.index_groups(), kMaxGrid), kThreads, 0, stream>>>(l, count, s.indices,
                                                                            entries);
  TAMP_LAUNCH_CHECK();
  return cudaSuccess;
}

// Carves `temp`; *ready is false when the call only sized it (or failed: see the result).
cudaError_t Prepare(void* temp, size_t* temp_bytes, const TopKLayout& l, Scratch* s,
                    bool* ready) {
  *ready = false;
  size_t needed = 0;
  if (const cudaError_t e = Carve(temp, l, s, &needed); e != cudaSuccess) return e;
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
  if (const cudaError_t e = Prepare(temp, temp_bytes, l, &s, &ready); e != cudaSuccess || !ready) {
    return e;
  }
  init_kernel<<<1, kThreads, 0, stream>>>(s.histogram, s.state);
  TAMP_LAUNCH_CHECK();
  for (int level = 0; level < kTopKLevels; ++level) {
    histogram_kernel<<<GridFor(l.n, kMaxGrid), kThreads, 0, stream>>>(level, l, input, feedback,
                                                                      s.state, s.histogram);
    TAMP_LAUNCH_CHECK();
    find_kernel<<<1, kThreads, 0, stream>>>(level, l.k, s.histogram, s.state);
    TAMP_LAUNCH_CHECK();
  }
  const float* c = feedback.on() ? feedback.residual : input;  // Staged by level 0.
  return SelectTiles(s, l, c, SparseFeedback{}, feedback, TilesOf(l), nullptr, body, stream);
}

cudaError_t EncodeThreshold(void* temp, size_t* temp_bytes, const TopKLayout& l,
                            uint32_t key_floor, const float* input,
                            const SparseFeedback& feedback, unsigned char* body,
                            cudaStream_t stream) {
  Scratch s{};
  bool ready;
  if (const cudaError_t e = Prepare(temp, temp_bytes, l, &s, &ready); e != cudaSuccess || !ready) {
    return e;
  }
  const uint64_t tiles = TilesOf(l);
  threshold_init_kernel<<<1, 1, 0, stream>>>(key_floor, s.state, s.tile_counts + tiles);
  TAMP_LAUNCH_CHECK();
  return SelectTiles(s, l, input, feedback, feedback, tiles + 1, body, body + kCountBytes,
                     stream);
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
