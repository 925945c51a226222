// GPU encode/decode of the quantizing codecs: none, fp16, bf16, natural, signsgd, signum,
// efsign, qsgd, terngrad, maxmin. Payload bodies are byte-identical to the CPU codecs'
// (compress/*.cc).
//
// Contract (n values, body as compress/cuda/internal/quantize_agent.h lays it out):
//   encode   body =, and with error feedback c = input + residual, residual =
//            s * (c - decode(body)) (the residual is read and written once per value)
//   check    *verdict = kValid or the first problem (min over (element, reason))
//   decode   out = or += decode(body), only if *verdict is kValid
//
// Kernels, in the order an encode runs them:
//   bucket stats, 2-pass   qsgd/maxmin with bucket sizes the tile kernel cannot take: lane
//                          stats (thread per bucket and lane), then stats per bucket.
//   chunk stats            terngrad, efsign (compress/internal/segments.h's order): a thread
//                          per lane of each 8192-value segment, a segment's partial from
//                          its lanes in shared memory; then one block adds the partials in
//                          the pairwise tree, level by level, and stores the scale.
//   encode tile            one block per 8192 values: stages c = input (+ residual) in shared
//                          memory with coalesced loads; for qsgd/maxmin with a power-of-two
//                          bucket_size in [128, 8192] computes its buckets' stats there (8
//                          lanes each, the CPU's summation order: one read of input and
//                          residual in all); then a thread per 32 values writes the codes
//                          (word stores; for 16- and 32-bit codes into a staging area in
//                          dynamic shared memory, StagesCodes(), then coalesced to the body)
//                          and the new residual into the tile, which goes back to device
//                          memory with coalesced stores.
//   encode lanes           signum instead of the tile (UsesLanePath()): a warp per 32 values,
//                          a value per lane in registers (its momentum too), each code word
//                          put together with __shfl_xor_sync and stored by its first lane;
//                          decode is a value per thread.
// Decode runs the same tile kernel the other way (coalesced loads of the accumulator and, if
// staged, the codes; coalesced stores of the output). Tile, lanes and staging take up to
// 74 KB of shared memory, past the 48 KB a block gets without asking (StagingBytes()).
// Per-thread work lives in the agents (internal/quantize_agent.h, code_staging.h,
// lane_agent.h), shared with the host emulation test; this file only maps them onto threads.

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "compress/cuda/internal/code_staging.h"
#include "compress/cuda/internal/grid.cuh"
#include "compress/cuda/internal/lane_agent.h"
#include "compress/cuda/internal/launch.h"
#include "compress/cuda/internal/quantize_agent.h"

