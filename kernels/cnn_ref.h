// The CNN's layers on the CPU: what worker/cnn_cpu.h is built from, and the CPU twins of
// kernels/cnn_layers.h (the same contracts on host memory; kernels/cnn_layers_test.cc
// compares the two). Plain C++ and OpenBLAS, built with or without CUDA.
//
// Activations are laid out [channels, batch, side, side] ("CNHW"): channel-major, so that one
// sgemm convolves the whole batch (weights [out, in * k * k] times columns
// [in * k * k, batch * side * side] gives the next [out, batch, side, side]), and each
// (channel, example) pair is one contiguous side x side plane. A [batch, 1, 28, 28] input is
// already in this layout. Convolutions are 'same' (odd kernel k, padding k / 2, stride 1).
//
// Contracts: every function overwrites its outputs (nothing accumulates into them) and
// allocates nothing. Pointers must not alias unless stated.
#ifndef TAMP_KERNELS_CNN_REF_H_
#define TAMP_KERNELS_CNN_REF_H_

#include <cstddef>
#include <cstdint>

namespace tamp::kernels::ref {

// Im2Col()
//
// The columns of a 'same' convolution (odd `kernel`, padding kernel / 2, stride 1):
//   col[(c * kernel + ky) * kernel + kx][(b * side + y) * side + x]
//     = in[c][b][y + ky - pad][x + kx - pad], 0 outside the image.
// in: [channels, batch, side, side]; col: [channels * kernel * kernel, batch * side * side].
void Im2Col(const float* in, int channels, int batch, int side, int kernel, float* col);

// Col2Im()
//
// The adjoint of Im2Col: in[c][b][iy][ix] = the sum of every col entry Im2Col would have
// copied from in[c][b][iy][ix], added in increasing (ky, kx) order. Turns d(loss)/d(columns)
// into d(loss)/d(input).
void Col2Im(const float* col, int channels, int batch, int side, int kernel, float* in);

// ConvForward()
//
// z [out, batch * side^2] = W [out, in * k * k] x Im2Col(x), leaving Im2Col(x) in `columns`
// ([in * k * k, batch * side^2]) for the backward pass. No bias (ConvBiasRelu adds it).
void ConvForward(const float* x, const float* w, int in_channels, int out_channels, int batch,
                 int side, int kernel, float* columns, float* z);

// ConvBackwardWeights()
//
// dW [out, in * k * k] = dz [out, batch * side^2] x columns^T, columns as ConvForward left them.
void ConvBackwardWeights(const float* dz, const float* columns, int in_channels, int out_channels,
                         int batch, int side, int kernel, float* dw);

// ConvBackwardData()
//
// dx [in, batch, side, side] = Col2Im(W^T x dz): the gradient of the convolution's input.
// `columns` ([in * k * k, batch * side^2]) is scratch, overwritten.
void ConvBackwardData(const float* w, const float* dz, int in_channels, int out_channels,
                      int batch, int side, int kernel, float* columns, float* dx);

// ConvBiasRelu()
//
// z[c][j] = std::max(z[c][j] + bias[c], 0.0f) for z [channels, n], in place.
void ConvBiasRelu(float* z, const float* bias, int channels, size_t n);

// ConvBiasGrad()
//
// db[c] = sum_j dz[c][j] for dz [channels, n], summed in double (n is up to batch * 784
// terms), then rounded to float once.
void ConvBiasGrad(const float* dz, int channels, size_t n, float* db);

// MaxPool2x2Forward()
//
// 2x2 max-pool with stride 2 over `planes` side x side planes (in: [planes, side, side],
// out: [planes, side / 2, side / 2]). An odd side drops the last row and column. argmax
// (same shape as out) records which of the window's four inputs won, as dy * 2 + dx; the
// first in that order wins ties (a later input wins only if it is greater: NaN never does).
void MaxPool2x2Forward(const float* in, int planes, int side, float* out, uint8_t* argmax);

// MaxPoolReluBackward()
//
// Backward of a = relu(z) then p = maxpool(a), in place: on entry `a` holds relu(z) (the
// pool's forward input), on return dloss/dz. The gradient dout of each pooled value goes to
// its argmax input only, and only where a > 0 (relu'(z) = [z > 0]); every other entry,
// including a dropped last row or column, becomes 0.
// a: [planes, side, side]; dout and argmax: [planes, side / 2, side / 2].
void MaxPoolReluBackward(const float* dout, const uint8_t* argmax, int planes, int side,
                         float* a);

// FlattenChannelMajor()
//
// [channels, batch, plane] -> [batch, channels * plane]: each example's features in
// (channel, position) order, as the fc layers read them.
void FlattenChannelMajor(const float* in, int channels, int batch, size_t plane, float* out);

// UnflattenChannelMajor()
//
// The inverse: [batch, channels * plane] -> [channels, batch, plane].
void UnflattenChannelMajor(const float* in, int channels, int batch, size_t plane, float* out);

}  // namespace tamp::kernels::ref

#endif  // TAMP_KERNELS_CNN_REF_H_
