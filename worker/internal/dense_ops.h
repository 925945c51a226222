// Fully connected layers and softmax cross-entropy on the CPU (OpenBLAS), shared by the MLP
// and the CNN's classifier head. Row-major throughout: activations [B, n], weights
// [n_out, n_in] as in ModelTensors.
#ifndef TAMP_WORKER_INTERNAL_DENSE_OPS_H_
#define TAMP_WORKER_INTERNAL_DENSE_OPS_H_

#include <cstddef>
#include <cstdint>

namespace tamp::internal {

// z [B, n_out] = a [B, n_in] W^T + b, then ReLU in place when `relu`.
void DenseForward(const float* a, const float* w, const float* b, int batch, int n_in, int n_out,
                  bool relu, float* z);

// Overwrites logits [B, 10] with d(mean loss)/d(logits) = (softmax - onehot) / B and returns
// the summed (not mean) loss. Stable: subtracts each row's max. CHECKs labels < 10.
double SoftmaxCrossEntropyBackward(float* logits, const uint8_t* labels, int batch);

// db [n_out] = sum over the batch of dz [B, n_out].
void DenseBiasGrad(const float* dz, int batch, int n_out, float* db);

// dW [n_out, n_in] = dz^T a.
void DenseWeightGrad(const float* dz, const float* a, int batch, int n_in, int n_out, float* dw);

// da [B, n_in] = dz W.
void DenseInputGrad(const float* dz, const float* w, int batch, int n_in, int n_out, float* da);

// ReLU backward over the activations: a[k] = a[k] > 0 ? da[k] : 0 for k < n (a holds the
// ReLU's output on entry and the gradient of its input on exit). da and a do not overlap.
void ReluBackwardInPlace(const float* da, size_t n, float* a);

}  // namespace tamp::internal

#endif  // TAMP_WORKER_INTERNAL_DENSE_OPS_H_
