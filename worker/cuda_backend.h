// The CUDA DeviceBackend (worker/device_backend.h): the worker client's device path, with
// compress/cuda/'s codecs, pinned host buffers and the caller's stream.
//
// Builds everywhere: without CUDA (tools/cuda.bzl) both functions refuse, naming why, so
// the client and the Python extension link and run the same on a CPU-only build.
//
// Example:
//   TAMP_RETURN_IF_ERROR(CheckCudaTensor("fc1.weight", 0));   // Before touching anything.
//   TAMP_ASSIGN_OR_RETURN(auto backend,
//                         CreateCudaBackend(layout, PlanDeviceChunks(config, layout), 0));
#ifndef TAMP_WORKER_CUDA_BACKEND_H_
#define TAMP_WORKER_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "job/job_layout.h"
#include "worker/device_backend.h"

namespace tamp {

// CheckCudaTensor()
//
// OK when this process can run the client's CUDA work on device `device`; otherwise
// FAILED_PRECONDITION naming tensor `name`, e.g.
//   tensor "fc1.weight" is on cuda:0 but this build has no CUDA support (...)
//   tensor "fc1.weight" is on cuda:0 but this process sees no CUDA device (cudaGetDeviceCount: ...)
//   tensor "fc1.weight" is on cuda:3 but this process sees 2 CUDA devices
// Thread-safe; changes nothing.
absl::Status CheckCudaTensor(absl::string_view name, int device);

// CreateCudaBackend()
//
// A DeviceBackendFactory: the GPU codecs (and zeroed residuals) of the chunks `plan` puts on
// the device, a device body buffer and pinned host buffers, on device `device`.
// FAILED_PRECONDITION with what CheckCudaTensor() says after "but " when this process
// cannot use the device; RESOURCE_EXHAUSTED when memory runs out.
absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateCudaBackend(
    const JobLayout& layout, absl::Span<const DeviceChunkPlan> plan, int device);

}  // namespace tamp

#endif  // TAMP_WORKER_CUDA_BACKEND_H_
