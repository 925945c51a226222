// GPU PowerSGD, the worker's products (compress/powersgd.h), bit for bit compress/powersgd.cc's.
//
// Contract (layout and per-element order: compress/cuda/internal/powersgd_agent.h):
//   assemble      M = the zero-padded [m, c] view of input (+ residual)
//   project       P = M Q                    (round 0)
//   project back  Q_i = Mᵀ P̂                 (round 1)
//   finish        residual = s * (M - P̂ Q_iᵀ) at the chunk's positions
// Kernels: a thread per output element, each summing its terms in fp64 in the CPU's order.
// Project's threads walk rows of M (m r threads, c terms each; lanes of a warp share a row
// for r consecutive threads, so its loads are strided across rows); project back's walk
// columns (c r threads, m terms; neighbouring threads read neighbouring values of a row,
// coalesced). No scratch.

#include <cuda_runtime.h>

#include <cstdint>

#include "compress/cuda/internal/grid.cuh"
#include "compress/cuda/internal/launch.h"
#include "compress/cuda/internal/powersgd_agent.h"

namespace tamp::compress::cuda_internal {
namespace {

// ---------------------------------------------------------------------------------------
// CUDA kernels
// ---------------------------------------------------------------------------------------

__global__ void assemble_kernel(PowerSgdLayout l, GlobalSource source, float* matrix) {
  TAMP_GRID_STRIDE(f, l.matrix_values()) { matrix[f] = MatrixEntry(l, f, source); }
}

__global__ void project_kernel(PowerSgdLayout l, const float* matrix, const float* q, float* p) {
  TAMP_GRID_STRIDE(e, l.p_values()) { p[e] = ProjectEntry(l, matrix, q, e); }
}

__global__ void project_back_kernel(PowerSgdLayout l, const float* matrix, const float* p_hat,
                                    float* q_local) {
  TAMP_GRID_STRIDE(e, l.q_values()) { q_local[e] = ProjectBackEntry(l, matrix, p_hat, e); }
}

__global__ void finish_kernel(PowerSgdLayout l, const float* matrix, const float* p_hat,
                              const float* q_local, float* residual, float residual_scale) {
  TAMP_GRID_STRIDE(t, l.n) { FinishEntry(l, matrix, p_hat, q_local, t, residual, residual_scale); }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Kernel launchers
// ---------------------------------------------------------------------------------------

cudaError_t AssemblePowerSgd(const PowerSgdLayout& l, const float* input, const float* residual,
                             float* matrix, cudaStream_t stream) {
  assemble_kernel<<<GridFor(l.matrix_values()), kThreads, 0, stream>>>(
      l, GlobalSource{input, residual}, matrix);
  return cudaGetLastError();
}

cudaError_t ProjectPowerSgd(const PowerSgdLayout& l, const float* matrix, const float* q, float* p,
                            cudaStream_t stream) {
  project_kernel<<<GridFor(l.p_values()), kThreads, 0, stream>>>(l, matrix, q, p);
  return cudaGetLastError();
}

cudaError_t ProjectBackPowerSgd(const PowerSgdLayout& l, const float* matrix, const float* p_hat,
                                float* q_local, cudaStream_t stream) {
  project_back_kernel<<<GridFor(l.q_values()), kThreads, 0, stream>>>(l, matrix, p_hat, q_local);
  return cudaGetLastError();
}

cudaError_t FinishPowerSgd(const PowerSgdLayout& l, const float* matrix, const float* p_hat,
                           const float* q_local, float* residual, float residual_scale,
                           cudaStream_t stream) {
  finish_kernel<<<GridFor(l.n), kThreads, 0, stream>>>(l, matrix, p_hat, q_local, residual,
                                                       residual_scale);
  return cudaGetLastError();
}

}  // namespace tamp::compress::cuda_internal
