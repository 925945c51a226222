// Model: what the training loop needs from a model on some backend.
//
// Parameters and gradients are fp32 buffers laid out as JobLayout's flat buffer (tensors
// concatenated in ModelTensors order), so a chunk is a subspan of either. They live where
// memory() says: host memory, or (worker/gpu_model.h) a CUDA device, whose spans hold device
// pointers that the caller hands to the worker client with that TensorMemory and never
// dereferences; ReadParams() copies them to the host either way.
// TrainStep runs forward and backward on one batch, writes d(mean loss)/d(params) into
// grads() and calls on_tensor_ready(t) as soon as tensor t's gradient is final (backward
// runs last layer first), so the caller can push it while earlier layers still compute. On
// a device "final" means final for work enqueued on memory().stream after the call: the
// host has not waited for it.
//
// A device fault cannot be returned by TrainStep or CountCorrect: their result is then
// meaningless and status() holds the error. Host models have none (status() is OK).
//
// Thread safety: one call at a time; callbacks run on the calling thread, and the caller
// must not write params() until TrainStep returns (backward still reads the weights). On a
// device the caller writes params() on memory().stream and waits for its writes before the
// next call (the worker client does both).
#ifndef TAMP_WORKER_MODEL_H_
#define TAMP_WORKER_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/device_backend.h"

namespace tamp {

class Model {
 public:
  virtual ~Model() = default;

  virtual absl::Span<float> params() = 0;
  virtual absl::Span<const float> grads() const = 0;
  // Tensor `tensor`'s gradient of the step in progress, final from its on_tensor_ready(t)
  // until the next TrainStep: the `elements` values at `offset` of grads(), unless the model
  // keeps its gradients elsewhere (LayoutModel's are views into its noise).
  virtual absl::Span<const float> gradient(int tensor, size_t offset, size_t elements) const {
    return grads().subspan(offset, elements);
  }

  // x: batch * 784 normalised pixels; labels: batch values in [0, 10). Returns the mean loss.
  virtual float TrainStep(const float* x, const uint8_t* labels, int batch,
                          const std::function<void(int tensor)>& on_tensor_ready) = 0;

  // Forward only: how many of the batch are classified correctly (argmax).
  virtual int64_t CountCorrect(const float* x, const uint8_t* labels, int batch) = 0;

  // Where params() and grads() live, and for a device the stream of on_tensor_ready.
  virtual TensorMemory memory() const { return TensorMemory::Host(); }

  // A host copy of params() (host.size() == params().size()): for dumps and checks.
  virtual absl::Status ReadParams(absl::Span<float> host) {
    const absl::Span<const float> params = this->params();
    if (host.size() != params.size()) {
      return absl::InvalidArgumentError("ReadParams: host buffer size differs from params()");
    }
    std::copy(params.begin(), params.end(), host.begin());
    return absl::OkStatus();
  }

  // OK, or the first error of a TrainStep, CountCorrect or ReadParams (it sticks).
  virtual absl::Status status() const { return absl::OkStatus(); }
};

}  // namespace tamp

#endif  // TAMP_WORKER_MODEL_H_
