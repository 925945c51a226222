// CPU twins of kernels/layers.h: the same contracts on host memory, with the math of
// worker/mlp_cpu.cc (OpenBLAS sgemm with the same arguments, the same loops). Plain C++,
// built with or without CUDA; kernels/layers_test.cc compares the GPU against these.
// The SGD step's twin is optim/sgd.cc itself (Sgd::Apply).
#ifndef TAMP_KERNELS_LAYERS_REF_H_
#define TAMP_KERNELS_LAYERS_REF_H_

#include <cstddef>
#include <cstdint>

namespace tamp::kernels::ref {

// y[B, O] = x[B, I] W[O, I]^T + b[O] (b may be null).
void LinearForward(const float* x, const float* w, const float* b, float* y, int batch, int in,
                   int out);

// dx[B, I] = dy[B, O] W[O, I].
void LinearBackwardInput(const float* dy, const float* w, float* dx, int batch, int in, int out);

// dW[O, I] (+)= dy^T x; db[O] (+)= sum_B dy (db may be null).
void LinearBackwardParams(const float* x, const float* dy, float* dw, float* db, int batch, int in,
                          int out, bool accumulate);

// y[r, c] += b[c].
void BiasAdd(float* y, const float* b, int rows, int cols);

// db[c] (+)= sum_r dy[r, c].
void BiasGrad(const float* dy, float* db, int rows, int cols, bool accumulate);

// a = std::max(z, 0.0f).
void ReluForward(const float* z, float* a, size_t n);

// dz = a > 0 ? da : 0.
void ReluBackward(const float* a, const float* da, float* dz, size_t n);

// As kernels::SoftmaxCrossEntropy (mlp_cpu.cc's loss and gradient, per row).
void SoftmaxCrossEntropy(const float* logits, const int32_t* labels, float* losses,
                         float* dlogits, int batch, int classes);

}  // namespace tamp::kernels::ref

#endif  // TAMP_KERNELS_LAYERS_REF_H_
