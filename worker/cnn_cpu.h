// CnnCpu: the CNN of job/model_layout.h on the CPU, with OpenBLAS sgemm.
//
// Model (n conv layers with channels c_1 .. c_n, c_0 = 1, square odd kernels; then L fully
// connected layers with widths w_0 = c_n * s_n^2, w_1 .. w_{L-1} hidden, w_L = 10), for a
// batch of B:
//   a_0 = x                                        [c_0, B, s_0, s_0]    s_0 = 28
//   z_i = conv_i(a_{i-1}) + bias_i                 [c_i, B, s_{i-1}, s_{i-1}]  'same' padding
//   a_i = maxpool2x2(relu(z_i))                    [c_i, B, s_i, s_i]    s_i = floor(s_{i-1}/2)
//   f   = a_n flattened per example as (c, y, x)   [B, w_0]
//   then the MLP of worker/mlp_cpu.h from f: fc layers, ReLU between, softmax cross-entropy
//   loss = mean_i( logsumexp(logits[i]) - logits[i, label_i] ).
// Activations are kept channel-major ([channels, batch, side, side], kernels/cnn_ref.h)
// so that each convolution is one im2col and one sgemm over the whole batch.
//
// Parameters and gradients each live in one flat fp32 buffer: the tensors in ModelTensors
// order (conv1.weight, conv1.bias, ..., fc1.weight, fc1.bias, ...), concatenated. Element o
// of tensor t is params()[tensor_offset(t) + o].
//
// Buffers for max_batch examples (im2col columns, activations, pool argmax) are allocated
// once in Create; a step allocates nothing. sgemm runs on OpenBLAS's own threads; the caller
// picks their number (openblas_set_num_threads).
//
// Thread safety: not thread-safe; one TrainStep or CountCorrect at a time. During TrainStep,
// on_tensor_ready runs on the calling thread, and the caller must not write params() until
// TrainStep returns (backward still reads the weights).
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto tensors, ModelTensors(config.model()));  // kind: CNN
//   TAMP_ASSIGN_OR_RETURN(auto cnn, CnnCpu::Create(tensors, /*max_batch=*/64));
//   ... fill cnn->params() ...
//   float loss = cnn->TrainStep(x, labels, 64, [&](int t) { PushTensor(t); });
#ifndef TAMP_WORKER_CNN_CPU_H_
#define TAMP_WORKER_CNN_CPU_H_

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

class CnnCpu final : public Model {
 public:
  // CnnCpu::Create()
  //
  // `tensors` must be a CNN as ModelTensors lays it out: one or more conv pairs (weight
  // [out, in, k, k] with odd k, bias [out]), the first in == 1, each in == the previous out,
  // each conv's input at least 2x2; then an fc chain as MlpCpu::Create wants, whose first in
  // is the last pool's c * s * s and whose last out is 10. is_bias is set on biases only.
  // INVALID_ARGUMENT, naming the tensor, otherwise, or when max_batch < 1. Parameters start
  // at zero.
  static absl::StatusOr<std::unique_ptr<CnnCpu>> Create(std::vector<TensorSpec> tensors,
                                                        int max_batch);

  ~CnnCpu() override;
  CnnCpu(const CnnCpu&) = delete;
  CnnCpu& operator=(const CnnCpu&) = delete;

  // All parameters, tensors concatenated in ModelTensors order.
  absl::Span<float> params() override { return absl::MakeSpan(params_); }
  // Gradients of the last TrainStep, laid out like params().
  absl::Span<const float> grads() const override { return absl::MakeConstSpan(grads_); }

  // First element of tensor `t` in params() and grads().
  size_t tensor_offset(int t) const { return offsets_[t]; }
  const std::vector<TensorSpec>& tensors() const { return tensors_; }

  // CnnCpu::TrainStep()
  //
  // Forward and backward on `batch` examples (x: [batch, 784] floats, labels: [batch], each
  // in [0, 10)). Overwrites grads() with d(mean loss)/d(params) and returns the mean loss.
  //
  // Backward runs last layer first (fc layers, then conv layers). As soon as a layer's bias
  // gradient is complete it calls on_tensor_ready(bias index), then, once the weight
  // gradient is, on_tensor_ready(weight index): every tensor exactly once, in strictly
  // decreasing index order. A tensor's gradient is final when its call comes, so the caller
  // may push it while earlier layers compute. on_tensor_ready may be empty.
  //
  // 1 <= batch <= max_batch is checked (CHECK).
  float TrainStep(const float* x, const uint8_t* labels, int batch,
                  const std::function<void(int)>& on_tensor_ready) override;

  // CnnCpu::CountCorrect()
  //
  // Forward only: how many of the `batch` examples have argmax(logits) == label (the lowest
  // index wins ties). Same shapes and batch bounds as TrainStep.
  int64_t CountCorrect(const float* x, const uint8_t* labels, int batch) override;

 private:
  // One conv -> relu -> 2x2 max-pool block and its buffers for max_batch examples, used
  // compactly ([channels, batch, ...]) for a smaller batch.
  struct ConvLayer {
    int in_channels = 0;
    int out_channels = 0;
    int kernel = 0;
    int side = 0;  // Of the input and of z; the pooled output is side / 2.
    int weight = 0;  // Tensor indices.
    int bias = 0;
    // [in * k * k, B * side^2]: im2col of the input; backward overwrites it with dloss/dcols.
    std::vector<float> columns;
    // [out, B, side, side]: relu(z) after forward; backward overwrites it with dloss/dz.
    std::vector<float> z;
    // [out, B, side/2, side/2]: the pooled output, the next layer's input; backward
    // overwrites it with dloss/d(pooled).
    std::vector<float> pooled;
    std::vector<uint8_t> argmax;  // Like pooled: the winner of each 2x2 window.
  };

  CnnCpu(std::vector<TensorSpec> tensors, int max_batch, int num_conv);

  int num_conv() const { return static_cast<int>(conv_.size()); }

  // Runs forward to the logits (left in classifier_).
  void Forward(const float* x, int batch);

  std::vector<TensorSpec> tensors_;
  std::vector<size_t> offsets_;  // Per tensor, into params_ and grads_.
  int max_batch_;
  std::vector<float> params_;
  std::vector<float> grads_;
  std::vector<ConvLayer> conv_;
  // The fully connected layers (kHead): their input buffer holds the flattened last pool.
  std::unique_ptr<internal::DenseStack> classifier_;
};

}  // namespace tamp

#endif  // TAMP_WORKER_CNN_CPU_H_
