// The launch shape the codecs' kernels share (quantize.cu, randomblock.cu, randomk.cu,
// topk.cu): blocks of kThreads threads, enough for `work` items up to a bound on the grid,
// and the grid-stride loop that covers the items beyond it. Internal to compress/cuda/;
// nvcc only (the loop reads CUDA's built-in indices).
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_GRID_CUH_
#define TAMP_COMPRESS_CUDA_INTERNAL_GRID_CUH_

#include <cstdint>

namespace tamp::compress::cuda_internal {

inline constexpr int kThreads = 256;

// Blocks of kThreads for `work` items: at least one, at most `max_grid`.
inline unsigned GridFor(uint64_t work, unsigned max_grid = 1u << 20) {
  const uint64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < max_grid ? (blocks > 0 ? blocks : 1) : max_grid);
}

}  // namespace tamp::compress::cuda_internal

// for (i = this thread's first item; i < count; i += the grid's threads)
#define TAMP_GRID_STRIDE(i, count)                                                      \
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;      \
       i < (count); i += static_cast<uint64_t>(gridDim.x) * blockDim.x)

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_GRID_CUH_
