// GPU encode/decode of the quantizing codecs: fp16, bf16, natural, signsgd, efsign, qsgd,
// terngrad, maxmin. Payload bodies are byte-identical to the CPU codecs' (compress/*.cc).
//
// Contract (n values, body as compress/cuda/internal/quantize_agent.h lays it out):
//   encode   body =, and with error feedback c = input + residual, residual =
//            s * (c - decode(body)) (the residual is read and written once per value)
//   check    *verdict = kValid or the first problem (min over (element, reason))
//   decode   out = or += decode(body), only if *verdict is kValid
//
// Kernels, in the order an encode runs them:
//   bucket stats, fused    qsgd/maxmin, power-of-two bucket_size in [128, 8192]: one block per
//                          8192 values stages c in shared memory, computes its buckets' stats
//                          (8 lanes each, the CPU's summation order) and quantizes from there:
//                          one read of input and residual.
//   bucket stats, 2-pass   other bucket sizes: lane stats (thread per bucket and lane), then
//                          stats per bucket, then the group kernel (input read twice).
//   chunk stats            terngrad, efsign: one block; its scale is 8 (16) serial chains of
//                          double additions by definition (compress/cuda/README.md),
//                          fed from double-buffered shared memory.
//   groups                 thread per 32 values: codes, word stores, residual.
// Per-thread work lives in the agents (quantize_agent.h), shared with the host emulation
// test; this file only maps them onto threads.

#include <cuda_runtime.h>

#include <cstdint>

#include "compress/cuda/internal/launch.h"
#include "compress/cuda/internal/quantize_agent.h"

