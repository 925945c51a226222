#include "worker/internal/dense_stack.h"

#include <algorithm>
#include <utility>

#include "glog/logging.h"
#include "worker/internal/dense_ops.h"

namespace tamp::internal {

DenseStack::DenseStack(std::vector<int> widths, int first_tensor,
                       const std::vector<size_t>& tensor_offsets, int max_batch,
                       Position position)
    : widths_(std::move(widths)), first_tensor_(first_tensor), position_(position) {
  CHECK_GE(num_layers(), 1);
  CHECK_GE(max_batch, 1);
  const size_t batch = static_cast<size_t>(max_batch);
  activations_.resize(widths_.size());
  if (position_ == Position::kHead) activations_[0].resize(batch * widths_[0]);
  int widest_input_grad = 0;
  for (int l = 1; l <= num_layers(); ++l) {
    weight_offsets_.push_back(tensor_offsets.at(weight_index(l)));
    bias_offsets_.push_back(tensor_offsets.at(bias_index(l)));
    activations_[l].resize(batch * widths_[l]);
    if (l > 1 || position_ == Position::kHead) {
      widest_input_grad = std::max(widest_input_grad, widths_[l - 1]);
    }
  }
  scratch_.resize(batch * widest_input_grad);
}

const float* DenseStack::Input(const float* input) const {
  if (position_ == Position::kHead) {
    CHECK(input == nullptr) << "a head reads its own input buffer";
    return activations_[0].data();
  }
  CHECK(input != nullptr);
  return input;
}

void DenseStack::Forward(const float* input, const float* params, int batch) {
  CHECK_GE(batch, 1);
  CHECK_LE(static_cast<size_t>(batch) * widths_.back(), activations_.back().size());
  for (int l = 1; l <= num_layers(); ++l) {
    const float* in = l == 1 ? Input(input) : activations_[l - 1].data();  // [B, w_{l-1}]
    DenseForward(in, params + weight_offsets_[l - 1], params + bias_offsets_[l - 1], batch,
                 widths_[l - 1], widths_[l], /*relu=*/l < num_layers(), activations_[l].data());
  }
}

double DenseStack::Backward(const float* input, const uint8_t* labels, const float* params,
                            int batch, float* grads,
                            const std::function<void(int)>& on_tensor_ready) {
  const int last = num_layers();
  // dloss/dz_L = (softmax - onehot) / B, written over the logits.
  const double loss_sum = SoftmaxCrossEntropyBackward(activations_[last].data(), labels, batch);
  // On entry to layer l, activations_[l] holds dz_l.
  for (int l = last; l >= 1; --l) {
    const int n_in = widths_[l - 1];
    const int n_out = widths_[l];
    const float* dz = activations_[l].data();                             // [B, n_out]
    const float* in = l == 1 ? Input(input) : activations_[l - 1].data();  // [B, n_in]
    DenseBiasGrad(dz, batch, n_out, grads + bias_offsets_[l - 1]);
    if (on_tensor_ready) on_tensor_ready(bias_index(l));
    DenseWeightGrad(dz, in, batch, n_in, n_out, grads + weight_offsets_[l - 1]);
    if (on_tensor_ready) on_tensor_ready(weight_index(l));

    if (l == 1 && position_ == Position::kWholeModel) break;  // No gradient for the input.
    // da_{l-1} = dz_l W_l; for l > 1 masked by relu'(a_{l-1}) into activations_[l-1].
    DenseInputGrad(dz, params + weight_offsets_[l - 1], batch, n_in, n_out, scratch_.data());
    if (l == 1) break;
    ReluBackwardInPlace(scratch_.data(), static_cast<size_t>(batch) * n_in,
                        activations_[l - 1].data());
  }
  return loss_sum;
}

int64_t DenseStack::CountCorrect(const uint8_t* labels, int batch) const {
  const int classes = widths_.back();
  int64_t correct = 0;
  for (int i = 0; i < batch; ++i) {
    const float* z = activations_.back().data() + static_cast<size_t>(i) * classes;
    const int64_t predicted = std::max_element(z, z + classes) - z;
    if (predicted == labels[i]) ++correct;
  }
  return correct;
}

}  // namespace tamp::internal
