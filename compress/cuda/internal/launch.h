// Raw launchers of compress/cuda/quantize.cu, topk.cu (top-k and threshold), randomblock.cu
// and randomk.cu. Internal to compress/cuda/: use compress/cuda/device_codec.h.
//
// CUB's conventions: host functions that enqueue kernels on `stream` and return
// cudaError_t (the launch's; faults surface at the next synchronising call). Those that need
// scratch take it in two passes: called with temp == nullptr they only set *temp_bytes
// (never to 0, so a real call always passes a real buffer).
// Plain types only, so this header compiles under nvcc and the host compiler alike.
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_LAUNCH_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "base/philox.h"
#include "compress/cuda/internal/powersgd_agent.h"
#include "compress/cuda/internal/quantize_agent.h"
#include "compress/cuda/internal/randomblock_agent.h"
#include "compress/cuda/internal/randomk_agent.h"
#include "compress/cuda/internal/topk_agent.h"

namespace tamp::compress::cuda_internal {

// ---------------------------------------------------------------------------------------
// Quantizing codecs (layout: quantize_agent.h)
// ---------------------------------------------------------------------------------------

// Encodes `input` (layout.n values) into `body` (layout.body_bytes(), 4-byte aligned). With
// `residual` (else null): c = input + residual is encoded and residual = residual_scale *
// (c - decode(body)) written back, in the same pass (UsesFusedStats() for qsgd/maxmin says
// whether their stats share it). `input` and `residual` need only float alignment. `state`:
// signum's momentum (layout.n values, stepped), null for the others.
cudaError_t EncodeQuant(void* temp, size_t* temp_bytes, const QuantLayout& layout,
                        const RandomKey& key, const float* input, float* residual,
                        float residual_scale, float* state, unsigned char* body,
                        cudaStream_t stream);

// Sets *verdict (device) to kValid or the smallest verdict (quantize_agent.h QuantReason)
// of `body`.
cudaError_t CheckQuant(const QuantLayout& layout, const unsigned char* body,
                       unsigned long long* verdict, cudaStream_t stream);

// out = decode(body), or out += with `accumulate`; does nothing when `verdict` (device, may
// be null) is not kValid by the time it runs.
cudaError_t DecodeQuant(const QuantLayout& layout, const unsigned char* body, float* out,
                        bool accumulate, const unsigned long long* verdict, cudaStream_t stream);

// ---------------------------------------------------------------------------------------
// topk (layout: topk_agent.h)
// ---------------------------------------------------------------------------------------

// Selects the layout.k largest magnitudes of c = input, or input with `feedback`'s memory
// (topk_agent.h SparseFeedback), exactly as compress/select.h does and writes the body; the
// memory is then what it keeps (c is staged in it meanwhile).
cudaError_t EncodeTopK(void* temp, size_t* temp_bytes, const TopKLayout& layout,
                       const float* input, const SparseFeedback& feedback, unsigned char* body,
                       cudaStream_t stream);

// Checks the indices (range, strictly increasing, zero padding) into *verdict.
cudaError_t CheckTopK(const TopKLayout& layout, const unsigned char* body,
                      unsigned long long* verdict, cudaStream_t stream);

// out = decode(body) (zeros elsewhere) or out += the k values; nothing unless *verdict is
// kValid.
cudaError_t DecodeTopK(const TopKLayout& layout, const unsigned char* body, float* out,
                       bool accumulate, const unsigned long long* verdict, cudaStream_t stream);

// ---------------------------------------------------------------------------------------
// threshold (layout: topk_agent.h with k = n, the most entries a body can hold)
// ---------------------------------------------------------------------------------------

// Writes the body (count, then the entries whose MagnitudeKey(c) > key_floor:
// ThresholdCodec::KeyFloor()) of c as EncodeTopK() forms it, with the same memory. The
// body's length follows from its count (ThresholdBodyBytes()); its scratch (sized by its own
// null-temp call) holds no candidates, EncodeTopK()'s does.
cudaError_t EncodeThreshold(void* temp, size_t* temp_bytes, const TopKLayout& layout,
                            uint32_t key_floor, const float* input,
                            const SparseFeedback& feedback, unsigned char* body,
                            cudaStream_t stream);

// Checks the count (<= n), then the entries as CheckTopK() does. The body's length must
// have been checked against its count (the device cannot).
cudaError_t CheckThreshold(const TopKLayout& layout, const unsigned char* body,
                           unsigned long long* verdict, cudaStream_t stream);

// As DecodeTopK(), for the body's count of entries.
cudaError_t DecodeThreshold(const TopKLayout& layout, const unsigned char* body, float* out,
                            bool accumulate, const unsigned long long* verdict,
                            cudaStream_t stream);

// ---------------------------------------------------------------------------------------
// randomblock (layout: randomblock_agent.h)
// ---------------------------------------------------------------------------------------

// Writes the body of c = input (+ residual) for `key`'s blocks; with `residual`, residual =
// residual_scale * (c - decode(body)) over the whole chunk. Scratch: the block starts.
cudaError_t EncodeRandomBlock(void* temp, size_t* temp_bytes, const RandomBlockLayout& layout,
                              const RandomKey& key, const float* input, float* residual,
                              float residual_scale, unsigned char* body, cudaStream_t stream);

// out = decode(body) (zeros outside the blocks), or out += the values; `temp` as sized by
// EncodeRandomBlock(). Every body of the right length is valid.
cudaError_t DecodeRandomBlock(void* temp, size_t temp_bytes, const RandomBlockLayout& layout,
                              const RandomKey& key, const unsigned char* body, float* out,
                              bool accumulate, cudaStream_t stream);

// ---------------------------------------------------------------------------------------
// randomk (layout: randomk_agent.h)
// ---------------------------------------------------------------------------------------

// Writes the body of c = input (+ residual) at `positions` (device, layout.k ascending
// indices: RandomKCodec::Positions()); with `residual`, residual = residual_scale * (c -
// decode(body)) over the whole chunk. Scratch: a bitmap of the chunk.
cudaError_t EncodeRandomK(void* temp, size_t* temp_bytes, const RandomKLayout& layout,
                          const uint32_t* positions, const float* input, float* residual,
                          float residual_scale, unsigned char* body, cudaStream_t stream);

// out = decode(body) (zeros elsewhere), or out += the values at `positions`. Every body of
// the right length is valid.
cudaError_t DecodeRandomK(const RandomKLayout& layout, const uint32_t* positions,
                          const unsigned char* body, float* out, bool accumulate,
                          cudaStream_t stream);

// ---------------------------------------------------------------------------------------
// powersgd, the worker's side (layout: powersgd_agent.h)
// ---------------------------------------------------------------------------------------

// matrix (layout.matrix_values()) = the zero-padded view of input (+ residual, may be null).
cudaError_t AssemblePowerSgd(const PowerSgdLayout& layout, const float* input,
                             const float* residual, float* matrix, cudaStream_t stream);

// p (layout.p_values()) = matrix q.
cudaError_t ProjectPowerSgd(const PowerSgdLayout& layout, const float* matrix, const float* q,
                            float* p, cudaStream_t stream);

// q_local (layout.q_values()) = matrixᵀ p_hat.
cudaError_t ProjectBackPowerSgd(const PowerSgdLayout& layout, const float* matrix,
                                const float* p_hat, float* q_local, cudaStream_t stream);

// residual (layout.n) = residual_scale * (matrix - p_hat q_localᵀ) at the chunk's positions.
cudaError_t FinishPowerSgd(const PowerSgdLayout& layout, const float* matrix, const float* p_hat,
                           const float* q_local, float* residual, float residual_scale,
                           cudaStream_t stream);

}  // namespace tamp::compress::cuda_internal

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_LAUNCH_H_
