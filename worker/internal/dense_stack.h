// DenseStack: the fully connected layers that end the MLP and the CNN on the CPU, with their
// softmax cross-entropy (widths w_0 .. w_L, ReLU between layers, none after the last):
//   z_l = a_{l-1} W_l^T + b_l   [B, w_l]   W_l [w_l, w_{l-1}], b_l [w_l]   l in [1, L]
//   a_l = relu(z_l), l < L; the logits are z_L.
// The weights and gradients stay the model's (its flat buffers); layer l's W_l and b_l are
// tensors first_tensor + 2(l - 1) and + 1 of it. Activations and scratch for max_batch
// examples are allocated at construction; a step allocates nothing.
//
// Where it sits decides its input: kWholeModel reads the caller's input (the MLP's images)
// and computes no gradient for it; kHead (the CNN's classifier) owns an input buffer that
// the layers before it fill, and gives its input's gradient for them to go on with.
//
// Thread safety: not thread-safe; Forward then Backward or CountCorrect, one at a time.
#ifndef TAMP_WORKER_INTERNAL_DENSE_STACK_H_
#define TAMP_WORKER_INTERNAL_DENSE_STACK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace tamp::internal {

class DenseStack {
 public:
  enum class Position { kWholeModel, kHead };

  // `widths`: w_0 .. w_L (L >= 1); `tensor_offsets`: every model tensor's first element in
  // its flat parameter and gradient buffers.
  DenseStack(std::vector<int> widths, int first_tensor, const std::vector<size_t>& tensor_offsets,
             int max_batch, Position position);

  int num_layers() const { return static_cast<int>(widths_.size()) - 1; }
  // Tensor indices of W_l and b_l, for l in [1, L].
  int weight_index(int l) const { return first_tensor_ + 2 * (l - 1); }
  int bias_index(int l) const { return weight_index(l) + 1; }

  // kHead: the input buffer [max_batch, w_0] that Forward(nullptr, ...) reads.
  float* input_buffer() { return activations_[0].data(); }

  // The logits [batch, w_L] of `input` [batch, w_0] (kHead: null reads input_buffer()).
  void Forward(const float* input, const float* params, int batch);

  // After Forward on the same input: overwrites the layers' gradients in `grads` with those
  // of the mean loss over the batch, last layer first, calling on_tensor_ready(bias index)
  // then on_tensor_ready(weight index) as each is final (on_tensor_ready may be empty).
  // Returns the summed (not mean) loss. kHead: input_grad() then holds dloss/d(input).
  double Backward(const float* input, const uint8_t* labels, const float* params, int batch,
                  float* grads, const std::function<void(int)>& on_tensor_ready);
  // kHead, after Backward: dloss/d(input) [batch, w_0], until the next call.
  const float* input_grad() const { return scratch_.data(); }

  // After Forward: how many examples have argmax(logits) == label (the lowest index wins).
  int64_t CountCorrect(const uint8_t* labels, int batch) const;

 private:
  const float* Input(const float* input) const;

  std::vector<int> widths_;
  int first_tensor_;
  std::vector<size_t> weight_offsets_;  // Of W_l at [l - 1].
  std::vector<size_t> bias_offsets_;    // Of b_l at [l - 1].
  Position position_;
  // activations_[l], l in [1, L]: [max_batch, w_l]. Forward leaves a_l in it (the logits for
  // l = L); Backward overwrites it with dloss/dz_l. [0]: kHead's input buffer, else empty.
  std::vector<std::vector<float>> activations_;
  // Backward's [max_batch, max(w_l)] over the layers whose input gets a gradient:
  // dloss/da_{l-1} before the ReLU mask (kHead: last of all, dloss/d(input)).
  std::vector<float> scratch_;
};

}  // namespace tamp::internal

#endif  // TAMP_WORKER_INTERNAL_DENSE_STACK_H_
