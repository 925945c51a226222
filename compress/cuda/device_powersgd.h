// CreateDevicePowerSgd(): the worker's side of codec powersgd on the GPU, a PowerSgdWorker
// (compress/cuda/powersgd_rounds.h) whose products run as the kernels of powersgd.cu.
//
// powersgd takes two exchanges per step (compress/codec.h's rounds), so it does not fit
// DeviceCodec's one-call Encode: a step is BeginRounds() (M from the gradient and the
// residual, both device memory; P = M Q), NextRound(1) (Q_i = Mᵀ P̂) and FinishRounds()
// (the residual, the warm start), each returning once its payload is on the host. The
// server's side stays the CPU codec's (it runs on the shards).
//
// Device memory per chunk: M (m c values, about n), P and P̂ (m r each), Q and Q_i (c r
// each). Factors move through pinned buffers, one event per call (no stream-wide sync).
//
// Blocking: each call enqueues its work on the cudaStream_t it is given (as `void*`) and
// waits for its own event, never for the whole stream. Not thread-safe. The residual passed
// to BeginRounds() must stay untouched (and alive) until FinishRounds().
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto worker, CreateDevicePowerSgd(spec, shape));
//   TAMP_RETURN_IF_ERROR(worker->BeginRounds(d_grad, d_residual, 1.0f, key, &payload, stream));
#ifndef TAMP_COMPRESS_CUDA_DEVICE_POWERSGD_H_
#define TAMP_COMPRESS_CUDA_DEVICE_POWERSGD_H_

#include <memory>

#include "absl/status/statusor.h"
#include "compress/codec.h"
#include "compress/cuda/powersgd_rounds.h"
#include "proto/config.pb.h"

namespace tamp::compress::cuda {

// CreateDevicePowerSgd()
//
// PowerSgdWorker::Create()'s checks, then FAILED_PRECONDITION without a device; allocates
// the buffers (RESOURCE_EXHAUSTED when the device or the host's pinned memory runs out).
absl::StatusOr<std::unique_ptr<PowerSgdWorker>> CreateDevicePowerSgd(const config::Codec& spec,
                                                                     const ChunkShape& shape);

}  // namespace tamp::compress::cuda

#endif  // TAMP_COMPRESS_CUDA_DEVICE_POWERSGD_H_
