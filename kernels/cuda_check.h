// CUDA and cuBLAS error checks: error codes become absl::Status at API boundaries.
//
// Contents:
//   CudaErrorToStatus(), CublasErrorToStatus()   one error code -> Status (most specific code)
//   TAMP_CUDA_RETURN_IF_ERROR(expr)              returns the Status of a failed cudaError_t call
//   TAMP_CUBLAS_RETURN_IF_ERROR(expr)            the same for a cublasStatus_t call
//   TAMP_CUDA_CHECK(expr)                        glog CHECK, for invariants only
// Never CHECK a CUDA call in a destructor or a test helper: after a device fault every CUDA
// call fails, and aborting there hides the fault's report (destructors log instead:
// kernels/device.h FreeDeviceMemory(), PinnedBuffer, CudaEvent).
//
// Messages name the call, the error and where it happened, e.g.
//   "cudaMalloc(&ptr, bytes) failed: cudaErrorMemoryAllocation (out of memory)
//    at compress/cuda/device_codec.cc:120"
// Codes: cudaErrorMemoryAllocation and CUBLAS_STATUS_ALLOC_FAILED are RESOURCE_EXHAUSTED; no
// device, an old driver or an image without code for the device are FAILED_PRECONDITION;
// CUBLAS_STATUS_INVALID_VALUE is INVALID_ARGUMENT; CUBLAS_STATUS_NOT_SUPPORTED and
// ARCH_MISMATCH are UNIMPLEMENTED; everything else is INTERNAL.
//
// Kernel launches report errors through cudaGetLastError() (configuration errors) and the
// next synchronising call (faults); launchers check the former right after the launch:
//   my_kernel<<<grid, block, 0, stream>>>(...);
//   TAMP_CUDA_RETURN_IF_ERROR(cudaGetLastError());
//
// Host C++ only (Abseil does not go through nvcc here); .cu launchers return cudaError_t and
// the .cc wrapper that calls them checks it with these macros.
#ifndef TAMP_KERNELS_CUDA_CHECK_H_
#define TAMP_KERNELS_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace tamp::kernels {

// CudaErrorToStatus()
//
// OK for cudaSuccess; otherwise the Status for `error`, its message naming `expr` and
// file:line.
inline absl::Status CudaErrorToStatus(cudaError_t error, const char* expr, const char* file,
                                      int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(expr, " failed: ", cudaGetErrorName(error), " (", cudaGetErrorString(error),
                   ") at ", file, ":", line);
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDevice:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

// CublasStatusName()
//
// "CUBLAS_STATUS_ALLOC_FAILED", ...
inline const char* CublasStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "CUBLAS_STATUS_UNKNOWN";
  }
}

// CublasErrorToStatus()
//
// OK for CUBLAS_STATUS_SUCCESS; otherwise the Status for `status`, as CudaErrorToStatus().
inline absl::Status CublasErrorToStatus(cublasStatus_t status, const char* expr,
                                        const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat(expr, " failed: ", CublasStatusName(status), " at ", file, ":", line);
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return absl::FailedPreconditionError(message);
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::InvalidArgumentError(message);
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace tamp::kernels

#define TAMP_CUDA_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                      \
    const ::absl::Status tamp_cuda_status_ =                                                \
        ::tamp::kernels::CudaErrorToStatus((expr), #expr, __FILE__, __LINE__);              \
    if (!tamp_cuda_status_.ok()) return tamp_cuda_status_;                                  \
  } while (0)

#define TAMP_CUBLAS_RETURN_IF_ERROR(expr)                                                   \
  do {                                                                                      \
    const ::absl::Status tamp_cublas_status_ =                                              \
        ::tamp::kernels::CublasErrorToStatus((expr), #expr, __FILE__, __LINE__);            \
    if (!tamp_cublas_status_.ok()) return tamp_cublas_status_;                              \
  } while (0)

#define TAMP_CUDA_CHECK(expr)                                                               \
  do {                                                                                      \
    const cudaError_t tamp_cuda_error_ = (expr);                                            \
    CHECK(tamp_cuda_error_ == cudaSuccess)                                                  \
        << #expr << ": " << cudaGetErrorName(tamp_cuda_error_) << " ("                      \
        << cudaGetErrorString(tamp_cuda_error_) << ")";                                     \
  } while (0)

#endif  // TAMP_KERNELS_CUDA_CHECK_H_
