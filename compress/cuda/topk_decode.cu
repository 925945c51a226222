// GPU check and decode of top-k, dgc and threshold bodies (encode: topk.cu), as
// compress/topk.cc and compress/threshold.cc decode them.
//
// Contract (layout: compress/cuda/internal/topk_agent.h):
//   check    *verdict = kValid or the first bad index (range, order), the padding, or (for
//            threshold) a count above n
//   decode   out = (zeros, then the values) or out += the values, only if valid
// A thread per index group of 32 entries (per element to zero the output).

#include <cuda_runtime.h>

#include <cstdint>

#include "compress/cuda/internal/grid.cuh"
#include "compress/cuda/internal/launch.h"
#include "compress/cuda/internal/topk_agent.h"

namespace tamp::compress::cuda_internal {
namespace {

constexpr unsigned kMaxGrid = 1u << 16;

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
