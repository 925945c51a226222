#include "worker/mlp_cpu.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "glog/logging.h"
#include "worker/internal/dense_ops.h"
#include "worker/internal/tensor_checks.h"

namespace tamp {

using internal::BadTensor;
using internal::ValidWidth;

absl::StatusOr<std::unique_ptr<MlpCpu>> MlpCpu::Create(std::vector<TensorSpec> tensors,
                                                       int max_batch) {
  if (max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch must be >= 1, got ", max_batch));
  }
  if (tensors.empty() || tensors.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an MLP needs (weight, bias) tensor pairs, got ", tensors.size(), " tensors"));
  }
  int64_t in = kImageSize;
  const int num_tensors = static_cast<int>(tensors.size());
  for (int t = 0; t < num_tensors; t += 2) {
    const TensorSpec& weight = tensors[t];
    const TensorSpec& bias = tensors[t + 1];
    if (weight.is_bias || weight.shape.size() != 2 || weight.shape[1] != in ||
        !ValidWidth(weight.shape[0])) {
      return BadTensor(t, weight, absl::StrCat("a weight of shape [out, ", in, "]"));
    }
    const int64_t out = weight.shape[0];
    if (!bias.is_bias || bias.shape != std::vector<int64_t>{out}) {
      return BadTensor(t + 1, bias, absl::StrCat("a bias of shape [", out, "]"));
    }
    in = out;
  }
  if (in != kNumClasses) {
    return BadTensor(num_tensors - 2, tensors[num_tensors - 2],
                     absl::StrCat("the last layer to have ", kNumClasses, " outputs"));
  }
  return std::unique_ptr<MlpCpu>(new MlpCpu(std::move(tensors), max_batch));
}

MlpCpu::MlpCpu(std::vector<TensorSpec> tensors, int max_batch)
    : tensors_(std::move(tensors)), max_batch_(max_batch) {
  size_t total = 0;
  for (const TensorSpec& spec : tensors_) {
    offsets_.push_back(total);
    total += spec.elements();
  }
  params_.assign(total, 0.0f);
  grads_.assign(total, 0.0f);

  widths_.push_back(kImageSize);
  for (size_t t = 0; t < tensors_.size(); t += 2) widths_.push_back(tensors_[t].shape[0]);
  activations_.resize(widths_.size());
  int max_hidden = 0;
  for (int l = 1; l <= num_layers(); ++l) {
    activations_[l].resize(static_cast<size_t>(max_batch_) * widths_[l]);
    if (l < num_layers()) max_hidden = std::max(max_hidden, widths_[l]);
  }
  scratch_.resize(static_cast<size_t>(max_batch_) * max_hidden);
}

void MlpCpu::Forward(const float* x, int batch) {
  CHECK_GE(batch, 1);
  CHECK_LE(batch, max_batch_);
  for (int l = 1; l <= num_layers(); ++l) {
    const int n_in = widths_[l - 1];
    const int n_out = widths_[l];
    const float* in = l == 1 ? x : activations_[l - 1].data();  // a_{l-1} [B, n_in]
    const float* w = params_.data() + offsets_[weight_index(l)];  // W_l [n_out, n_in]
    const float* b = params_.data() + offsets_[bias_index(l)];    // b_l [n_out]
    float* z = activations_[l].data();                             // z_l [B, n_out]
    internal::DenseForward(in, w, b, batch, n_in, n_out, /*relu=*/l < num_layers(), z);
  }
}

float MlpCpu::TrainStep(const float* x, const uint8_t* labels, int batch,
                        const std::function<void(int)>& on_tensor_ready) {
  Forward(x, batch);
  const int last = num_layers();

  // dloss/dz_last = (softmax - onehot) / B, written over the logits.
  const double loss_sum =
      internal::SoftmaxCrossEntropyBackward(activations_[last].data(), labels, batch);

  // Backward, last layer first. On entry to layer l, activations_[l] holds dz_l.
  for (int l = last; l >= 1; --l) {
    const int n_in = widths_[l - 1];
    const int n_out = widths_[l];
    const float* dz = activations_[l].data();                          // dz_l [B, n_out]
    const float* in = l == 1 ? x : activations_[l - 1].data();         // a_{l-1} [B, n_in]
    float* db = grads_.data() + offsets_[bias_index(l)];               // [n_out]
    float* dw = grads_.data() + offsets_[weight_index(l)];             // [n_out, n_in]

    internal::DenseBiasGrad(dz, batch, n_out, db);
    if (on_tensor_ready) on_tensor_ready(bias_index(l));
    internal::DenseWeightGrad(dz, in, batch, n_in, n_out, dw);
    if (on_tensor_ready) on_tensor_ready(weight_index(l));

    if (l == 1) break;  // No gradient for the input.
    // da_{l-1} = dz_l W_l, then dz_{l-1} = da_{l-1} * relu'(a_{l-1}), over a_{l-1}.
    const float* w = params_.data() + offsets_[weight_index(l)];
    internal::DenseInputGrad(dz, w, batch, n_in, n_out, scratch_.data());
    internal::ReluBackwardInPlace(scratch_.data(), static_cast<size_t>(batch) * n_in,
                                  activations_[l - 1].data());
  }
  return static_cast<float>(loss_sum / batch);
}

int64_t MlpCpu::CountCorrect(const float* x, const uint8_t* labels, int batch) {
  Forward(x, batch);
  int64_t correct = 0;
  for (int i = 0; i < batch; ++i) {
    const float* z = activations_[num_layers()].data() + static_cast<size_t>(i) * kNumClasses;
    const int64_t predicted = std::max_element(z, z + kNumClasses) - z;
    if (predicted == labels[i]) ++correct;
  }
  return correct;
}

}  // namespace tamp
