// Per-thread work of the worker's side of GPU PowerSGD (compress/powersgd.h), written once
// for host and device. Internal to compress/cuda/.
//
// The chunk is the zero-padded matrix M [m, c] (row-major; value t at flat position lead + t),
// Q and Q_i are [c, r], P and P̂ [m, r]. Each agent computes one output element as
// PowerSgdCodec does: its products accumulate in fp64 from +0, term after term in the CPU's
// order (over k for P, over the rows i for Q_i, over j for P̂ Q_iᵀ), through DAddRn()/DMulRn()
// (never an FMA), and round to fp32 once. One thread per output element, so no thread's
// order depends on the grid.
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_POWERSGD_AGENT_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_POWERSGD_AGENT_H_

#include <cstdint>

#include "compress/cuda/internal/codec_math.h"
#include "compress/cuda/internal/quantize_agent.h"

namespace tamp::compress::cuda_internal {

struct PowerSgdLayout {
  uint64_t n = 0;     // The chunk's values.
  uint64_t rows = 0;  // m
  uint64_t cols = 0;  // c
  uint64_t lead = 0;  // Zeros before the chunk's first value.
  uint64_t rank = 0;  // r

  TAMP_HD uint64_t matrix_values() const { return rows * cols; }
  TAMP_HD uint64_t p_values() const { return rows * rank; }
  TAMP_HD uint64_t q_values() const { return cols * rank; }
};

// Flat position f of M: the chunk's value f - lead as the source forms it (input, or
// input + residual), +0 in the padding.
TAMP_HD float MatrixEntry(const PowerSgdLayout& l, uint64_t f, const GlobalSource& source) {
  return f >= l.lead && f - l.lead < l.n ? source(f - l.lead) : 0.0f;
}

// Round 0, element e = i r + j of P = M Q: Σ_k M[i][k] Q[k][j].
TAMP_HD float ProjectEntry(const PowerSgdLayout& l, const float* matrix, const float* q,
                           uint64_t e) {
  const uint64_t i = e / l.rank;
  const uint64_t j = e % l.rank;
  const float* row = matrix + i * l.cols;
  double sum = 0;
  for (uint64_t k = 0; k < l.cols; ++k) {
    sum = DAddRn(sum, DMulRn(static_cast<double>(row[k]), static_cast<double>(q[k * l.rank + j])));
  }
  return DoubleToFloat(sum);
}

// Round 1, element e = k r + j of Q_i = Mᵀ P̂: Σ_i M[i][k] P̂[i][j].
TAMP_HD float ProjectBackEntry(const PowerSgdLayout& l, const float* matrix, const float* p_hat,
                               uint64_t e) {
  const uint64_t k = e / l.rank;
  const uint64_t j = e % l.rank;
  double sum = 0;
  for (uint64_t i = 0; i < l.rows; ++i) {
    sum = DAddRn(sum, DMulRn(static_cast<double>(matrix[i * l.cols + k]),
                             static_cast<double>(p_hat[i * l.rank + j])));
  }
  return DoubleToFloat(sum);
}

// FinishRounds, the chunk's value t: sent = (P̂ Q_iᵀ)[i][k] at its flat position, and the
// residual s * (M - sent) there (error_feedback.cc's RESIDUAL update).
TAMP_HD void FinishEntry(const PowerSgdLayout& l, const float* matrix, const float* p_hat,
                         const float* q_local, uint64_t t, float* residual, float residual_scale) {
  const uint64_t f = l.lead + t;
  const float* p_row = p_hat + (f / l.cols) * l.rank;
  const float* q_row = q_local + (f % l.cols) * l.rank;
  double sum = 0;
  for (uint64_t j = 0; j < l.rank; ++j) {
    sum = DAddRn(sum, DMulRn(static_cast<double>(p_row[j]), static_cast<double>(q_row[j])));
  }
  residual[t] = NextResidual(residual_scale, matrix[f], DoubleToFloat(sum));
}

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_POWERSGD_AGENT_H_
