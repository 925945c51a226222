// GPU random-k (compress/randomk.h), byte-identical to compress/randomk.cc.
//
// Contract (layout: compress/cuda/internal/randomk_agent.h; positions on the device, as
// RandomKCodec::Positions() draws them):
//   encode   body = the values of c = input (+ residual) at the positions; with error
//            feedback residual = s * (c - decode(body)) over the whole chunk
//   decode   out = decode(body) (zeros elsewhere), or out += the k values
// Kernels: a thread per entry (gather, or scatter on decode); with error feedback the
// bitmap of sent elements is cleared first and a thread per element then updates the
// residuals of the rest. Scratch: the bitmap (n bits).

#include <cuda_runtime.h>

#include <cstdint>

#include "compress/cuda/internal/grid.cuh"
#include "compress/cuda/internal/launch.h"
#include "compress/cuda/internal/randomk_agent.h"

namespace tamp::compress::cuda_internal {
namespace {

// ---------------------------------------------------------------------------------------
// CUDA kernels
// ---------------------------------------------------------------------------------------

__global__ void encode_entries_kernel(RandomKLayout l, const uint32_t* positions,
                                      GlobalSource source, float* residual,
                                      float residual_scale, uint32_t* taken,
                                      unsigned char* body) {
  TAMP_GRID_STRIDE(j, l.k) {
    EncodeRandomKEntry(l, positions, j, source, residual, residual_scale, taken, body);
  }
}

__global__ void encode_rest_kernel(RandomKLayout l, GlobalSource source, float* residual,
                                   float residual_scale, const uint32_t* taken) {
  TAMP_GRID_STRIDE(i, l.n) { EncodeRandomKRest(i, source, residual, residual_scale, taken); }
}

__global__ void decode_entries_kernel(RandomKLayout l, const uint32_t* positions,
                                      const unsigned char* body, float* out, bool accumulate) {
  TAMP_GRID_STRIDE(j, l.k) { DecodeRandomKEntry(l, positions, j, body, out, accumulate); }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Kernel launchers
// ---------------------------------------------------------------------------------------

cudaError_t EncodeRandomK(void* temp, size_t* temp_bytes, const RandomKLayout& l,
                          const uint32_t* positions, const float* input, float* residual,
                          float residual_scale, unsigned char* body, cudaStream_t stream) {
  const size_t needed = sizeof(uint32_t) * l.bitmap_words();
  if (temp == nullptr) {
    *temp_bytes = needed;
    return cudaSuccess;
  }
  if (*temp_bytes < needed) return cudaErrorInvalidValue;
  auto* taken = static_cast<uint32_t*>(temp);
  if (residual != nullptr) {
    if (const cudaError_t e = cudaMemsetAsync(taken, 0, needed, stream); e != cudaSuccess) {
      return e;
    }
  }
  const GlobalSource source{input, residual};
  encode_entries_kernel<<<GridFor(l.k), kThreads, 0, stream>>>(l, positions, source, residual,
                                                               residual_scale, taken, body);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (residual == nullptr) return cudaSuccess;
  encode_rest_kernel<<<GridFor(l.n), kThreads, 0, stream>>>(l, source, residual, residual_scale,
                                                            taken);
  return cudaGetLastError();
}

cudaError_t DecodeRandomK(const RandomKLayout& l, const uint32_t* positions,
                          const unsigned char* body, float* out, bool accumulate,
                          cudaStream_t stream) {
  if (!accumulate) {
    if (const cudaError_t e = cudaMemsetAsync(out, 0, sizeof(float) * l.n, stream);
        e != cudaSuccess) {
      return e;
    }
  }
  decode_entries_kernel<<<GridFor(l.k), kThreads, 0, stream>>>(l, positions, body, out,
                                                               accumulate);
  return cudaGetLastError();
}

}  // namespace tamp::compress::cuda_internal
