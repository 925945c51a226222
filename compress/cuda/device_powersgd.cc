// Without CUDA (tools/cuda.bzl) this file compiles to nothing.
#if TAMP_HAVE_CUDA

#include "compress/cuda/device_powersgd.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/cuda/internal/launch.h"
#include "kernels/cuda_check.h"
#include "kernels/device.h"

namespace tamp::compress::cuda {
namespace {

using cuda_internal::PowerSgdLayout;
using kernels::CudaEvent;
using kernels::DeviceArray;
using kernels::PinnedBuffer;

class CudaPowerSgdKernels final : public PowerSgdKernels {
 public:
  static absl::StatusOr<std::unique_ptr<PowerSgdKernels>> Create(const PowerSgdLayout& l) {
    std::unique_ptr<CudaPowerSgdKernels> k(new CudaPowerSgdKernels(l));
    TAMP_ASSIGN_OR_RETURN(k->matrix_, DeviceArray<float>::Create(l.matrix_values()));
    TAMP_ASSIGN_OR_RETURN(k->q_, DeviceArray<float>::Create(l.q_values()));
    TAMP_ASSIGN_OR_RETURN(k->p_, DeviceArray<float>::Create(l.p_values()));
    TAMP_ASSIGN_OR_RETURN(k->p_hat_, DeviceArray<float>::Create(l.p_values()));
    TAMP_ASSIGN_OR_RETURN(k->q_local_, DeviceArray<float>::Create(l.q_values()));
    const size_t factor_bytes = sizeof(float) * std::max(l.p_values(), l.q_values());
    TAMP_ASSIGN_OR_RETURN(k->outgoing_, PinnedBuffer::Create(factor_bytes));
    TAMP_ASSIGN_OR_RETURN(k->incoming_, PinnedBuffer::Create(factor_bytes));
    TAMP_ASSIGN_OR_RETURN(k->done_, CudaEvent::Create());
    return std::unique_ptr<PowerSgdKernels>(std::move(k));
  }

  absl::Status Assemble(const float* input, const float* residual, void* stream) override {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    TAMP_CUDA_RETURN_IF_ERROR(
        cuda_internal::AssemblePowerSgd(l_, input, residual, matrix_.data(), s));
    return Done(s);
  }

  absl::Status Project(absl::Span<const float> q, absl::Span<float> p, void* stream) override {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    TAMP_RETURN_IF_ERROR(Upload(q, &q_, s));
    TAMP_CUDA_RETURN_IF_ERROR(
        cuda_internal::ProjectPowerSgd(l_, matrix_.data(), q_.data(), p_.data(), s));
    return Download(p_, p, s);
  }

  absl::Status ProjectBack(absl::Span<const float> p_hat, absl::Span<float> q_local,
                           void* stream) override {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    TAMP_RETURN_IF_ERROR(Upload(p_hat, &p_hat_, s));
    TAMP_CUDA_RETURN_IF_ERROR(
        cuda_internal::ProjectBackPowerSgd(l_, matrix_.data(), p_hat_.data(), q_local_.data(), s));
    return Download(q_local_, q_local, s);
  }

  absl::Status Finish(float* residual, float residual_scale, void* stream) override {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    TAMP_CUDA_RETURN_IF_ERROR(cuda_internal::FinishPowerSgd(
        l_, matrix_.data(), p_hat_.data(), q_local_.data(), residual, residual_scale, s));
    return Done(s);
  }

 private:
  explicit CudaPowerSgdKernels(const PowerSgdLayout& l) : l_(l) {}

  // host -> pinned -> device (every call waits for its own work, so the pinned buffer is
  // free again).
  absl::Status Upload(absl::Span<const float> host, DeviceArray<float>* device, cudaStream_t s) {
    std::memcpy(incoming_.data(), host.data(), sizeof(float) * host.size());
    return device->CopyFromHost(reinterpret_cast<const float*>(incoming_.data()), host.size(), s);
  }
  // device -> pinned, wait, -> host.
  absl::Status Download(const DeviceArray<float>& device, absl::Span<float> host, cudaStream_t s) {
    TAMP_RETURN_IF_ERROR(
        device.CopyToHost(reinterpret_cast<float*>(outgoing_.data()), host.size(), s));
    TAMP_RETURN_IF_ERROR(Done(s));
    std::memcpy(host.data(), outgoing_.data(), sizeof(float) * host.size());
    return absl::OkStatus();
  }
  // Waits for what this worker enqueued so far (a fault surfaces here).
  absl::Status Done(cudaStream_t s) {
    TAMP_RETURN_IF_ERROR(done_.Record(s));
    return done_.Wait();
  }

  const PowerSgdLayout l_;
  DeviceArray<float> matrix_;   // M [m, c].
  DeviceArray<float> q_;        // Q [c, r], uploaded at round 0.
  DeviceArray<float> p_;        // P [m, r].
  DeviceArray<float> p_hat_;    // P̂ [m, r], uploaded at round 1.
  DeviceArray<float> q_local_;  // Q_i [c, r].
  PinnedBuffer outgoing_;       // P or Q_i on their way to the host.
  PinnedBuffer incoming_;       // Q or P̂ on their way to the device.
  CudaEvent done_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PowerSgdWorker>> CreateDevicePowerSgd(const config::Codec& spec,
                                                                     const ChunkShape& shape) {
  return PowerSgdWorker::Create(
      spec, shape,
      [&](const PowerSgdLayout& l) -> absl::StatusOr<std::unique_ptr<PowerSgdKernels>> {
        if (!kernels::CudaDeviceAvailable()) {
          return absl::FailedPreconditionError(
              absl::StrCat("no CUDA device: ", kernels::CudaDeviceUnavailableReason()));
        }
        return CudaPowerSgdKernels::Create(l);
      });
}

}  // namespace tamp::compress::cuda

#endif  // TAMP_HAVE_CUDA
