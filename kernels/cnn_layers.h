// The layers of the CNN (worker/cnn_cpu.h) on the GPU: convolution as im2col and a cuBLAS
// GEMM, 2x2 max-pool, and the pieces between them. kernels/layers.h has the fully connected
// layers and the loss.
//
// Shapes and layouts are those of the CPU twins, kernels/cnn_ref.h: activations
// [channels, batch, side, side] fp32 in device memory, conv weights [out, in, k, k] (row major:
// [out, in * k * k]), 'same' convolutions (odd k, stride 1), n = batch * side^2:
//   ConvForward          columns = im2col(x);  z[out, n] = W columns               (=)
//   ConvBackwardWeights  dW[out, in k k] = dz columns^T                             (=)
//   ConvBackwardData     dx[in, B, s, s] = col2im(W^T dz)   (columns: scratch)      (=)
//   ConvBiasRelu         z = max(z + b[c], 0)                                       (in place)
//   ConvBiasGrad         db[c] = sum_j dz[c, j]                                     (=)
//   MaxPool2x2Forward    out, argmax (2x2, stride 2; an odd side drops a row/column) (=)
//   MaxPoolReluBackward  a (= relu(z) on entry) becomes dloss/dz                    (in place)
//   FlattenChannelMajor / UnflattenChannelMajor   [C, B, plane] <-> [B, C * plane]  (=)
//
// Every function checks its shapes (INVALID_ARGUMENT naming the argument) and every CUDA and
// cuBLAS call (kernels/cuda_check.h), and only enqueues work on `stream`: it returns before
// the GPU has run it, and errors raised while running surface at the next synchronising
// call. Buffers must stay alive until then. Not thread-safe per CublasHandle.
//
// Precision: the GEMMs run in plain fp32 (CublasHandle: no TF32) and match the CPU twins
// within summation-order error; ConvBiasGrad within one ulp of the twin's double sum; the
// rest bit for bit (kernels/cnn_layers_test.cc).
//
// Example (one conv block, forward):
//   TAMP_RETURN_IF_ERROR(kernels::ConvForward(cublas, x, w, 1, 32, batch, 28, 5, cols, z, s));
//   TAMP_RETURN_IF_ERROR(kernels::ConvBiasRelu(z, b, 32, size_t{batch} * 28 * 28, s));
//   TAMP_RETURN_IF_ERROR(kernels::MaxPool2x2Forward(z, 32 * batch, 28, pooled, argmax, s));
#ifndef TAMP_KERNELS_CNN_LAYERS_H_
#define TAMP_KERNELS_CNN_LAYERS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/layers.h"

namespace tamp::kernels {

// ConvForward()
//
// columns [in * k * k, n] = im2col(x [in, batch, side, side]); z [out, n] = W columns.
absl::Status ConvForward(CublasHandle& cublas, const float* x, const float* w, int in_channels,
                         int out_channels, int batch, int side, int kernel, float* columns,
                         float* z, cudaStream_t stream);

// ConvBackwardWeights()
//
// dW [out, in * k * k] = dz [out, n] columns^T, columns as ConvForward left them.
absl::Status ConvBackwardWeights(CublasHandle& cublas, const float* dz, const float* columns,
                                 int in_channels, int out_channels, int batch, int side,
                                 int kernel, float* dw, cudaStream_t stream);

// ConvBackwardData()
//
// dx [in, batch, side, side] = col2im(W^T dz); `columns` [in * k * k, n] is overwritten.
absl::Status ConvBackwardData(CublasHandle& cublas, const float* w, const float* dz,
                              int in_channels, int out_channels, int batch, int side, int kernel,
                              float* columns, float* dx, cudaStream_t stream);

// Im2Col(), Col2Im()
//
// The two halves of the convolutions above, on their own (kernels/cnn_ref.h).
absl::Status Im2Col(const float* in, int channels, int batch, int side, int kernel, float* col,
                    cudaStream_t stream);
absl::Status Col2Im(const float* col, int channels, int batch, int side, int kernel, float* in,
                    cudaStream_t stream);

// ConvBiasRelu()
//
// z[c][j] = max(z[c][j] + bias[c], 0) for z [channels, n], in place.
absl::Status ConvBiasRelu(float* z, const float* bias, int channels, size_t n,
                          cudaStream_t stream);

// ConvBiasGrad()
//
// db[c] = sum_j dz[c][j] for dz [channels, n], summed in double. Deterministic.
absl::Status ConvBiasGrad(const float* dz, int channels, size_t n, float* db,
                          cudaStream_t stream);

// MaxPool2x2Forward()
//
// in [planes, side, side] -> out, argmax [planes, side / 2, side / 2]; side >= 2.
absl::Status MaxPool2x2Forward(const float* in, int planes, int side, float* out,
                               uint8_t* argmax, cudaStream_t stream);

// MaxPoolReluBackward()
//
// a [planes, side, side] holds relu(z) on entry and dloss/dz on return; dout and argmax are
// [planes, side / 2, side / 2].
absl::Status MaxPoolReluBackward(const float* dout, const uint8_t* argmax, int planes, int side,
                                 float* a, cudaStream_t stream);

// FlattenChannelMajor(), UnflattenChannelMajor()
//
// [channels, batch, plane] -> [batch, channels * plane], and back. in and out do not overlap.
absl::Status FlattenChannelMajor(const float* in, int channels, int batch, size_t plane,
                                 float* out, cudaStream_t stream);
absl::Status UnflattenChannelMajor(const float* in, int channels, int batch, size_t plane,
                                   float* out, cudaStream_t stream);

}  // namespace tamp::kernels

#endif  // TAMP_KERNELS_CNN_LAYERS_H_
