// Device tensors for the worker client (worker/client.h): where a call's tensors live
// (TensorMemory), which chunks compress and decompress on the device (PlanDeviceChunks()),
// and the interface through which the client reaches device memory (DeviceBackend), so that
// the client builds, links and runs without CUDA. worker/cuda_backend.h implements it with
// compress/cuda/.
//
// Per chunk, on a device:
//   push: a push codec with a GPU version (compress/cuda/has_device_codec.h) and error
//         feedback NONE, RESIDUAL or (topk, dgc, threshold) DGC_MOMENTUM encodes on the
//         device, on the caller's stream, the memory (residual; DGC's u and v) kept on the
//         device; the payload comes to the host through a pinned buffer. A multi-round codec
//         (powersgd, NONE or RESIDUAL) keeps its matrix and residual on the device too, each
//         round's factor crossing through pinned memory. Any other chunk (DGC momentum
//         around another codec, sparsity warm-up, clip_norm) is copied to the host through
//         the pinned buffer and goes through the CPU codec and residual, exactly as from
//         host memory.
//   pull: a pull codec with a GPU version decodes into the device tensor; any other answer
//         is decoded on the host and the chunk makes a round trip through pinned memory
//         (device -> host, += update, -> device; AGGREGATE only the way back).
// Falling back rather than refusing keeps every codec the config accepts trainable from a
// GPU model, with the same bytes on the wire as a host worker sends (replicas stay identical
// whatever memory each worker's tensors are in); its cost is one PCIe copy of the chunk each
// way, and PlanDeviceChunks() says which chunks pay it and why (the client logs it once).
#ifndef TAMP_WORKER_DEVICE_BACKEND_H_
#define TAMP_WORKER_DEVICE_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/philox.h"
#include "job/job_layout.h"
#include "proto/config.pb.h"

namespace tamp {

// TensorMemory
//
// Where the spans of one client call live. For kCuda the spans hold device pointers, which
// the client never dereferences on the host; `stream` is the caller's cudaStream_t as an
// integer with DLPack's conventions (1: the legacy default stream, 2: the per-thread default
// stream; those are also their cudaStream_t values). The client enqueues its device work on
// that stream, after whatever the caller enqueued there (e.g. the backward pass), and waits
// for it before returning.
struct TensorMemory {
  enum class Kind { kHost, kCuda };

  static TensorMemory Host() { return TensorMemory(); }
  static TensorMemory Cuda(int device, uintptr_t stream) {
    TensorMemory memory;
    memory.kind = Kind::kCuda;
    memory.device = device;
    memory.stream = stream;
    return memory;
  }

  // "cpu" or "cuda:N", as PyTorch names devices.
  std::string Name() const;
  // Same memory (kind and device; the stream may differ from call to call).
  bool SameDevice(const TensorMemory& other) const {
    return kind == other.kind && (kind == Kind::kHost || device == other.device);
  }

  Kind kind = Kind::kHost;
  int device = 0;
  uintptr_t stream = 1;
};

// DeviceChunkPlan
//
// How one chunk's push and pull run when the client's tensors are on a device. An empty
// reason means on the device; otherwise the reason it goes through the host, e.g.
// "the push codec's ratio_warmup has no GPU version".
struct DeviceChunkPlan {
  std::string push_on_host_because;
  std::string pull_on_host_because;

  bool push_on_device() const { return push_on_host_because.empty(); }
  bool pull_on_device() const { return pull_on_host_because.empty(); }
};

// PlanDeviceChunks()
//
// The plan of every chunk of `layout` (by chunk id) under `config` (validated).
std::vector<DeviceChunkPlan> PlanDeviceChunks(const config::RunConfig& config,
                                              const JobLayout& layout);

// DeviceBackend
//
// The client's access to one device: copies through pinned host memory, and the GPU codecs
// of the chunks the plan puts on the device (each with its push residual). Every call
// enqueues on `stream` and waits for its work before returning, so no work on the caller's
// memory outlives the call. Not thread-safe: the client's training thread only.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // CopyToHost(), CopyToDevice()
  //
  // `count` values between device memory and host memory (any; Staging() is pinned).
  virtual absl::Status CopyToHost(const float* device, float* host, size_t count,
                                  uintptr_t stream) = 0;
  virtual absl::Status CopyToDevice(const float* host, float* device, size_t count,
                                    uintptr_t stream) = 0;

  // Staging()
  //
  // Host memory for `count` values, page-locked where the device allows, valid until the
  // next Staging() call.
  virtual absl::StatusOr<absl::Span<float>> Staging(size_t count) = 0;

  // EncodePush()
  //
  // Chunk `id` (a push_on_device() chunk): *payload = the chunk's push codec applied to
  // d_gradient (its length values) plus its residual, the residual updated as the chunk's
  // error feedback says: byte for byte what the CPU codec and compress/error_feedback.h send.
  // For a multi-round push codec (rounds() > 1) this is round 0, as
  // ErrorFeedback::BeginRounds(); the memory changes only in FinishPushRounds().
  virtual absl::Status EncodePush(uint32_t id, const float* d_gradient, const RandomKey& key,
                                  std::string* payload, uintptr_t stream) = 0;

  // PushRound(), FinishPushRounds(), ReplayPushRounds()
  //
  // The later rounds of chunk `id`'s multi-round push codec, as compress/error_feedback.h's
  // NextRound(), FinishRounds() and ReplayRounds() (byte for byte): round `round` >= 1 from
  // the server's answer to the round before; the last answer (the codec's warm start and the
  // residual follow from it); round 0 again from what the last EncodePush() formed. A bad
  // answer is INVALID_ARGUMENT and changes nothing; out of order, FAILED_PRECONDITION.
  virtual absl::Status PushRound(uint32_t id, int round, absl::string_view previous_answer,
                                 const RandomKey& key, std::string* payload, uintptr_t stream) = 0;
  virtual absl::Status FinishPushRounds(uint32_t id, absl::string_view final_answer,
                                        const RandomKey& key, uintptr_t stream) = 0;
  virtual absl::Status ReplayPushRounds(uint32_t id, const RandomKey& key, std::string* payload,
                                        uintptr_t stream) = 0;

  // ApplyPull()
  //
  // Chunk `id` (a pull_on_device() chunk): d_target (its length values) += decode(payload),
  // or = with `overwrite`. A corrupt payload is INVALID_ARGUMENT and d_target is untouched.
  virtual absl::Status ApplyPull(uint32_t id, absl::string_view payload, const RandomKey& key,
                                 float* d_target, bool overwrite, uintptr_t stream) = 0;

  // ResetResiduals()
  //
  // Zeroes every push residual (Client::Rejoin(): the replica they belonged to is gone).
  virtual absl::Status ResetResiduals(uintptr_t stream) = 0;
};

// DeviceBackendFactory
//
// Creates the backend for CUDA device `device` for the chunks of `layout` as `plan` says;
// FAILED_PRECONDITION when this process cannot use that device, its message completing
// 'tensor "NAME" is on cuda:N but ...'. worker/cuda_backend.h's
// CreateCudaBackend() is the client's default; tests pass a host-memory stand-in.
using DeviceBackendFactory = std::function<absl::StatusOr<std::unique_ptr<DeviceBackend>>(
    const JobLayout& layout, absl::Span<const DeviceChunkPlan> plan, int device)>;

}  // namespace tamp

#endif  // TAMP_WORKER_DEVICE_BACKEND_H_
