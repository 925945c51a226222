// CUDA plumbing of the GPU model (worker/gpu_model.cc), internal to worker/: owned pinned
// memory, streams and events, and GradientStaging, the way a gradient leaves the device.
// Only with CUDA in the build (tools/cuda.bzl); include it under #if TAMP_HAVE_CUDA.
//
// Threading: none of these is thread-safe; the training thread owns them. Destructors log a
// failed release instead of aborting: after a device fault every CUDA call fails, and
// aborting would hide the fault's own report.
#ifndef TAMP_WORKER_INTERNAL_GRADIENT_STAGING_H_
#define TAMP_WORKER_INTERNAL_GRADIENT_STAGING_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "kernels/cuda_check.h"

namespace tamp::internal {

// "call: cudaErrorX (description)".
std::string CudaError(const char* call, cudaError_t error);

// Logs (ERROR) a failed release.
void LogIfFailed(const char* call, cudaError_t error);

// ---------------------------------------------------------------------------------------
// Owned CUDA objects
// ---------------------------------------------------------------------------------------

// `size` values of T in pinned (page-locked) host memory, so that copies to and from the
// device run asynchronously on a stream. Move-only.
template <typename T>
class PinnedArray {
 public:
  PinnedArray() = default;
  ~PinnedArray() {
    if (data_ != nullptr) LogIfFailed("cudaFreeHost", cudaFreeHost(data_));
  }
  PinnedArray(PinnedArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  PinnedArray& operator=(PinnedArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }

  // Zero-filled.
  static absl::StatusOr<PinnedArray> Create(size_t size) {
    PinnedArray array;
    if (size == 0) return array;
    void* data = nullptr;
    TAMP_CUDA_RETURN_IF_ERROR(cudaMallocHost(&data, size * sizeof(T)));
    std::memset(data, 0, size * sizeof(T));
    array.data_ = static_cast<T*>(data);
    array.size_ = size;
    return array;
  }

  T* data() { return data_; }
  size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

class Stream {
 public:
  Stream() = default;
  ~Stream() {
    if (stream_ != nullptr) LogIfFailed("cudaStreamDestroy", cudaStreamDestroy(stream_));
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  absl::Status Init() {
    TAMP_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return absl::OkStatus();
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event() = default;
  ~Event() {
    if (event_ != nullptr) LogIfFailed("cudaEventDestroy", cudaEventDestroy(event_));
  }
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  absl::Status Init() {
    TAMP_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    return absl::OkStatus();
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// ---------------------------------------------------------------------------------------
// GradientStaging: how a gradient leaves the device
// ---------------------------------------------------------------------------------------

// Moves each tensor's gradient, once backward has produced it on the compute stream, to
// pinned host memory on a copy stream, so the copy overlaps the rest of backward; Wait(t)
// blocks until tensor t's copy is done.
//
// This is the one seam for compression on the GPU: with the client's device path
// (TensorMemory::Cuda) and the codecs of compress/cuda/, Stage() hands the client the
// device slice on this copy stream instead of copying it, and the payloads, not the fp32
// gradients, come through pinned memory.
class GradientStaging {
 public:
  static absl::StatusOr<GradientStaging> Create(size_t total, size_t num_tensors) {
    GradientStaging staging;
    TAMP_ASSIGN_OR_RETURN(staging.host_, PinnedArray<float>::Create(total));
    staging.copy_ = std::make_unique<Stream>();
    TAMP_RETURN_IF_ERROR(staging.copy_->Init());
    TAMP_RETURN_IF_ERROR(staging.produced_.Init());
    staging.staged_.resize(num_tensors);
    for (Event& event : staging.staged_) TAMP_RETURN_IF_ERROR(event.Init());
    return staging;
  }

  // After the kernels that produce tensor t's `count` gradient values at `device` (offset
  // `offset` of the flat layout) were enqueued on `compute`.
  absl::Status Stage(int t, const float* device, size_t offset, size_t count,
                     cudaStream_t compute) {
    TAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(produced_.get(), compute));
    TAMP_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_->get(), produced_.get(), 0));
    TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_.data() + offset, device,
                                              count * sizeof(float), cudaMemcpyDeviceToHost,
                                              copy_->get()));
    TAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(staged_[t].get(), copy_->get()));
    return absl::OkStatus();
  }

  // Blocks until tensor t's gradient is in host().
  absl::Status Wait(int t) {
    TAMP_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staged_[t].get()));
    return absl::OkStatus();
  }

  absl::Span<const float> host() { return absl::MakeConstSpan(host_.data(), host_.size()); }
  cudaStream_t stream() const { return copy_->get(); }

 private:
  GradientStaging() = default;

  PinnedArray<float> host_;       // The flat gradients, as the client reads them.
  std::unique_ptr<Stream> copy_;  // Heap: the object moves, the stream handle must not.
  Event produced_;                // Re-recorded per tensor; the wait takes its latest record.
  std::vector<Event> staged_;     // By tensor.
};


}  // namespace tamp::internal

#endif  // TAMP_WORKER_INTERNAL_GRADIENT_STAGING_H_
