// Model: what the training loop needs from a model on some backend.
//
// Parameters and gradients are host fp32 buffers laid out as JobLayout's flat buffer
// (tensors concatenated in ModelTensors order), so a chunk is a subspan of either.
// TrainStep runs forward and backward on one batch, writes d(mean loss)/d(params) into
// grads() and calls on_tensor_ready(t) as soon as tensor t's gradient is final (backward
// runs last layer first), so the caller can push it while earlier layers still compute.
//
// A model on a device (worker/gpu_model.h) computes on its own copy of the weights: the
// caller calls LoadParams() after writing params() (the client writes them in Start,
// BeginStep, Wait and Rejoin) and before the next TrainStep or CountCorrect. A device fault
// cannot be returned by TrainStep or CountCorrect: their result is then meaningless and
// status() holds the error. Host models need neither (both are OK).
//
// Thread safety: one call at a time; callbacks run on the calling thread, and the caller
// must not write params() until TrainStep returns (backward still reads the weights).
#ifndef TAMP_WORKER_MODEL_H_
#define TAMP_WORKER_MODEL_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tamp {

class Model {
 public:
  virtual ~Model() = default;

  virtual absl::Span<float> params() = 0;
  virtual absl::Span<const float> grads() const = 0;

  // x: batch * 784 normalised pixels; labels: batch values in [0, 10). Returns the mean loss.
  virtual float TrainStep(const float* x, const uint8_t* labels, int batch,
                          const std::function<void(int tensor)>& on_tensor_ready) = 0;

  // Forward only: how many of the batch are classified correctly (argmax).
  virtual int64_t CountCorrect(const float* x, const uint8_t* labels, int batch) = 0;

  // Makes the next TrainStep/CountCorrect compute with what params() holds now.
  virtual absl::Status LoadParams() { return absl::OkStatus(); }

  // OK, or the first error of a TrainStep, CountCorrect or LoadParams (it sticks).
  virtual absl::Status status() const { return absl::OkStatus(); }
};

}  // namespace tamp

#endif  // TAMP_WORKER_MODEL_H_
