// Kernels of the CNN's layers (the GEMMs are cuBLAS, kernels/cnn_layers.cc).
//
// Contract (kernels/cnn_ref.h; activations [channels, batch, side, side], 'same' padding):
//   im2col          col[C k k, B s s] =                       (every entry written, 0 padding)
//   col2im          in[C, B, s, s] = sum of its col entries   (a gather: no atomics)
//   conv_bias_relu  z = max(z + b[c], 0)                      (in place)
//   conv_bias_grad  db[c] = sum_j dz[c, j]                    (=, in double)
//   maxpool_fwd     out, argmax =                             (2x2, stride 2)
//   maxpool_relu_bwd a = dz                                   (in place over relu(z))
//   channel_major   [C, B, plane] <-> [B, C plane]            (=)
// CPU twins: kernels/cnn_ref.cc. kernels/cnn_layers_test.cc compares them.
//
// The per-element work is kernels/internal/cnn_agent.h, shared with the host emulation test.
// Rounding: all but conv_bias_grad match their twins bit for bit (col2im gathers each input
// element's contributions in the order in which Col2Im scatters them). conv_bias_grad sums
// in double in a tree, not left to right: the float it rounds to matches within one ulp.

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/internal/cnn_agent.h"
#include "kernels/internal/cnn_layers_launch.h"

namespace tamp::kernels::internal {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 65535 * 8;  // Grid-stride beyond this.

inline unsigned BlocksFor(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

#define TAMP_GRID_STRIDE(i, n)                                                  \
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<size_t>(gridDim.x) * blockDim.x)

// ---------------------------------------------------------------------------------------
// CUDA kernels
// ---------------------------------------------------------------------------------------

__global__ void im2col_kernel1(const float* __restrict__ in, int channels, int batch, int side,
                               int kernel, float* __restrict__ col) {
  const size_t total = static_cast<size_t>(channels) * kernel * kernel * batch *
                       static_cast<size_t>(side) * side;
  TAMP_GRID_STRIDE(i, total) col[i] = Im2ColValue(in, channels, batch, side, kernel, i);
}

// A gather (each thread owns one input element), so no atomics and a fixed order.
__global__ void col2im_kernel1(const float* __restrict__ col, int channels, int batch, int side,
                               int kernel, float* __restrict__ in) {
  const size_t total = static_cast<size_t>(channels) * batch * static_cast<size_t>(side) * side;
  TAMP_GRID_STRIDE(i, total) in[i] = Col2ImValue(col, channels, batch, side, kernel, i);
}

__global__ void conv_bias_relu_kernel1(float* __restrict__ z, const float* __restrict__ bias,
                                       int channels, size_t n) {
  TAMP_GRID_STRIDE(i, static_cast<size_t>(channels) * n) z[i] = BiasReluValue(z[i], bias[i / n]);
}

// One block per channel; fixed blockDim, so the tree (and the result) is deterministic.
__global__ void conv_bias_grad_kernel1(const float* __restrict__ dz, size_t n,
                                       float* __restrict__ db) {
  __shared__ double partial[kThreads];
  const float* row = dz + blockIdx.x * n;
  double sum = 0.0;
  for (size_t j = threadIdx.x; j < n; j += kThreads) sum += row[j];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[blockIdx.x] = static_cast<float>(partial[0]);
}

__global__ void maxpool_fwd_kernel1(const float* __restrict__ in, int planes, int side,
                                    float* __restrict__ out, uint8_t* __restrict__ argmax) {
  TAMP_GRID_STRIDE(i, static_cast<size_t>(planes) * (side / 2) * (side / 2)) {
    const PoolWinner winner = MaxPoolValue(in, side, i);
    out[i] = winner.value;
    argmax[i] = winner.argmax;
  }
}

// In place: each thread reads and writes its own element of a.
__global__ void maxpool_relu_bwd_kernel1(const float* __restrict__ dout,
                                         const uint8_t* __restrict__ argmax, int planes, int side,
                                         float* __restrict__ a) {
  TAMP_GRID_STRIDE(i, static_cast<size_t>(planes) * side * side) {
    a[i] = MaxPoolReluBackwardValue(dout, argmax, side, a[i], i);
  }
}

__global__ void channel_major_kernel1(const float* __restrict__ in, int channels, int batch,
                                      size_t plane, bool unflatten, float* __restrict__ out) {
  TAMP_GRID_STRIDE(i, static_cast<size_t>(channels) * batch * plane) {
    const size_t flat = FlatIndex(channels, batch, plane, i);
    if (unflatten) {
      out[i] = in[flat];
    } else {
      out[flat] = in[i];
    }
  }
}

#undef TAMP_GRID_STRIDE

}  // namespace

// ---------------------------------------------------------------------------------------
// Kernel launchers
// ---------------------------------------------------------------------------------------

cudaError_t LaunchIm2Col(const float* in, int channels, int batch, int side, int kernel,
                         float* col, cudaStream_t stream) {
  const size_t total =
      static_cast<size_t>(channels) * kernel * kernel * batch * static_cast<size_t>(side) * side;
  im2col_kernel1<<<BlocksFor(total), kThreads, 0, stream>>>(in, channels, batch, side, kernel,
                                                            col);
  return cudaGetLastError();
}

cudaError_t LaunchCol2Im(const float* col, int channels, int batch, int side, int kernel,
                         float* in, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(channels) * batch * static_cast<size_t>(side) * side;
  col2im_kernel1<<<BlocksFor(total), kThreads, 0, stream>>>(col, channels, batch, side, kernel,
                                                            in);
  return cudaGetLastError();
}

cudaError_t LaunchConvBiasRelu(float* z, const float* bias, int channels, size_t n,
                               cudaStream_t stream) {
  conv_bias_relu_kernel1<<<BlocksFor(static_cast<size_t>(channels) * n), kThreads, 0, stream>>>(
      z, bias, channels, n);
  return cudaGetLastError();
}

cudaError_t LaunchConvBiasGrad(const float* dz, int channels, size_t n, float* db,
                               cudaStream_t stream) {
  conv_bias_grad_kernel1<<<channels, kThreads, 0, stream>>>(dz, n, db);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPool2x2Forward(const float* in, int planes, int side, float* out,
                                    uint8_t* argmax, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(planes) * (side / 2) * (side / 2);
  maxpool_fwd_kernel1<<<BlocksFor(total), kThreads, 0, stream>>>(in, planes, side, out, argmax);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPoolReluBackward(const float* dout, const uint8_t* argmax, int planes,
                                      int side, float* a, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(planes) * side * side;
  maxpool_relu_bwd_kernel1<<<BlocksFor(total), kThreads, 0, stream>>>(dout, argmax, planes, side,
                                                                       a);
  return cudaGetLastError();
}

cudaError_t LaunchChannelMajorTranspose(const float* in, int channels, int batch, size_t plane,
                                        bool unflatten, float* out, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(channels) * batch * plane;
  channel_major_kernel1<<<BlocksFor(total), kThreads, 0, stream>>>(in, channels, batch, plane,
                                                                    unflatten, out);
  return cudaGetLastError();
}

}  // namespace tamp::kernels::internal