namespace tamp::compress::cuda_internal {
namespace {

// Tuning constants.
// (kFusedTile, kFusedMinBucket, kChainTile: quantize_agent.h, shared with the emulation.)
constexpr int kThreads = 256;
static_assert(kFusedTile == kThreads * kGroup, "a fused block is one group per thread");
constexpr uint32_t kFusedPadded = kFusedTile + kFusedTile / 32;  // one pad float per 32
constexpr uint32_t kFusedLanes = kFusedTile / kFusedMinBucket * 8;
constexpr unsigned kMaxGrid = 1u << 20;

inline unsigned GridFor(uint64_t work, int threads = kThreads) {
  const uint64_t blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(blocks < kMaxGrid ? (blocks > 0 ? blocks : 1) : kMaxGrid);
}

#define TAMP_GRID_STRIDE(i, count)                                                      \
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;      \
       i < (count); i += static_cast<uint64_t>(gridDim.x) * blockDim.x)

// Position of value j of a fused tile in shared memory: one pad float per 32 keeps a warp
// reading 32 different groups (stride 33) free of bank conflicts.
__device__ __forceinline__ uint32_t Padded(uint64_t j) { return static_cast<uint32_t>(j + (j >> 5)); }

struct TileSource {
  const float* tile;
  uint64_t first;
  __device__ float operator()(uint64_t i) const { return tile[Padded(i - first)]; }
};

// ---------------------------------------------------------------------------------------
// CUDA kernels
// ---------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    encode_fused_kernel(QuantLayout l, RandomKey key, GlobalSource source, float* residual,
                        float residual_scale, unsigned char* body) {
  __shared__ float tile[kFusedPadded];
  __shared__ LaneStat lanes[kFusedLanes];
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * kFusedTile;
  const uint32_t length = l.n - first < kFusedTile ? static_cast<uint32_t>(l.n - first) : kFusedTile;
  for (uint32_t j = threadIdx.x; j < length; j += kThreads) tile[Padded(j)] = source(first + j);
  __syncthreads();

  // Stats of the tile's buckets (the tile holds whole buckets: bucket_size divides 8192).
  const TileSource values{tile, first};
  const uint64_t bucket0 = first / l.bucket_size;
  const uint32_t buckets = (length + l.bucket_size - 1) / l.bucket_size;
  for (uint32_t p = threadIdx.x; p < 8 * buckets; p += kThreads) {
    const uint64_t b = bucket0 + p / 8;
    const BucketView<TileSource> view{&values, b * l.bucket_size};
    lanes[p] = BucketLaneStat(l, view, BucketLength(l, b), static_cast<int>(p % 8));
  }
  __syncthreads();
  for (uint32_t lb = threadIdx.x; lb < buckets; lb += kThreads) {
    StoreBucketStats(l, lanes + 8 * lb, bucket0 + lb, body);
  }
  __syncthreads();  // Also orders the stats' global stores before the reads below.

  const uint64_t g = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (g < l.groups()) EncodeGroup(l, key, g, values, residual, residual_scale, body);
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

// One block. Warps 1.. load tile t + 1 while lanes 0..7 (terngrad) or 0..15 (efsign) of
// warp 0 run their chains over tile t.
__global__ void __launch_bounds__(kThreads)
    chunk_stats_kernel(QuantLayout l, GlobalSource source, unsigned char* body) {
  __shared__ float buffer[2][kChainTile];
  __shared__ int any_nan, any_inf;
  __shared__ TernLane tern[8];
  __shared__ double ef[16];
  const bool is_tern = l.kind == QuantKind::kTernGrad;
  const uint64_t tiles = (l.n + kChainTile - 1) / kChainTile;
  if (threadIdx.x == 0) any_nan = any_inf = 0;
  __syncthreads();  // Before any loader may set them.

  auto load = [&](uint64_t t, int first_thread) {
    float* dst = buffer[t & 1];
    const uint64_t first = t * kChainTile;
    const uint32_t count = l.n - first < kChainTile ? static_cast<uint32_t>(l.n - first) : kChainTile;
    const uint32_t padded = (count + 63) / 64 * 64;  // efsign: whole blocks, +0 padding
    for (uint32_t j = threadIdx.x - first_thread; j < padded; j += kThreads - first_thread) {
      const float v = j < count ? source(first + j) : 0.0f;
      dst[j] = v;
      if (isnan(v)) any_nan = 1;
      else if (isinf(v)) any_inf = 1;
    }
  };

  load(0, 0);
  __syncthreads();
  const double shift = is_tern ? static_cast<double>(buffer[0][0]) : 0.0;
  TernLane lane_tern = ZeroTernLane();
  double lane_ef = 0;
  const int chains = is_tern ? 8 : 16;
  for (uint64_t t = 0; t < tiles; ++t) {
    if (threadIdx.x >= 32) {
      if (t + 1 < tiles) load(t + 1, 32);
    } else if (threadIdx.x < chains) {
      const uint64_t first = t * kChainTile;
      const uint32_t count = l.n - first < kChainTile ? static_cast<uint32_t>(l.n - first) : kChainTile;
      if (is_tern) {
        TernLaneTile(buffer[t & 1], count, shift, threadIdx.x, &lane_tern);
      } else {
        EfSignLaneTile(buffer[t & 1], (count + 63) / 64, threadIdx.x, &lane_ef);
      }
    }
    __syncthreads();
  }
  if (threadIdx.x < chains) {
    if (is_tern) tern[threadIdx.x] = lane_tern;
    else ef[threadIdx.x] = lane_ef;
  }
  __syncthreads();
  if (threadIdx.x == 0) FinishChunkStats(l, tern, ef, any_nan != 0, any_inf != 0, source, body);
}

__global__ void encode_groups_kernel(QuantLayout l, RandomKey key, GlobalSource source,
                                     float* residual, float residual_scale, unsigned char* body) {
  TAMP_GRID_STRIDE(g, l.groups()) { EncodeGroup(l, key, g, source, residual, residual_scale, body); }
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

__global__ void decode_groups_kernel(QuantLayout l, const unsigned char* body, float* out,
                                     bool accumulate, const unsigned long long* verdict) {
  if (verdict != nullptr && *verdict != kValid) return;
  TAMP_GRID_STRIDE(g, l.groups()) { DecodeGroup(l, g, body, out, accumulate); }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Kernel launchers
// ---------------------------------------------------------------------------------------

cudaError_t EncodeQuant(void* temp, size_t* temp_bytes, const QuantLayout& l,
                        const RandomKey& key, const float* input, float* residual,
                        float residual_scale, unsigned char* body, cudaStream_t stream) {
  const bool bucketed = l.kind == QuantKind::kQsgd || l.kind == QuantKind::kMaxMin;
  const bool two_pass = bucketed && !UsesFusedStats(l);
  // Never 0 (as CUB): a null `temp` means "size it", so real calls need a real buffer.
  const size_t needed = two_pass ? sizeof(LaneStat) * 8 * l.buckets : 256;
  if (temp == nullptr) {
    *temp_bytes = needed;
    return cudaSuccess;
  }
  if (*temp_bytes < needed) return cudaErrorInvalidValue;
  const GlobalSource source{input, residual};
  if (bucketed && !two_pass) {
    const unsigned blocks = static_cast<unsigned>((l.n + kFusedTile - 1) / kFusedTile);
    encode_fused_kernel<<<blocks, kThreads, 0, stream>>>(l, key, source, residual,
                                                         residual_scale, body);
    return cudaGetLastError();
  }
  if (two_pass) {
    auto* lanes = static_cast<LaneStat*>(temp);
    bucket_lanes_kernel<<<GridFor(8 * l.buckets), kThreads, 0, stream>>>(l, source, lanes);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    bucket_stats_kernel<<<GridFor(l.buckets), kThreads, 0, stream>>>(l, lanes, body);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  if (l.kind == QuantKind::kTernGrad || l.kind == QuantKind::kEfSign) {
    chunk_stats_kernel<<<1, kThreads, 0, stream>>>(l, source, body);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  encode_groups_kernel<<<GridFor(l.groups()), kThreads, 0, stream>>>(l, key, source, residual,
                                                                     residual_scale, body);
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
  decode_groups_kernel<<<GridFor(l.groups()), kThreads, 0, stream>>>(l, body, out, accumulate,
                                                                     verdict);
  return cudaGetLastError();
}

}  // namespace tamp::compress::cuda_internal
