// The CUDA device as the rest of Tamp sees it: whether there is one, and owned device memory.
//
// Contents:
//   CudaDeviceAvailable()            whether CUDA code can run here (always false without CUDA)
//   CudaDeviceUnavailableReason()    why not, for logs and test skips
//   CudaRequired()                   whether a missing device is an error (TAMP_REQUIRE_CUDA=1)
//   DeviceArray<T>                   an owned cudaMalloc'd array (only with TAMP_HAVE_CUDA)
//   PinnedBuffer                     owned page-locked host memory (only with TAMP_HAVE_CUDA)
//   CudaEvent                        an owned event: record on a stream, wait for it
//
// Builds without CUDA (no toolkit, or TAMP_DISABLE_CUDA=1; see tools/cuda.bzl) still have
// the first two, so callers can choose a backend at run time without #ifs.
//
// Tests of CUDA code skip on machines without a device through TAMP_SKIP_WITHOUT_CUDA() in
// kernels/cuda_testing.h, which prints "no CUDA device: skipping (<reason>)", and fail
// instead where CudaRequired().
//
// Example:
//   if (!kernels::CudaDeviceAvailable()) {
//     LOG(INFO) << "CPU backend: " << kernels::CudaDeviceUnavailableReason();
//   }
//   TAMP_ASSIGN_OR_RETURN(auto grads, kernels::DeviceArray<float>::Create(n));
#ifndef TAMP_KERNELS_DEVICE_H_
#define TAMP_KERNELS_DEVICE_H_

#include <cstddef>
#include <string>
#include <utility>

#if TAMP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "absl/status/statusor.h"
#include "kernels/cuda_check.h"
#endif

namespace tamp::kernels {

// The oldest compute capability the kernels are built for (tools/cuda.bzl: sm_80, sm_90).
inline constexpr int kMinComputeCapability = 80;

// CudaDeviceAvailable()
//
// True when this build has CUDA and device 0 exists, the driver accepts this runtime and
// the device is sm_80 or newer. Decided once (the first call), then cached; thread-safe.
bool CudaDeviceAvailable();

// CudaDeviceUnavailableReason()
//
// Empty when CudaDeviceAvailable(); otherwise why not, e.g. "built without CUDA",
// "cudaGetDeviceCount: cudaErrorNoDevice (no CUDA-capable device is detected)",
// "device 0 (Tesla T4) is sm_75; the kernels need sm_80 or newer".
const std::string& CudaDeviceUnavailableReason();

// CudaRequired()
//
// True when the environment variable TAMP_REQUIRE_CUDA is "1" (read at each call). There a
// missing device (or a build without CUDA) is an error, not a reason to skip: tests of CUDA
// code fail and the GPU benchmarks exit non-zero. bench/gpu/run_on_device.sh sets it on the
// device machine, so a run that sees no GPU, or carries a CPU-only build, cannot pass.
bool CudaRequired();

#if TAMP_HAVE_CUDA

// FreeDeviceMemory()
//
// cudaFree(data); a failure is logged (ERROR), not fatal. After a device fault (an illegal
// address, say) every CUDA call returns that sticky error, cudaFree included, and the
// destructors that run while a test or a worker unwinds from the fault must not abort the
// process: that would hide the report of the fault itself.
void FreeDeviceMemory(void* data);

// DeviceArray<T>
//
// `size` values of T in device memory (cudaMalloc: 256-byte aligned, uninitialised), freed
// on destruction (FreeDeviceMemory(): an error is logged, never fatal). Move-only. A
// zero-size array holds nullptr.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto x, DeviceArray<float>::Create(n));
//   TAMP_RETURN_IF_ERROR(x.CopyFromHost(host.data(), n, stream));
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() { Reset(); }
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  // DeviceArray::Create()
  //
  // RESOURCE_EXHAUSTED when the device is out of memory.
  static absl::StatusOr<DeviceArray> Create(size_t size) {
    DeviceArray array;
    if (size > 0) {
      void* data = nullptr;
      TAMP_CUDA_RETURN_IF_ERROR(cudaMalloc(&data, size * sizeof(T)));
      array.data_ = static_cast<T*>(data);
      array.size_ = size;
    }
    return array;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

  // DeviceArray::CopyFromHost(), CopyToHost()
  //
  // Asynchronous on `stream` (pageable host memory makes them synchronous in practice);
  // count <= size().
  absl::Status CopyFromHost(const T* host, size_t count, cudaStream_t stream) {
    TAMP_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(data_, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
    return absl::OkStatus();
  }
  absl::Status CopyToHost(T* host, size_t count, cudaStream_t stream) const {
    TAMP_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host, data_, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
    return absl::OkStatus();
  }

 private:
  void Reset() {
    if (data_ != nullptr) FreeDeviceMemory(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
};

// PinnedBuffer
//
// `size` bytes of page-locked host memory (cudaMallocHost), freed on destruction (an error
// is logged, never fatal). Copies between it and the device run asynchronously; with a
// pageable buffer cudaMemcpyAsync stages through the driver and the host waits. Allocating
// costs far more than a copy: keep one per long-lived owner. Move-only; size 0 holds
// nullptr.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto staging, PinnedBuffer::Create(bytes));
//   TAMP_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging.data(), d_body, bytes,
//                                             cudaMemcpyDeviceToHost, stream));
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // PinnedBuffer::Create()
  //
  // RESOURCE_EXHAUSTED when the host cannot pin that much; FAILED_PRECONDITION without a
  // device.
  static absl::StatusOr<PinnedBuffer> Create(size_t size);

  // PinnedBuffer::Reserve()
  //
  // Makes size() at least `size`, for an owner that grows one buffer on demand: a no-op when
  // it already is; otherwise the old buffer (and its contents) is freed first, so the host
  // never pins both, then `size` bytes are pinned. Errors as Create(), leaving the buffer
  // empty (size 0).
  absl::Status Reserve(size_t size);

  unsigned char* data() { return data_; }
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

// CudaEvent
//
// A CUDA event without timing, destroyed on destruction (an error is logged, never fatal).
// Record() marks what `stream` has enqueued so far; Wait() blocks the host until that work
// is done, and not for anything enqueued after it (cudaStreamSynchronize would). Waiting for
// an event never recorded returns at once. Move-only.
//
// Example:
//   TAMP_RETURN_IF_ERROR(copied.Record(stream));   // After the copy into pinned memory.
//   ...                                             // Host work goes on meanwhile.
//   TAMP_RETURN_IF_ERROR(copied.Wait());           // The copy is done.
class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // CudaEvent::Create()
  //
  // FAILED_PRECONDITION without a device.
  static absl::StatusOr<CudaEvent> Create();

  absl::Status Record(cudaStream_t stream);
  absl::Status Wait() const;

 private:
  cudaEvent_t event_ = nullptr;
};

#endif  // TAMP_HAVE_CUDA

}  // namespace tamp::kernels

#endif  // TAMP_KERNELS_DEVICE_H_
