// GPU random-block (compress/randomblock.h), byte-identical to compress/randomblock.cc.
//
// Contract (layout: compress/cuda/internal/randomblock_agent.h):
//   encode   body = the values of c = input (+ residual) in the B blocks; with error
//            feedback residual = s * (c - decode(body)) over the whole chunk
//   decode   out = decode(body) (zeros outside the blocks), or out += the m values
// Kernels: the block starts (a thread per block, from the shared stream); then a thread per
// body entry (encode without error feedback, decode +=) or per chunk element (encode with
// error feedback, decode =), each coalesced: a block's entries are consecutive elements.
// Scratch: the B starts.

#include <cuda_runtime.h>

#include <cstdint>

#include "compress/cuda/internal/grid.cuh"
#include "compress/cuda/internal/launch.h"
#include "compress/cuda/internal/randomblock_agent.h"

namespace tamp::compress::cuda_internal {
namespace {

// ---------------------------------------------------------------------------------------
// CUDA kernels
// ---------------------------------------------------------------------------------------

__global__ void starts_kernel(RandomBlockLayout l, RandomKey key, uint64_t* starts) {
  TAMP_GRID_STRIDE(s, l.blocks) { starts[s] = BlockStart(l, key, s); }
}

__global__ void encode_entries_kernel(RandomBlockLayout l, const uint64_t* starts,
                                      const float* input, unsigned char* body) {
  TAMP_GRID_STRIDE(j, l.entries()) {
    float decoded;
    StoreSparseValue(l.fp16_values, body, j, input[ElementOf(l, starts, j)], &decoded);
  }
}

__global__ void encode_elements_kernel(RandomBlockLayout l, const uint64_t* starts,
                                       GlobalSource source, float* residual,
                                       float residual_scale, unsigned char* body) {
  TAMP_GRID_STRIDE(i, l.n) {
    residual[i] = EncodeBlockElement(l, starts, i, source(i), residual_scale, body);
  }
}

__global__ void decode_elements_kernel(RandomBlockLayout l, const uint64_t* starts,
                                       const unsigned char* body, float* out) {
  TAMP_GRID_STRIDE(i, l.n) { out[i] = DecodeBlockElement(l, starts, body, i, 0.0f, false); }
}

__global__ void decode_entries_kernel(RandomBlockLayout l, const uint64_t* starts,
                                      const unsigned char* body, float* out) {
  TAMP_GRID_STRIDE(j, l.entries()) {
    const uint64_t i = ElementOf(l, starts, j);
    out[i] = AddRn(out[i], LoadSparseValue(l.fp16_values, body, j));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Kernel launchers
// ---------------------------------------------------------------------------------------

cudaError_t EncodeRandomBlock(void* temp, size_t* temp_bytes, const RandomBlockLayout& l,
                              const RandomKey& key, const float* input, float* residual,
                              float residual_scale, unsigned char* body, cudaStream_t stream) {
  const size_t needed = sizeof(uint64_t) * l.blocks;
  if (temp == nullptr) {
    *temp_bytes = needed;
    return cudaSuccess;
  }
  if (*temp_bytes < needed) return cudaErrorInvalidValue;
  auto* starts = static_cast<uint64_t*>(temp);
  starts_kernel<<<GridFor(l.blocks), kThreads, 0, stream>>>(l, key, starts);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (residual == nullptr) {
    encode_entries_kernel<<<GridFor(l.entries()), kThreads, 0, stream>>>(l, starts, input, body);
  } else {
    encode_elements_kernel<<<GridFor(l.n), kThreads, 0, stream>>>(
        l, starts, GlobalSource{input, residual}, residual, residual_scale, body);
  }
  return cudaGetLastError();
}

cudaError_t DecodeRandomBlock(void* temp, size_t temp_bytes, const RandomBlockLayout& l,
                              const RandomKey& key, const unsigned char* body, float* out,
                              bool accumulate, cudaStream_t stream) {
  if (temp_bytes < sizeof(uint64_t) * l.blocks) return cudaErrorInvalidValue;
  auto* starts = static_cast<uint64_t*>(temp);
  starts_kernel<<<GridFor(l.blocks), kThreads, 0, stream>>>(l, key, starts);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (accumulate) {
    decode_entries_kernel<<<GridFor(l.entries()), kThreads, 0, stream>>>(l, starts, body, out);
  } else {
    decode_elements_kernel<<<GridFor(l.n), kThreads, 0, stream>>>(l, starts, body, out);
  }
  return cudaGetLastError();
}

}  // namespace tamp::compress::cuda_internal
