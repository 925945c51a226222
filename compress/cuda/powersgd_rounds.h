// PowerSgdWorker: the worker's side of codec powersgd (compress/powersgd.h) with its products
// on a kernel backend, for gradients that live in device memory. Its payloads, residuals and
// warm starts are bit for bit those of PowerSgdCodec under compress/error_feedback.h's
// BeginRounds/NextRound/FinishRounds (NaN payloads aside: see compress/cuda/README.md).
//
// The split: the backend (PowerSgdKernels) holds M and runs the products P = M Q,
// Q_i = Mᵀ P̂ and the residual M - P̂ Q_iᵀ where the data lives (the GPU's:
// compress/cuda/device_powersgd.h; the host's: internal/emulation.h, for tests). Everything
// of size c r or m r stays on the host, as PowerSgdCodec's own code: drawing all-zero columns
// of Q, the warm start Q = Q̄ with unit columns, building the messages and checking the
// server's answers. The host sends Q to the backend at round 0 and P̂ at round 1, and gets
// P and Q_i back, one factor each way per round.
//
// This class has no CUDA in it, so CPU-only builds compile and test it. The residual (with
// RESIDUAL error feedback) is the caller's buffer, in the backend's memory, read by
// BeginRounds() and written by FinishRounds() only.
//
// Blocking: every call enqueues the backend's work on `stream` (a cudaStream_t for the GPU's
// backend, after what the caller enqueued there) and returns when its payload is on the host
// (the backend waits for its own work, never for unrelated work). Not thread-safe.
//
// Example (a GPU worker, RESIDUAL memory; compare compress/error_feedback.h):
//   TAMP_ASSIGN_OR_RETURN(auto worker, CreateDevicePowerSgd(spec, shape));
//   TAMP_RETURN_IF_ERROR(worker->BeginRounds(d_grad, d_residual, 1.0f, key, &payload, s));
//   ... push payload as round 0; answer0 = the server's answer
//   TAMP_RETURN_IF_ERROR(worker->NextRound(1, answer0, key, &payload, s));
//   ... push payload as round 1; the server answers with the update and `aggregate`
//   TAMP_RETURN_IF_ERROR(worker->FinishRounds(aggregate, key, s));
#ifndef TAMP_COMPRESS_CUDA_POWERSGD_ROUNDS_H_
#define TAMP_COMPRESS_CUDA_POWERSGD_ROUNDS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/philox.h"
#include "compress/codec.h"
#include "compress/cuda/internal/powersgd_agent.h"
#include "compress/powersgd.h"
#include "proto/config.pb.h"

namespace tamp::compress::cuda {

// PowerSgdKernels
//
// The products of one chunk (internal/powersgd_agent.h's layout), on the memory its
// pointers live in; factors cross as host spans. `stream` is the backend's (a cudaStream_t
// for the GPU's; the emulation ignores it). Errors are the backend's (a device fault).
class PowerSgdKernels {
 public:
  virtual ~PowerSgdKernels() = default;

  // M = input + residual (residual may be null: input), zero-padded; kept until the next
  // call. Both hold layout.n values.
  virtual absl::Status Assemble(const float* input, const float* residual, void* stream) = 0;
  // p (m r values) = M q (c r values).
  virtual absl::Status Project(absl::Span<const float> q, absl::Span<float> p, void* stream) = 0;
  // q_local (c r) = Mᵀ p_hat (m r); p_hat and q_local are kept for Finish().
  virtual absl::Status ProjectBack(absl::Span<const float> p_hat, absl::Span<float> q_local,
                                   void* stream) = 0;
  // residual (layout.n values) = residual_scale * (M - P̂ Q_iᵀ), cropped to the chunk.
  virtual absl::Status Finish(float* residual, float residual_scale, void* stream) = 0;
};

class PowerSgdWorker {
 public:
  using KernelFactory = absl::FunctionRef<absl::StatusOr<std::unique_ptr<PowerSgdKernels>>(
      const cuda_internal::PowerSgdLayout&)>;

  // PowerSgdWorker::Create()
  //
  // Validates `spec` (compress/registry.h; INVALID_ARGUMENT) and that it names powersgd
  // (UNIMPLEMENTED otherwise), then the chunk's view as PowerSgdCodec::Create() does
  // (INVALID_ARGUMENT when thinner than the rank), then makes the backend for its layout.
  static absl::StatusOr<std::unique_ptr<PowerSgdWorker>> Create(const config::Codec& spec,
                                                                const ChunkShape& shape,
                                                                KernelFactory make_kernels);

  size_t size() const { return layout_.n; }
  const cuda_internal::PowerSgdLayout& layout() const { return layout_; }
  // The warm start Q [c, r] for the next step (all zero before the first).
  absl::Span<const float> warm_start() const { return q_; }

  // PowerSgdWorker::BeginRounds()
  //
  // Round 0 of a step: M = input (+ residual: RESIDUAL memory with scale residual_scale;
  // null for NONE), the all-zero columns of Q drawn, P = M Q into *payload.
  absl::Status BeginRounds(const float* input, float* residual, float residual_scale,
                           const RandomKey& key, std::string* payload, void* stream);

  // PowerSgdWorker::ReplayRounds()
  //
  // Round 0's payload again from the M the last BeginRounds() formed (a restarted server
  // lost the step). FAILED_PRECONDITION before any BeginRounds().
  absl::Status ReplayRounds(const RandomKey& key, std::string* payload, void* stream);

  // PowerSgdWorker::NextRound()
  //
  // Round 1: checks the server's answer to round 0 (P̂; INVALID_ARGUMENT naming what is
  // wrong, nothing changed), then Q_i = Mᵀ P̂ into *payload. FAILED_PRECONDITION out of
  // order (round must be 1, after round 0).
  absl::Status NextRound(int round, absl::string_view previous_answer, const RandomKey& key,
                         std::string* payload, void* stream);

  // PowerSgdWorker::FinishRounds()
  //
  // Checks the aggregate Q̄ (INVALID_ARGUMENT, nothing changed), then with RESIDUAL memory
  // residual = s * (M - P̂ Q_iᵀ), and the warm start becomes Q̄ with unit columns.
  // FAILED_PRECONDITION before round 1.
  absl::Status FinishRounds(absl::string_view final_answer, const RandomKey& key, void* stream);

 private:
  PowerSgdWorker(std::unique_ptr<PowerSgdCodec> host, const cuda_internal::PowerSgdLayout& layout,
                 std::unique_ptr<PowerSgdKernels> kernels);

  // P = M Q for the M the backend holds, with Q's zero columns drawn for `key`.
  absl::Status RoundZero(const RandomKey& key, std::string* payload, void* stream);

  const std::unique_ptr<PowerSgdCodec> host_;  // Its helpers only; never its worker state.
  const std::unique_ptr<PowerSgdKernels> kernels_;
  const cuda_internal::PowerSgdLayout layout_;
  bool have_matrix_ = false;   // BeginRounds() has formed M.
  int next_round_ = 0;         // What NextRound() accepts; kRounds: FinishRounds().
  float* residual_ = nullptr;  // The last BeginRounds()'s RESIDUAL memory, or null.
  float residual_scale_ = 1.0f;
  std::vector<float> q_;       // Warm start Q [c, r].
  std::vector<float> factor_;  // Scratch: P or Q_i.
  std::vector<float> answer_;  // Scratch: the server's P̂ or Q̄, parsed (Q̄ then swaps into q_).
};

}  // namespace tamp::compress::cuda

#endif  // TAMP_COMPRESS_CUDA_POWERSGD_ROUNDS_H_
