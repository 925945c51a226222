// CNN layer kernels on the CPU, the pieces CnnCpu (worker/cnn_cpu.h) is built from.
//
// Activations are laid out [channels, batch, side, side] ("CNHW"): channel-major, so that one
// sgemm convolves the whole batch (weights [out, in * k * k] times columns
// [in * k * k, batch * side * side] gives the next [out, batch, side, side]), and each
// (channel, example) pair is one contiguous side x side plane. A [batch, 1, 28, 28] input is
// already in this layout.
//
// Contracts: every function overwrites its outputs (nothing accumulates into them) and
// allocates nothing. Pointers must not alias unless stated.
#ifndef TAMP_WORKER_INTERNAL_CNN_OPS_H_
#define TAMP_WORKER_INTERNAL_CNN_OPS_H_

#include <cstdint>

namespace tamp::internal {

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
// copied from in[c][b][iy][ix]. Turns d(loss)/d(columns) into d(loss)/d(input).
void Col2Im(const float* col, int channels, int batch, int side, int kernel, float* in);

// MaxPool2x2Forward()
//
// 2x2 max-pool with stride 2 over `planes` side x side planes (in: [planes, side, side],
// out: [planes, side / 2, side / 2]). An odd side drops the last row and column. argmax
// (same shape as out) records which of the window's four inputs won, as dy * 2 + dx; the
// first in that order wins ties.
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

}  // namespace tamp::internal

#endif  // TAMP_WORKER_INTERNAL_CNN_OPS_H_
