#include "worker/cuda_backend.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/device.h"

#if TAMP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "base/status_macros.h"
#include "compress/codec.h"
#include "compress/cuda/device_codec.h"
#include "compress/cuda/device_powersgd.h"
#include "compress/cuda/has_device_codec.h"
#include "compress/error_feedback.h"
#include "compress/wire_format.h"
#include "kernels/cuda_check.h"
#endif

namespace tamp {
namespace {

// Why this process cannot run CUDA work on `device`; empty when it can.
std::string CudaDeviceProblem(int device) {
#if TAMP_HAVE_CUDA
  if (!kernels::CudaDeviceAvailable()) {
    return absl::StrCat("this process sees no CUDA device (",
                        kernels::CudaDeviceUnavailableReason(), ")");
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  if (device < 0 || device >= count) {
    return absl::StrCat("this process sees ", count, count == 1 ? " CUDA device" : " CUDA devices");
  }
  return "";
#else
  (void)device;
  return "this build has no CUDA support (built without a CUDA toolkit: tools/cuda.bzl)";
#endif
}

#if TAMP_HAVE_CUDA

cudaStream_t AsStream(uintptr_t stream) { return reinterpret_cast<cudaStream_t>(stream); }

// Makes `device` the calling thread's current device while it lives, then restores the
// caller's: the caller's framework keeps its own notion of the current device.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) {
      status_ =
          kernels::CudaErrorToStatus(cudaSetDevice(device), "cudaSetDevice", __FILE__, __LINE__);
      changed_ = status_.ok();
    }
  }
  ~ScopedDevice() {
    if (changed_) cudaSetDevice(previous_);
  }
  const absl::Status& status() const { return status_; }

 private:
  int previous_ = 0;
  bool changed_ = false;
  absl::Status status_;
};

class CudaBackend final : public DeviceBackend {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceBackend>> Create(
      const JobLayout& layout, absl::Span<const DeviceChunkPlan> plan, int device) {
    ScopedDevice scoped(device);
    TAMP_RETURN_IF_ERROR(scoped.status());
    std::unique_ptr<CudaBackend> backend(new CudaBackend(device));
    size_t body_bytes = 0;
    for (const ChunkPlan& chunk : layout.chunks) {
      const DeviceChunkPlan& where = plan[chunk.chunk.id];
      const config::ChunkCompression& compression = chunk.compression;
      Chunk codecs;
      if (where.push_on_device() && compress::cuda::HasDeviceRounds(compression.push().name())) {
        // Its matrix view needs the chunk's place in its tensor.
        const compress::ChunkShape shape = compress::ChunkShapeInTensor(
            layout.tensor_of(chunk).shape, chunk.chunk.offset, chunk.chunk.length);
        TAMP_ASSIGN_OR_RETURN(codecs.rounds,
                              compress::cuda::CreateDevicePowerSgd(compression.push(), shape));
      } else if (where.push_on_device()) {
        TAMP_ASSIGN_OR_RETURN(codecs.push, compress::cuda::DeviceCodec::Create(compression.push(),
                                                                               chunk.chunk.length));
      }
      if (where.push_on_device()) {
        const config::ErrorFeedback& feedback = compression.push_feedback();
        if (feedback.kind() != config::ErrorFeedback::NONE) {
          TAMP_ASSIGN_OR_RETURN(codecs.residual,
                                kernels::DeviceArray<float>::Create(chunk.chunk.length));
          TAMP_CUDA_RETURN_IF_ERROR(cudaMemset(codecs.residual.data(), 0, codecs.residual.bytes()));
          codecs.residual_scale =
              feedback.has_scale() ? feedback.scale() : compress::kDefaultResidualScale;
        }
        if (feedback.kind() == config::ErrorFeedback::DGC_MOMENTUM) {
          TAMP_ASSIGN_OR_RETURN(codecs.velocity,
                                kernels::DeviceArray<float>::Create(chunk.chunk.length));
          TAMP_CUDA_RETURN_IF_ERROR(cudaMemset(codecs.velocity.data(), 0, codecs.velocity.bytes()));
          codecs.momentum =
              feedback.has_momentum() ? feedback.momentum() : compress::kDefaultDgcMomentum;
        }
      }
      if (where.pull_on_device()) {
        TAMP_ASSIGN_OR_RETURN(codecs.pull, compress::cuda::DeviceCodec::Create(compression.pull(),
                                                                               chunk.chunk.length));
        body_bytes = std::max(body_bytes, codecs.pull->BodyBytes());
      }
      backend->chunks_.push_back(std::move(codecs));
    }
    TAMP_ASSIGN_OR_RETURN(backend->body_, kernels::DeviceArray<unsigned char>::Create(body_bytes));
    TAMP_RETURN_IF_ERROR(backend->host_body_.Reserve(body_bytes));
    return std::unique_ptr<DeviceBackend>(std::move(backend));
  }

