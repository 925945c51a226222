// MlpCpu: the MLP of job/model_layout.h on the CPU, with OpenBLAS sgemm.
//
// Model (L layers, widths w_0 = 784, w_1 .. w_{L-1} hidden, w_L = 10), for a batch of B:
//   a_0 = x                                   [B, w_0]
//   z_l = a_{l-1} W_l^T + b_l                 [B, w_l]    W_l [w_l, w_{l-1}], b_l [w_l]
//   a_l = relu(z_l)               l < L
//   loss = mean_i( logsumexp(z_L[i]) - z_L[i, label_i] )   softmax cross-entropy
//
// Parameters and gradients each live in one flat fp32 buffer: the tensors in ModelTensors
// order (fc1.weight, fc1.bias, fc2.weight, ...), concatenated. Element o of tensor t is
// params()[tensor_offset(t) + o], so a chunk is params().subspan(tensor_offset(t) + o, len).
//
// Activations for max_batch examples are allocated once in Create; a step allocates nothing.
// sgemm runs on OpenBLAS's own threads; the caller picks their number
// (openblas_set_num_threads).
//
// Thread safety: not thread-safe; one TrainStep or CountCorrect at a time. During TrainStep,
// on_tensor_ready runs on the calling thread, and the caller must not write params() until
// TrainStep returns (backward still reads the weights).
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto tensors, ModelTensors(config.model()));
//   TAMP_ASSIGN_OR_RETURN(auto mlp, MlpCpu::Create(tensors, /*max_batch=*/64));
//   ... fill mlp->params() ...
//   float loss = mlp->TrainStep(x, labels, 64, [&](int t) { PushTensor(t); });
#ifndef TAMP_WORKER_MLP_CPU_H_
#define TAMP_WORKER_MLP_CPU_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "job/model_layout.h"
#include "worker/model.h"

namespace tamp {

namespace internal {
class DenseStack;
}  // namespace internal

class MlpCpu final : public Model {
 public:
  // MlpCpu::Create()
  //
  // `tensors` must form an MLP chain: pairs (weight [out, in], bias [out]) with is_bias set
  // on biases only, the first in == 784 (kImageSize), each in == the previous out, the last
  // out == 10 (kNumClasses). INVALID_ARGUMENT, naming the tensor, otherwise, or when
  // max_batch < 1. Parameters start at zero.
  static absl::StatusOr<std::unique_ptr<MlpCpu>> Create(std::vector<TensorSpec> tensors,
                                                        int max_batch);

  ~MlpCpu() override;
  MlpCpu(const MlpCpu&) = delete;
  MlpCpu& operator=(const MlpCpu&) = delete;

  // All parameters, tensors concatenated in ModelTensors order.
  absl::Span<float> params() override { return absl::MakeSpan(params_); }
  // Gradients of the last TrainStep, laid out like params().
  absl::Span<const float> grads() const override { return absl::MakeConstSpan(grads_); }

  // First element of tensor `t` in params() and grads().
  size_t tensor_offset(int t) const { return offsets_[t]; }
  const std::vector<TensorSpec>& tensors() const { return tensors_; }

  // MlpCpu::TrainStep()
  //
  // Forward and backward on `batch` examples (x: [batch, 784] floats, labels: [batch], each
  // in [0, 10)). Overwrites grads() with d(mean loss)/d(params) and returns the mean loss.
  //
  // Backward runs last layer first. As soon as a layer's bias gradient is complete it calls
  // on_tensor_ready(bias index), then, once the weight gradient is, on_tensor_ready(weight
  // index): every tensor exactly once, in strictly decreasing index order. A tensor's
  // gradient is final when its call comes and is not written again during this step, so the
  // caller may push it while earlier layers compute. on_tensor_ready may be empty.
  //
  // 1 <= batch <= max_batch is checked (CHECK).
  float TrainStep(const float* x, const uint8_t* labels, int batch,
                  const std::function<void(int)>& on_tensor_ready) override;

  // MlpCpu::CountCorrect()
  //
  // Forward only: how many of the `batch` examples have argmax(logits) == label (the lowest
  // index wins ties). Same shapes and batch bounds as TrainStep.
  int64_t CountCorrect(const float* x, const uint8_t* labels, int batch) override;

 private:
  MlpCpu(std::vector<TensorSpec> tensors, int max_batch);

  // The logits of x, left in layers_.
  void Forward(const float* x, int batch);

  std::vector<TensorSpec> tensors_;
  std::vector<size_t> offsets_;   // Per tensor, into params_ and grads_.
  int max_batch_;
  std::vector<float> params_;
  std::vector<float> grads_;
  std::unique_ptr<internal::DenseStack> layers_;  // All of the model (kWholeModel).
};

}  // namespace tamp

#endif  // TAMP_WORKER_MLP_CPU_H_
