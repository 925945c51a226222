// Without CUDA (tools/cuda.bzl) this file compiles to nothing.
#if TAMP_HAVE_CUDA

#include "worker/internal/gradient_staging.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace tamp::internal {

std::string CudaError(const char* call, cudaError_t error) {
  return absl::StrCat(call, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
}

void LogIfFailed(const char* call, cudaError_t error) {
  if (error != cudaSuccess) LOG(ERROR) << CudaError(call, error);
}

}  // namespace tamp::internal

#endif  // TAMP_HAVE_CUDA
