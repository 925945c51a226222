#include "kernels/device.h"

#include <cstdlib>

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
void FreeDeviceMemory(void* data) {
  const cudaError_t error = cudaFree(data);
  if (error != cudaSuccess) {
    LOG(ERROR) << "cudaFree(" << data << ") failed: " << cudaGetErrorName(error) << " ("
               << cudaGetErrorString(error) << "); the memory is leaked";
  }
}
#endif

}  // namespace tamp::kernels