  absl::Status CopyToHost(const float* device, float* host, size_t count,
                          uintptr_t stream) override {
    return CopyAndWait(host, device, count, cudaMemcpyDeviceToHost, stream);
  }

  absl::Status CopyToDevice(const float* host, float* device, size_t count,
                            uintptr_t stream) override {
    return CopyAndWait(device, host, count, cudaMemcpyHostToDevice, stream);
  }

  absl::StatusOr<absl::Span<float>> Staging(size_t count) override {
    TAMP_RETURN_IF_ERROR(staging_.Reserve(count * sizeof(float)));
    return absl::MakeSpan(reinterpret_cast<float*>(staging_.data()), count);
  }

  absl::Status EncodePush(uint32_t id, const float* d_gradient, const RandomKey& key,
                          std::string* payload, uintptr_t stream) override {
    Chunk& chunk = chunks_[id];
    ScopedDevice scoped(device_);
    TAMP_RETURN_IF_ERROR(scoped.status());
    if (chunk.rounds != nullptr) {  // Round 0; the residual changes in FinishPushRounds().
      return chunk.rounds->BeginRounds(d_gradient, chunk.residual.data(), chunk.residual_scale, key,
                                       payload, AsStream(stream));
    }
    if (chunk.push == nullptr) {
      return absl::InternalError(absl::StrCat("chunk ", id, " has no GPU push codec"));
    }
    // The codec's own pinned buffer; a threshold body is as long as its count says.
    using compress::cuda::DeviceFeedback;
    const DeviceFeedback feedback =
        chunk.velocity.size() != 0
            ? DeviceFeedback::DgcMomentum(chunk.velocity.data(), chunk.residual.data(),
                                          chunk.momentum)
            : DeviceFeedback::Residual(chunk.residual.data(), chunk.residual_scale);
    return chunk.push->EncodeToPayload(d_gradient, feedback, key, payload, AsStream(stream));
  }

  absl::Status PushRound(uint32_t id, int round, absl::string_view previous_answer,
                         const RandomKey& key, std::string* payload, uintptr_t stream) override {
    TAMP_ASSIGN_OR_RETURN(compress::cuda::PowerSgdWorker * rounds, RoundsOf(id));
    ScopedDevice scoped(device_);
    TAMP_RETURN_IF_ERROR(scoped.status());
    return rounds->NextRound(round, previous_answer, key, payload, AsStream(stream));
  }

  absl::Status FinishPushRounds(uint32_t id, absl::string_view final_answer, const RandomKey& key,
                                uintptr_t stream) override {
    TAMP_ASSIGN_OR_RETURN(compress::cuda::PowerSgdWorker * rounds, RoundsOf(id));
    ScopedDevice scoped(device_);
    TAMP_RETURN_IF_ERROR(scoped.status());
    return rounds->FinishRounds(final_answer, key, AsStream(stream));
  }

  absl::Status ReplayPushRounds(uint32_t id, const RandomKey& key, std::string* payload,
                                uintptr_t stream) override {
    TAMP_ASSIGN_OR_RETURN(compress::cuda::PowerSgdWorker * rounds, RoundsOf(id));
    ScopedDevice scoped(device_);
    TAMP_RETURN_IF_ERROR(scoped.status());
    return rounds->ReplayRounds(key, payload, AsStream(stream));
  }

