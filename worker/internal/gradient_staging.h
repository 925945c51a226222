// CUDA plumbing of the GPU model (worker/gpu_model.cc), internal to worker/: owned pinned
// memory, streams and events, and GradientStaging, the way a gradient leaves backward.
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

// Hands each tensor's gradient, still on the device, to work on a second stream (stream())
// as soon as backward has produced it on the compute stream: Produced(t) records tensor t's
// event on the compute stream, HandOff(t) makes stream() wait for it on the device (the host
// does not wait). Work the caller then enqueues on stream() -- the worker client's GPU
// encode, or its copy to pinned memory for a codec without a GPU version -- runs after the
// gradient exists and beside the rest of backward, and only payloads cross PCIe.
//
// Example (one step; GpuNet::TrainStep):
//   backward: ... kernels producing tensor t on `compute` ...; staging.Produced(t, compute);
//   then, per tensor in that order: staging.HandOff(t); client.Push(t, device slice,
//                                   TensorMemory::Cuda(gpu, staging.stream()));
class GradientStaging {
 public:
  static absl::StatusOr<GradientStaging> Create(size_t num_tensors) {
    GradientStaging staging;
    staging.stream_ = std::make_unique<Stream>();
    TAMP_RETURN_IF_ERROR(staging.stream_->Init());
    staging.produced_.resize(num_tensors);
    for (Event& event : staging.produced_) TAMP_RETURN_IF_ERROR(event.Init());
    return staging;
  }

  // After the kernels that produce tensor t's gradient were enqueued on `compute`.
  absl::Status Produced(int t, cudaStream_t compute) {
    TAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(produced_[t].get(), compute));
    return absl::OkStatus();
  }

  // After Produced(t) of this step: work enqueued on stream() from now on runs after
  // tensor t's gradient is complete. Does not block the host.
  absl::Status HandOff(int t) {
    TAMP_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_->get(), produced_[t].get(), 0));
    return absl::OkStatus();
  }

  cudaStream_t stream() const { return stream_->get(); }

 private:
  GradientStaging() = default;

  std::unique_ptr<Stream> stream_;  // Heap: the object moves, the stream handle must not.
  std::vector<Event> produced_;     // By tensor, recorded once per step.
};

}  // namespace tamp::internal

#endif  // TAMP_WORKER_INTERNAL_GRADIENT_STAGING_H_
