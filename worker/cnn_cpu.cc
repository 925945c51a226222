#include "worker/cnn_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "glog/logging.h"
#include "kernels/cnn_ref.h"
#include "worker/internal/dense_stack.h"
#include "worker/internal/tensor_checks.h"

namespace tamp {

using internal::BadTensor;
using internal::ValidWidth;

absl::StatusOr<std::unique_ptr<CnnCpu>> CnnCpu::Create(std::vector<TensorSpec> tensors,
                                                       int max_batch) {
  if (max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch must be >= 1, got ", max_batch));
  }
  if (tensors.empty() || tensors.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a CNN needs (weight, bias) tensor pairs, got ", tensors.size(), " tensors"));
  }
  const int num_tensors = static_cast<int>(tensors.size());
  int t = 0;
  int64_t channels = 1;
  int64_t side = kImageSide;
  for (; t < num_tensors && tensors[t].shape.size() == 4; t += 2) {
    const TensorSpec& weight = tensors[t];
    const TensorSpec& bias = tensors[t + 1];
    const std::vector<int64_t>& s = weight.shape;
    if (weight.is_bias || s[1] != channels || s[2] != s[3] || s[2] % 2 == 0 || s[2] < 1 ||
        s[2] > 2 * kImageSide || !ValidWidth(s[0]) || s[0] > 65536) {
      return BadTensor(t, weight,
                       absl::StrCat("a conv weight of shape [out, ", channels, ", k, k], k odd"));
    }
    if (side < 2) {
      return BadTensor(t, weight, absl::StrCat("no conv layer on a ", side, "x", side,
                                               " input (2x2 pooling needs at least 2x2)"));
    }
    if (!bias.is_bias || bias.shape != std::vector<int64_t>{s[0]}) {
      return BadTensor(t + 1, bias, absl::StrCat("a bias of shape [", s[0], "]"));
    }
    channels = s[0];
    side /= 2;
  }
  const int num_conv = t / 2;
  if (num_conv == 0) {
    return BadTensor(0, tensors[0], "a conv weight of shape [out, 1, k, k] first");
  }
  if (num_tensors == 2 * num_conv) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a CNN needs fully connected layers after its ", num_conv, " conv layers"));
  }
  TAMP_RETURN_IF_ERROR(
      internal::CheckDenseChain(tensors, t, channels * side * side, "an fc weight"));
  return std::unique_ptr<CnnCpu>(new CnnCpu(std::move(tensors), max_batch, num_conv));
}

CnnCpu::CnnCpu(std::vector<TensorSpec> tensors, int max_batch, int num_conv)
    : tensors_(std::move(tensors)), max_batch_(max_batch) {
  size_t total = 0;
  for (const TensorSpec& spec : tensors_) {
    offsets_.push_back(total);
    total += spec.elements();
  }
  params_.assign(total, 0.0f);
  grads_.assign(total, 0.0f);

  const size_t batch = static_cast<size_t>(max_batch_);
  int side = kImageSide;
  conv_.resize(num_conv);
  for (int i = 0; i < num_conv; ++i) {
    ConvLayer& layer = conv_[i];
    const TensorSpec& weight = tensors_[2 * i];
    layer.out_channels = static_cast<int>(weight.shape[0]);
    layer.in_channels = static_cast<int>(weight.shape[1]);
    layer.kernel = static_cast<int>(weight.shape[2]);
    layer.side = side;
    layer.weight = 2 * i;
    layer.bias = 2 * i + 1;
    const size_t plane = static_cast<size_t>(side) * side;
    const size_t pooled_plane = static_cast<size_t>(side / 2) * (side / 2);
    layer.columns.resize(static_cast<size_t>(layer.in_channels) * layer.kernel * layer.kernel *
                         batch * plane);
    layer.z.resize(layer.out_channels * batch * plane);
    layer.pooled.resize(layer.out_channels * batch * pooled_plane);
    layer.argmax.resize(layer.pooled.size());
    side /= 2;
  }

  std::vector<int> widths = {conv_.back().out_channels * side * side};
  for (size_t t = 2 * num_conv; t < tensors_.size(); t += 2) {
    widths.push_back(static_cast<int>(tensors_[t].shape[0]));
  }
  classifier_ = std::make_unique<internal::DenseStack>(
      std::move(widths), /*first_tensor=*/2 * num_conv, offsets_, max_batch_,
      internal::DenseStack::Position::kHead);
}