  absl::Status ApplyPull(uint32_t id, absl::string_view payload, const RandomKey& key,
                         float* d_target, bool overwrite, uintptr_t stream) override {
    Chunk& chunk = chunks_[id];
    if (chunk.pull == nullptr) {
      return absl::InternalError(absl::StrCat("chunk ", id, " has no GPU pull codec"));
    }
    compress::cuda::DeviceCodec& codec = *chunk.pull;
    TAMP_ASSIGN_OR_RETURN(const absl::string_view body, codec.CheckedBody(payload));
    ScopedDevice scoped(device_);
    TAMP_RETURN_IF_ERROR(scoped.status());
    const cudaStream_t s = AsStream(stream);
    std::memcpy(host_body_.data(), body.data(), body.size());
    TAMP_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(body_.data(), host_body_.data(), body.size(), cudaMemcpyHostToDevice, s));
    TAMP_RETURN_IF_ERROR(codec.Decode(body_.data(), key, d_target, !overwrite, s));
    // The next chunk reuses both body buffers.
    TAMP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s));
    return absl::OkStatus();
  }

  absl::Status ResetResiduals(uintptr_t stream) override {
    ScopedDevice scoped(device_);
    TAMP_RETURN_IF_ERROR(scoped.status());
    for (Chunk& chunk : chunks_) {
      for (kernels::DeviceArray<float>* memory : {&chunk.residual, &chunk.velocity}) {
        if (memory->size() == 0) continue;
        TAMP_CUDA_RETURN_IF_ERROR(
            cudaMemsetAsync(memory->data(), 0, memory->bytes(), AsStream(stream)));
      }
    }
    TAMP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream)));
    return absl::OkStatus();
  }

 private:
  // One chunk's GPU codecs; null where the plan puts that direction on the host.
  struct Chunk {
    std::unique_ptr<compress::cuda::DeviceCodec> push;
    // A multi-round push codec's worker side instead of `push` (HasDeviceRounds()).
    std::unique_ptr<compress::cuda::PowerSgdWorker> rounds;
    // The push's error feedback: RESIDUAL's residual or DGC_MOMENTUM's v, and DGC's u;
    // empty where the kind keeps none.
    kernels::DeviceArray<float> residual;
    kernels::DeviceArray<float> velocity;
    float residual_scale = 1.0f;
    float momentum = 0.0f;
    std::unique_ptr<compress::cuda::DeviceCodec> pull;
  };

  explicit CudaBackend(int device) : device_(device) {}

  absl::StatusOr<compress::cuda::PowerSgdWorker*> RoundsOf(uint32_t id) {
    if (chunks_[id].rounds == nullptr) {
      return absl::InternalError(absl::StrCat("chunk ", id, " has no GPU multi-round push codec"));
    }
    return chunks_[id].rounds.get();
  }

  // Copies `count` floats on `stream`, on this backend's device, and waits for the copy.
  absl::Status CopyAndWait(float* to, const float* from, size_t count, cudaMemcpyKind kind,
                           uintptr_t stream) {
    ScopedDevice scoped(device_);
    TAMP_RETURN_IF_ERROR(scoped.status());
    TAMP_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(to, from, count * sizeof(float), kind, AsStream(stream)));
    TAMP_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(AsStream(stream)));
    return absl::OkStatus();
  }

  const int device_;
  std::vector<Chunk> chunks_;                 // By chunk id.
  kernels::DeviceArray<unsigned char> body_;  // One pull body on the device (pushes use
  kernels::PinnedBuffer host_body_;           // the codecs' own); the same on the host,
                                              // grown by Reserve().
  kernels::PinnedBuffer staging_;             // Staging(), grown by Reserve().
};

#endif  // TAMP_HAVE_CUDA

}  // namespace

absl::Status CheckCudaTensor(absl::string_view name, int device) {
  const std::string problem = CudaDeviceProblem(device);
  if (problem.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("tensor \"", name, "\" is on cuda:", device, " but ", problem));
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateCudaBackend(
    const JobLayout& layout, absl::Span<const DeviceChunkPlan> plan, int device) {
  const std::string problem = CudaDeviceProblem(device);
  if (!problem.empty()) return absl::FailedPreconditionError(problem);
#if TAMP_HAVE_CUDA
  return CudaBackend::Create(layout, plan, device);
#else
  return absl::InternalError("CudaDeviceProblem() is never empty without CUDA");
#endif
}

}  // namespace tamp