namespace tamp::compress::cuda_internal {
namespace {

// Tuning constants.
// (kFusedTile, kFusedMinBucket: quantize_agent.h, shared with the emulation.)
static_assert(kFusedTile == kThreads * kGroup, "a tile block is one group per thread");
constexpr uint32_t kFusedLanes = kFusedTile / kFusedMinBucket * 8;
constexpr int kTreeThreads = 1024;  // The one block of the chunk stats' tree.

// ---------------------------------------------------------------------------------------
// CUDA kernels
// ---------------------------------------------------------------------------------------

// The tile of block `blockIdx.x`: its first element and its length.
__device__ __forceinline__ uint32_t TileLength(const QuantLayout& l, uint64_t first) {
  return l.n - first < kFusedTile ? static_cast<uint32_t>(l.n - first) : kFusedTile;
}

// Moves the block's codes (all threads) from the staging area to the body (kToBody) or
// back: whole words with coalesced accesses, then the stream's last bytes where it ends
// mid-word. `codes` is the body's code stream.
template <bool kToBody>
__device__ __forceinline__ void MoveTileCodes(const QuantLayout& l, unsigned char* staged,
                                              unsigned char* codes) {
  const uint64_t tile = blockIdx.x;
  const uint32_t bytes = TileCodeBytes(l, tile);
  unsigned char* tile_codes = codes + TileCodeOffset(l, tile);
  auto* words = reinterpret_cast<uint32_t*>(tile_codes);
  auto* staged_words = reinterpret_cast<uint32_t*>(staged);
  StagedWordWalk walk(l, threadIdx.x, kThreads);
  for (uint32_t w = threadIdx.x; w < bytes / 4; w += kThreads, walk.Advance()) {
    if (kToBody) {
      words[w] = staged_words[walk.Staged()];
    } else {
      staged_words[walk.Staged()] = words[w];
    }
  }
  for (uint32_t p = bytes / 4 * 4 + threadIdx.x; p < bytes; p += kThreads) {
    if (kToBody) {
      tile_codes[p] = staged[StagedByte(l, p)];
    } else {
      staged[StagedByte(l, p)] = tile_codes[p];
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    encode_tile_kernel(QuantLayout l, RandomKey key, GlobalSource source, float* residual,
                       float residual_scale, float* state, unsigned char* body) {
  __shared__ float tile[kTilePadded];
  __shared__ LaneStat lanes[kFusedLanes];
  extern __shared__ __align__(16) unsigned char staged[];  // StagedCodeBytes(l), if StagesCodes(l)
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kFusedTile;
  const uint32_t length = TileLength(l, first);
  for (uint32_t j = threadIdx.x; j < length; j += kThreads) tile[Padded(j)] = source(first + j);
  __syncthreads();
  const TileValues values{tile, first};

  if (UsesFusedStats(l)) {  // The tile holds whole buckets: bucket_size divides 8192.
    const uint64_t bucket0 = first / l.bucket_size;
    const uint32_t buckets = (length + l.bucket_size - 1) / l.bucket_size;
    for (uint32_t p = threadIdx.x; p < 8 * buckets; p += kThreads) {
      const uint64_t b = bucket0 + p / 8;
      const BucketView<TileValues> view{&values, b * l.bucket_size};
      lanes[p] = BucketLaneStat(l, view, BucketLength(l, b), static_cast<int>(p % 8));
    }
    __syncthreads();
    for (uint32_t lb = threadIdx.x; lb < buckets; lb += kThreads) {
      StoreBucketStats(l, lanes + 8 * lb, bucket0 + lb, body);
    }
    __syncthreads();  // Also orders the stats' global stores before the reads below.
  }

  const uint64_t g = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const bool with_residual = residual != nullptr;
  const bool stages = StagesCodes(l);
  if (g < l.groups()) {
    EncodeGroup(l, key, g, values, with_residual, residual_scale, state, body,
                GroupCodes(l, g, stages ? staged : body + l.stats_bytes));
  }
  if (!stages && !with_residual) return;
  __syncthreads();
  if (stages) MoveTileCodes<true>(l, staged, body + l.stats_bytes);
  if (!with_residual) return;
  for (uint32_t j = threadIdx.x; j < length; j += kThreads) residual[first + j] = tile[Padded(j)];
}

// The lane path (UsesLanePath()). A grid of at most kLaneBlocks blocks strides over the
// chunk (a block per 256 values spent its time starting blocks); each thread loads
// kLaneUnroll values (a warp: kLaneUnroll groups) before it codes any, so that several
// loads are in flight.
constexpr unsigned kLaneBlocks = 2048;
constexpr uint32_t kLaneUnroll = 4;

__global__ void __launch_bounds__(kThreads)
    encode_lanes_kernel(QuantLayout l, GlobalSource source, float* residual,
                        float residual_scale, float* state, unsigned char* body) {
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t per_word = 32 / static_cast<uint32_t>(l.bits);
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * (kThreads / 32);
  // Groups are the same for the whole warp, so every lane takes part in every shuffle.
  for (uint64_t g0 = (static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x) / 32;
       g0 < l.groups(); g0 += warps * kLaneUnroll) {
    float c[kLaneUnroll];
#pragma unroll
    for (uint32_t u = 0; u < kLaneUnroll; ++u) {
      const uint64_t i = (g0 + u * warps) * kGroup + lane;
      c[u] = i < l.n ? source(i) : 0.0f;
    }
#pragma unroll
    for (uint32_t u = 0; u < kLaneUnroll; ++u) {
      const uint64_t g = g0 + u * warps;
      if (g >= l.groups()) break;
      const uint64_t i = g * kGroup + lane;
      uint32_t word =
          LanePlacedCode(l, i, EncodeLane(l, i, c[u], residual, residual_scale, state, body));
      for (uint32_t mask = 1; mask < per_word; mask <<= 1) {
        word |= __shfl_xor_sync(0xFFFFFFFFu, word, static_cast<int>(mask));
      }
      if (lane % per_word == 0) StoreCodeWord(l, body + l.stats_bytes, LaneWord(l, i), word);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    decode_lanes_kernel(QuantLayout l, const unsigned char* body, float* out, bool accumulate,
                        const unsigned long long* verdict) {
  if (verdict != nullptr && *verdict != kValid) return;
  const unsigned char* codes = body + l.stats_bytes;
  const uint64_t threads = static_cast<uint64_t>(gridDim.x) * kThreads;
  for (uint64_t i0 = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x; i0 < l.n;
       i0 += threads * kLaneUnroll) {
    uint32_t words[kLaneUnroll];
    float before[kLaneUnroll];
#pragma unroll
    for (uint32_t u = 0; u < kLaneUnroll; ++u) {
      const uint64_t i = i0 + u * threads;
      words[u] = i < l.n ? LoadCodeWord(l, codes, LaneWord(l, i)) : 0;
      before[u] = accumulate && i < l.n ? out[i] : 0.0f;
    }
#pragma unroll
    for (uint32_t u = 0; u < kLaneUnroll; ++u) {
      const uint64_t i = i0 + u * threads;
      if (i < l.n) out[i] = DecodeLane(l, i, body, words[u], before[u], accumulate);
    }
  }
}

__global__ void bucket_lanes_kernel(QuantLayout l, GlobalSource source, LaneStat* lanes) {
  TAMP_GRID_STRIDE(p, 8 * l.buckets) {
    const uint64_t b = p / 8;
    const BucketView<GlobalSource> view{&source, b * l.bucket_size};
    lanes[p] = BucketLaneStat(l, view, BucketLength(l, b), static_cast<int>(p % 8));
  }
}

__global__ void bucket_stats_kernel(QuantLayout l, const LaneStat* lanes, unsigned char* body) {
  TAMP_GRID_STRIDE(b, l.buckets) { StoreBucketStats(l, lanes + 8 * b, b, body); }
}

// A block covers kThreads / ChunkLanes() whole segments: each thread runs one lane, then
// each segment's first thread combines its lanes into the segment's partial.
__global__ void __launch_bounds__(kThreads)
    chunk_segments_kernel(QuantLayout l, GlobalSource source, ChunkPartial* partials) {
  __shared__ TernLane tern[kThreads];
  __shared__ EfSignPartial ef[kThreads];
  const int lanes = ChunkLanes(l);
  const uint64_t segment =
      static_cast<uint64_t>(blockIdx.x) * (kThreads / lanes) + threadIdx.x / lanes;
  const int lane = static_cast<int>(threadIdx.x % lanes);
  const bool active = segment < NumSegments(l);
  if (active) {
    if (l.kind == QuantKind::kTernGrad) {
      tern[threadIdx.x] =
          TernSegmentLane(l, source, segment, lane, static_cast<double>(source(0)));
    } else {
      ef[threadIdx.x] = EfSignSegmentLane(l, source, segment, lane);
    }
  }
  __syncthreads();
  if (active && lane == 0) {
    partials[segment] = SegmentPartial(l, tern + threadIdx.x, ef + threadIdx.x);
  }
}

// One block: the pairwise tree over the segments' partials, alternating between `a` and `b`
// (global memory; __syncthreads() orders a level's stores before the next level's loads),
// then the scale.
__global__ void __launch_bounds__(kTreeThreads)
    chunk_tree_kernel(QuantLayout l, ChunkPartial* a, ChunkPartial* b, unsigned char* body) {
  const AddChunkPartials add{l.kind == QuantKind::kTernGrad};
  ChunkPartial* in = a;
  ChunkPartial* out = b;
  for (uint64_t m = NumSegments(l); m > 1; m = (m + 1) / 2) {
    for (uint64_t i = threadIdx.x; i < (m + 1) / 2; i += kTreeThreads) {
      PairwiseStep(in, out, m, i, add);
    }
    __syncthreads();
    ChunkPartial* const done = out;
    out = in;
    in = done;
  }
  if (threadIdx.x == 0) StoreChunkScale(l, in[0], body);
}

__global__ void check_kernel(QuantLayout l, const unsigned char* body,
                             unsigned long long* verdict) {
  const uint64_t stats = NumStats(l);
  const uint64_t work = l.groups() > stats ? l.groups() : stats;
  TAMP_GRID_STRIDE(t, work) {
    unsigned long long v = kValid;
    if (t < l.groups()) v = CheckGroup(l, t, body);
    if (t < stats) {
      const unsigned long long s = CheckStat(l, body, t);
      v = s < v ? s : v;
    }
    if (t == 0) {
      const unsigned long long p = CheckPadding(l, body);
      v = p < v ? p : v;
    }
    if (v != kValid) atomicMin(verdict, v);
  }
}

__global__ void __launch_bounds__(kThreads)
    decode_tile_kernel(QuantLayout l, const unsigned char* body, float* out, bool accumulate,
                       const unsigned long long* verdict) {
  if (verdict != nullptr && *verdict != kValid) return;
  __shared__ float tile[kTilePadded];
  extern __shared__ __align__(16) unsigned char staged[];  // StagedCodeBytes(l), if StagesCodes(l)
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kFusedTile;
  const uint32_t length = TileLength(l, first);
  const bool stages = StagesCodes(l);
  // The body is only read here: the kernel takes it const.
  if (stages) MoveTileCodes<false>(l, staged, const_cast<unsigned char*>(body) + l.stats_bytes);
  if (accumulate) {
    for (uint32_t j = threadIdx.x; j < length; j += kThreads) tile[Padded(j)] = out[first + j];
  }
  if (stages || accumulate) __syncthreads();
  const uint64_t g = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (g < l.groups()) {
    DecodeGroup(l, g, body, GroupCodes(l, g, stages ? staged : body + l.stats_bytes),
                TileValues{tile, first}, accumulate);
  }
  __syncthreads();
  for (uint32_t j = threadIdx.x; j < length; j += kThreads) out[first + j] = tile[Padded(j)];
}

inline unsigned TilesFor(const QuantLayout& l) {
  return static_cast<unsigned>((l.n + kFusedTile - 1) / kFusedTile);
}

// The dynamic shared memory a tile kernel launch for `l` takes: the staging area where
// StagesCodes(l), which needs more than the 48 KB a block gets by default (sm_80 and sm_90
// allow up to 163 and 227 KB): allowed once per device of the process.
cudaError_t StagingBytes(const QuantLayout& l, unsigned* bytes) {
  static_assert(sizeof(float) * kTilePadded + sizeof(LaneStat) * kFusedLanes +
                        kMaxStagedCodeBytes <= 160 * 1024,
                "the encode tile kernel's shared memory must fit sm_80's 163 KB");
  *bytes = 0;
  if (!StagesCodes(l)) return cudaSuccess;
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  static std::atomic<uint64_t> allowed{0};  // Bit d: device d (devices 64+: every call).
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit == 0 || (allowed.load(std::memory_order_acquire) & bit) == 0) {
    const int most = static_cast<int>(kMaxStagedCodeBytes);
    if (const cudaError_t e = cudaFuncSetAttribute(
            encode_tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most);
        e != cudaSuccess) {
      return e;
    }
    if (const cudaError_t e = cudaFuncSetAttribute(
            decode_tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most);
        e != cudaSuccess) {
      return e;
    }
    allowed.fetch_or(bit, std::memory_order_acq_rel);
  }
  *bytes = StagedCodeBytes(l);
  return cudaSuccess;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Kernel launchers
// ---------------------------------------------------------------------------------------

cudaError_t EncodeQuant(void* temp, size_t* temp_bytes, const QuantLayout& l,
                        const RandomKey& key, const float* input, float* residual,
                        float residual_scale, float* state, unsigned char* body,
                        cudaStream_t stream) {
  const bool bucketed = l.kind == QuantKind::kQsgd || l.kind == QuantKind::kMaxMin;
  const bool two_pass = bucketed && !UsesFusedStats(l);
  const bool chunk = l.kind == QuantKind::kTernGrad || l.kind == QuantKind::kEfSign;
  // Never 0 (as CUB): a null `temp` means "size it", so real calls need a real buffer.
  size_t needed = 256;
  if (two_pass) needed = sizeof(LaneStat) * 8 * l.buckets;
  if (chunk) needed = 2 * sizeof(ChunkPartial) * NumSegments(l);
  if (temp == nullptr) {
    *temp_bytes = needed;
    return cudaSuccess;
  }
  if (*temp_bytes < needed) return cudaErrorInvalidValue;
  const GlobalSource source{input, residual};
  if (two_pass) {
    auto* lanes = static_cast<LaneStat*>(temp);
    bucket_lanes_kernel<<<GridFor(8 * l.buckets), kThreads, 0, stream>>>(l, source, lanes);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    bucket_stats_kernel<<<GridFor(l.buckets), kThreads, 0, stream>>>(l, lanes, body);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  if (chunk) {
    auto* partials = static_cast<ChunkPartial*>(temp);
    const uint64_t per_block = kThreads / ChunkLanes(l);
    const unsigned blocks = static_cast<unsigned>((NumSegments(l) + per_block - 1) / per_block);
    chunk_segments_kernel<<<blocks, kThreads, 0, stream>>>(l, source, partials);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    chunk_tree_kernel<<<1, kTreeThreads, 0, stream>>>(l, partials, partials + NumSegments(l),
                                                      body);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  if (UsesLanePath(l)) {
    encode_lanes_kernel<<<GridFor(l.groups() * 32, kLaneBlocks), kThreads, 0, stream>>>(
        l, source, residual, residual_scale, state, body);
    return cudaGetLastError();
  }
  unsigned staged_bytes = 0;
  if (const cudaError_t e = StagingBytes(l, &staged_bytes); e != cudaSuccess) return e;
  encode_tile_kernel<<<TilesFor(l), kThreads, staged_bytes, stream>>>(
      l, key, source, residual, residual_scale, state, body);
  return cudaGetLastError();
}

cudaError_t CheckQuant(const QuantLayout& l, const unsigned char* body,
                       unsigned long long* verdict, cudaStream_t stream) {
  if (const cudaError_t e = cudaMemsetAsync(verdict, 0xff, sizeof(*verdict), stream);
      e != cudaSuccess) {
    return e;
  }
  const uint64_t stats = NumStats(l);
  const uint64_t work = l.groups() > stats ? l.groups() : stats;
  check_kernel<<<GridFor(work), kThreads, 0, stream>>>(l, body, verdict);
  return cudaGetLastError();
}

cudaError_t DecodeQuant(const QuantLayout& l, const unsigned char* body, float* out,
                        bool accumulate, const unsigned long long* verdict, cudaStream_t stream) {
  if (UsesLanePath(l)) {
    decode_lanes_kernel<<<GridFor(l.n, kLaneBlocks), kThreads, 0, stream>>>(l, body, out,
                                                                             accumulate, verdict);
    return cudaGetLastError();
  }
  unsigned staged_bytes = 0;
  if (const cudaError_t e = StagingBytes(l, &staged_bytes); e != cudaSuccess) return e;
  decode_tile_kernel<<<TilesFor(l), kThreads, staged_bytes, stream>>>(l, body, out, accumulate,
                                                                      verdict);
  return cudaGetLastError();
}

}  // namespace tamp::compress::cuda_internal