CnnCpu::~CnnCpu() = default;

void CnnCpu::Forward(const float* x, int batch) {
  CHECK_GE(batch, 1);
  CHECK_LE(batch, max_batch_);
  // Conv blocks. x [batch, 1, 28, 28] is already [1, batch, 28, 28].
  const float* in = x;
  for (ConvLayer& layer : conv_) {
    // z = W * im2col(in), then relu(z + bias) per channel, then the pool.
    const float* w = params_.data() + offsets_[layer.weight];
    const float* b = params_.data() + offsets_[layer.bias];
    kernels::ref::ConvForward(in, w, layer.in_channels, layer.out_channels, batch, layer.side,
                              layer.kernel, layer.columns.data(), layer.z.data());
    kernels::ref::ConvBiasRelu(layer.z.data(), b, layer.out_channels,
                               static_cast<size_t>(batch) * layer.side * layer.side);
    kernels::ref::MaxPool2x2Forward(layer.z.data(), layer.out_channels * batch, layer.side,
                                    layer.pooled.data(), layer.argmax.data());
    in = layer.pooled.data();
  }

  // Flatten [c, batch, s, s] to [batch, c * s * s], (c, y, x) within an example.
  const ConvLayer& last = conv_.back();
  kernels::ref::FlattenChannelMajor(last.pooled.data(), last.out_channels, batch,
                                    static_cast<size_t>(last.side / 2) * (last.side / 2),
                                    classifier_->input_buffer());
  classifier_->Forward(/*input=*/nullptr, params_.data(), batch);
}

float CnnCpu::TrainStep(const float* x, const uint8_t* labels, int batch,
                        const std::function<void(int)>& on_tensor_ready) {
  Forward(x, batch);
  const double loss_sum = classifier_->Backward(/*input=*/nullptr, labels, params_.data(), batch,
                                                grads_.data(), on_tensor_ready);

  // Unflatten dloss/df [batch, c * s * s] into the last pool's [c, batch, s, s].
  {
    ConvLayer& layer = conv_.back();
    kernels::ref::UnflattenChannelMajor(classifier_->input_grad(), layer.out_channels, batch,
                                        static_cast<size_t>(layer.side / 2) * (layer.side / 2),
                                        layer.pooled.data());
  }

  // Conv backward, last layer first. On entry to layer i, its `pooled` holds dloss/d(pooled).
  for (int i = num_conv() - 1; i >= 0; --i) {
    ConvLayer& layer = conv_[i];
    const size_t n = static_cast<size_t>(batch) * layer.side * layer.side;
    float* dz = layer.z.data();  // [out, n]
    kernels::ref::MaxPoolReluBackward(layer.pooled.data(), layer.argmax.data(),
                                      layer.out_channels * batch, layer.side, dz);

    kernels::ref::ConvBiasGrad(dz, layer.out_channels, n, grads_.data() + offsets_[layer.bias]);
    if (on_tensor_ready) on_tensor_ready(layer.bias);

    kernels::ref::ConvBackwardWeights(dz, layer.columns.data(), layer.in_channels,
                                      layer.out_channels, batch, layer.side, layer.kernel,
                                      grads_.data() + offsets_[layer.weight]);
    if (on_tensor_ready) on_tensor_ready(layer.weight);

    if (i == 0) break;  // No gradient for the input.
    // Over the columns (no longer needed), then onto the previous layer's pooled output.
    kernels::ref::ConvBackwardData(params_.data() + offsets_[layer.weight], dz, layer.in_channels,
                                   layer.out_channels, batch, layer.side, layer.kernel,
                                   layer.columns.data(), conv_[i - 1].pooled.data());
  }
  return static_cast<float>(loss_sum / batch);
}

int64_t CnnCpu::CountCorrect(const float* x, const uint8_t* labels, int batch) {
  Forward(x, batch);
  return classifier_->CountCorrect(labels, batch);
}

}  // namespace tamp
