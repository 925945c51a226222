#include "kernels/device.h"

#include <cstdlib>
#include <utility>

#if TAMP_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#endif

namespace tamp::kernels {
namespace {

// Empty when a device is usable.
std::string ProbeDevice() {
#if TAMP_HAVE_CUDA
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorName(error), " (",
                        cudaGetErrorString(error), ")");
  }
  if (count < 1) return "cudaGetDeviceCount: no devices";
  cudaDeviceProp prop;
  if (const cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess) {
    return absl::StrCat("cudaGetDeviceProperties: ", cudaGetErrorName(e));
  }
  const int capability = 10 * prop.major + prop.minor;
  if (capability < kMinComputeCapability) {
    return absl::StrCat("device 0 (", prop.name, ") is sm_", capability, "; the kernels need sm_",
                        kMinComputeCapability, " or newer");
  }
  return "";
#else
  return "built without CUDA";
#endif
}

}  // namespace

const std::string& CudaDeviceUnavailableReason() {
  static const std::string* const reason = new std::string(ProbeDevice());
  return *reason;
}

bool CudaDeviceAvailable() { return CudaDeviceUnavailableReason().empty(); }

bool CudaRequired() {
  const char* value = std::getenv("TAMP_REQUIRE_CUDA");
  return value != nullptr && std::string(value) == "1";
}

#if TAMP_HAVE_CUDA
namespace {

// What destructors do with an error: log it (see FreeDeviceMemory()).
void LogIfError(cudaError_t error, const char* what, const void* handle) {
  if (error == cudaSuccess) return;
  LOG(ERROR) << what << "(" << handle << ") failed: " << cudaGetErrorName(error) << " ("
             << cudaGetErrorString(error) << "); the resource is leaked";
}

}  // namespace

void FreeDeviceMemory(void* data) { LogIfError(cudaFree(data), "cudaFree", data); }

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) LogIfError(cudaFreeHost(data_), "cudaFreeHost", data_);
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) LogIfError(cudaFreeHost(data_), "cudaFreeHost", data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

absl::StatusOr<PinnedBuffer> PinnedBuffer::Create(size_t size) {
  PinnedBuffer buffer;
  if (size > 0) {
    void* data = nullptr;
    TAMP_CUDA_RETURN_IF_ERROR(cudaMallocHost(&data, size));
    buffer.data_ = static_cast<unsigned char*>(data);
    buffer.size_ = size;
  }
  return buffer;
}

absl::Status PinnedBuffer::Reserve(size_t size) {
  if (size <= size_) return absl::OkStatus();
  *this = PinnedBuffer();  // Free the old one before pinning more.
  absl::StatusOr<PinnedBuffer> bigger = Create(size);
  if (!bigger.ok()) return bigger.status();
  *this = std::move(*bigger);
  return absl::OkStatus();
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) LogIfError(cudaEventDestroy(event_), "cudaEventDestroy", event_);
}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) LogIfError(cudaEventDestroy(event_), "cudaEventDestroy", event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

absl::StatusOr<CudaEvent> CudaEvent::Create() {
  CudaEvent event;
  TAMP_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event.event_, cudaEventDisableTiming));
  return event;
}

absl::Status CudaEvent::Record(cudaStream_t stream) {
  TAMP_CUDA_RETURN_IF_ERROR(cudaEventRecord(event_, stream));
  return absl::OkStatus();
}

absl::Status CudaEvent::Wait() const {
  TAMP_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(event_));
  return absl::OkStatus();
}
#endif

}  // namespace tamp::kernels
