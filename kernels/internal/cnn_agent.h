// What each thread of kernels/cnn_layers.cu computes: one output element per call, as
// functions that compile for the host (gcc) and the device (nvcc). Internal to kernels/.
//
// The kernels are grid-stride loops over these; kernels/cnn_layers_emulation_test.cc runs the
// same functions on the host over every index and requires the CPU twins' results bit for
// bit (kernels/cnn_ref.h), so the index math is checked without a GPU. What that cannot check
// is the launches themselves (grids, the bias gradient's shared-memory tree):
// kernels/cnn_layers_test.cc does on a GPU.
//
// Arithmetic: only additions and comparisons, never a product that nvcc could contract into
// an FMA, so a plain `+` rounds the same on both sides. Layouts as in kernels/cnn_ref.h:
// activations [channels, batch, side, side], 'same' convolutions with odd `kernel`.
#ifndef TAMP_KERNELS_INTERNAL_CNN_AGENT_H_
#define TAMP_KERNELS_INTERNAL_CNN_AGENT_H_

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TAMP_CNN_HD __host__ __device__ __forceinline__
#else
#define TAMP_CNN_HD inline
#endif

namespace tamp::kernels::internal {

// Entry i of the columns [channels * kernel^2, batch * side^2]: row (c, ky, kx), column
// (b, y, x) holds in[c][b][y + ky - pad][x + kx - pad], 0 outside the image.
TAMP_CNN_HD float Im2ColValue(const float* in, int channels, int batch, int side, int kernel,
                              size_t i) {
  const size_t plane = static_cast<size_t>(side) * side;
  const size_t cols = static_cast<size_t>(batch) * plane;
  const int pad = kernel / 2;
  const size_t r = i / cols, j = i % cols;
  const size_t c = r / (static_cast<size_t>(kernel) * kernel);
  const int ky = static_cast<int>(r / kernel % kernel);
  const int kx = static_cast<int>(r % kernel);
  const size_t b = j / plane;
  const int y = static_cast<int>(j % plane / side);
  const int x = static_cast<int>(j % side);
  const int iy = y + ky - pad, ix = x + kx - pad;
  if (iy < 0 || iy >= side || ix < 0 || ix >= side) return 0.0f;
  return in[(c * batch + b) * plane + static_cast<size_t>(iy) * side + ix];
}

// Entry i of the image [channels, batch, side, side]: the sum of its column entries, gathered
// in the (ky, kx) order in which ref::Col2Im scatters them, from 0.
TAMP_CNN_HD float Col2ImValue(const float* col, int channels, int batch, int side, int kernel,
                              size_t i) {
  const size_t plane = static_cast<size_t>(side) * side;
  const size_t cols = static_cast<size_t>(batch) * plane;
  const int pad = kernel / 2;
  const size_t c = i / cols;
  const size_t b = i % cols / plane;
  const int iy = static_cast<int>(i % plane / side);
  const int ix = static_cast<int>(i % side);
  float sum = 0.0f;
  for (int ky = 0; ky < kernel; ++ky) {
    const int y = iy - ky + pad;
    if (y < 0 || y >= side) continue;
    for (int kx = 0; kx < kernel; ++kx) {
      const int x = ix - kx + pad;
      if (x < 0 || x >= side) continue;
      const size_t row = (c * kernel + ky) * kernel + kx;
      sum += col[row * cols + (b * side + y) * side + x];
    }
  }
  return sum;
}

// std::max(z + bias, 0.0f): NaN and -0 pass through.
TAMP_CNN_HD float BiasReluValue(float z, float bias) {
  const float v = z + bias;
  return v < 0.0f ? 0.0f : v;
}

// Pooled value i of [planes, side / 2, side / 2] and which input won (dy * 2 + dx; the first
// wins ties, NaN never wins).
struct PoolWinner {
  float value;
  uint8_t argmax;
};

TAMP_CNN_HD PoolWinner MaxPoolValue(const float* in, int side, size_t i) {
  const int half = side / 2;
  const size_t pooled = static_cast<size_t>(half) * half;
  const size_t p = i / pooled;
  const int oy = static_cast<int>(i % pooled / half);
  const int ox = static_cast<int>(i % half);
  const float* row0 = in + p * side * side + static_cast<size_t>(2 * oy) * side + 2 * ox;
  const float v[4] = {row0[0], row0[1], row0[side], row0[side + 1]};
  uint8_t best = 0;
  for (uint8_t k = 1; k < 4; ++k) {
    if (v[k] > v[best]) best = k;
  }
  return {v[best], best};
}

// Entry i of dloss/dz [planes, side, side], from a = relu(z) at i: dout of its window if it
// was the window's argmax and a > 0, else 0 (also in a dropped last row or column).
TAMP_CNN_HD float MaxPoolReluBackwardValue(const float* dout, const uint8_t* argmax, int side,
                                           float a, size_t i) {
  const int half = side / 2;
  const size_t plane = static_cast<size_t>(side) * side;
  const size_t p = i / plane;
  const int y = static_cast<int>(i % plane / side);
  const int x = static_cast<int>(i % side);
  if (y / 2 >= half || x / 2 >= half) return 0.0f;
  const size_t o = p * half * half + static_cast<size_t>(y / 2) * half + x / 2;
  const int position = (y % 2) * 2 + x % 2;
  return position == argmax[o] && a > 0.0f ? dout[o] : 0.0f;
}

// Where entry i of [channels, batch, plane] sits in [batch, channels * plane].
TAMP_CNN_HD size_t FlatIndex(int channels, int batch, size_t plane, size_t i) {
  const size_t per_channel = static_cast<size_t>(batch) * plane;
  const size_t c = i / per_channel;
  const size_t b = i % per_channel / plane;
  return (b * channels + c) * plane + i % plane;
}

}  // namespace tamp::kernels::internal

#undef TAMP_CNN_HD

#endif  // TAMP_KERNELS_INTERNAL_CNN_AGENT_H_
