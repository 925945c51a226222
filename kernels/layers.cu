// Elementwise and reduction kernels of the MLP layers (the GEMMs are cuBLAS, kernels/layers.cc).
//
// Contract (shapes row-major, as in worker/mlp_cpu.h; B = rows/batch, C = cols/classes):
//   bias_add        y[B, C] += b[C]                          (activations: +=)
//   bias_grad       db[C] = or += sum_rows dy[B, C]          (grads: = or +=, caller's choice)
//   relu_forward    a = z < 0 ? 0 : z                        (=, in place allowed)
//   relu_backward   dz = a > 0 ? da : 0, a = relu output     (=, in place allowed)
//   softmax_xent    losses[B] =, dlogits[B, C] =             (dlogits may alias logits)
//   sgd_update      w, buf updated in place as optim/sgd.cc
// CPU twins: kernels/layers_ref.cc (the math of worker/mlp_cpu.cc) and optim/sgd.cc for
// the SGD step. kernels/layers_test.cc compares them.
//
// Rounding: elementwise kernels use explicit _rn intrinsics where the CPU twin rounds each
// operation (SGD), so they match it bit for bit; the reductions (bias_grad, softmax sums)
// add in a different order from the CPU loops and match within a tolerance.

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/internal/layers_launch.h"

namespace tamp::kernels::internal {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 65535 * 8;  // Grid-stride beyond this.

inline unsigned BlocksFor(size_t n, int threads = kThreads) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// ---------------------------------------------------------------------------------------
// CUDA kernels
// ---------------------------------------------------------------------------------------

__global__ void bias_add_kernel1(float* __restrict__ y, const float* __restrict__ b, int rows,
                                 int cols) {
  const size_t total = static_cast<size_t>(rows) * cols;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    y[i] = __fadd_rn(y[i], b[i % cols]);
  }
}

// Block (32, 8): threadIdx.x picks the column, threadIdx.y strides the rows; the 8 partial
// sums of a column are then added in a fixed order, so results are deterministic.
__global__ void bias_grad_kernel1(const float* __restrict__ dy, float* __restrict__ db, int rows,
                                  int cols, bool accumulate) {
  __shared__ float partial[8][33];
  const int col = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.0f;
  if (col < cols) {
    for (int r = threadIdx.y; r < rows; r += 8) sum += dy[static_cast<size_t>(r) * cols + col];
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0.0f;
    for (int k = 0; k < 8; ++k) total += partial[k][threadIdx.x];
    db[col] = accumulate ? db[col] + total : total;
  }
}

__global__ void relu_forward_kernel1(const float* z, float* a, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float v = z[i];
    a[i] = v < 0.0f ? 0.0f : v;  // std::max(v, 0.0f): NaN and -0 pass through.
  }
}

__global__ void relu_backward_kernel1(const float* a, const float* da, float* dz, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dz[i] = a[i] > 0.0f ? da[i] : 0.0f;
  }
}

__device__ inline float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

__device__ inline float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// One warp per row. Numerically stable: m = max_j z_j, s = sum_j exp(z_j - m),
// loss = log(s) - (z_y - m), dz_j = exp(z_j - m) * (1 / (B s)) - [j == y] / B.
// A NaN logit makes the row NaN (fmaxf skips NaN, but z - m then carries it). A label
// outside [0, classes) gives a NaN loss and a NaN row, without touching memory out of range.
__global__ void softmax_xent_kernel1(const float* logits, const int32_t* __restrict__ labels,
                                     float* __restrict__ losses, float* dlogits, int batch,
                                     int classes) {
  const int warps_per_block = blockDim.x / 32;
  const int row = blockIdx.x * warps_per_block + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= batch) return;  // Whole warps leave together.
  const float* z = logits + static_cast<size_t>(row) * classes;
  float* dz = dlogits + static_cast<size_t>(row) * classes;
  const int label = labels[row];
  const bool label_ok = label >= 0 && label < classes;

  float m = -INFINITY;
  for (int j = lane; j < classes; j += 32) m = fmaxf(m, z[j]);
  m = WarpMax(m);
  float s = 0.0f;
  for (int j = lane; j < classes; j += 32) s += expf(z[j] - m);
  s = WarpSum(s);

  const float inv_batch = 1.0f / static_cast<float>(batch);
  const float scale = inv_batch / s;
  // Read z_y before the row is overwritten (dlogits may alias logits).
  const float z_label = label_ok ? z[label] : NAN;
  __syncwarp();
  for (int j = lane; j < classes; j += 32) {
    float d = expf(z[j] - m) * scale;
    if (j == label) d -= inv_batch;
    dz[j] = label_ok ? d : NAN;
  }
  if (lane == 0) losses[row] = logf(s) - (z_label - m);
}

// optim/sgd.cc, operation for operation (each rounded: no FMA contraction).
__global__ void sgd_update_kernel1(float* __restrict__ w, const float* __restrict__ g,
                                   float* __restrict__ buf, size_t n, float lr, float momentum,
                                   float weight_decay, bool nesterov) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float wi = w[i];
    float d = __fadd_rn(g[i], __fmul_rn(weight_decay, wi));
    if (buf != nullptr) {
      const float b = __fadd_rn(__fmul_rn(momentum, buf[i]), d);
      buf[i] = b;
      d = nesterov ? __fadd_rn(d, __fmul_rn(momentum, b)) : b;
    }
    w[i] = __fsub_rn(wi, __fmul_rn(lr, d));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Kernel launchers
// ---------------------------------------------------------------------------------------

cudaError_t LaunchBiasAdd(float* y, const float* b, int rows, int cols, cudaStream_t stream) {
  bias_add_kernel1<<<BlocksFor(static_cast<size_t>(rows) * cols), kThreads, 0, stream>>>(
      y, b, rows, cols);
  return cudaGetLastError();
}

cudaError_t LaunchBiasGrad(const float* dy, float* db, int rows, int cols, bool accumulate,
                           cudaStream_t stream) {
  const dim3 block(32, 8);
  const dim3 grid((cols + 31) / 32);
  bias_grad_kernel1<<<grid, block, 0, stream>>>(dy, db, rows, cols, accumulate);
  return cudaGetLastError();
}

cudaError_t LaunchReluForward(const float* z, float* a, size_t n, cudaStream_t stream) {
  relu_forward_kernel1<<<BlocksFor(n), kThreads, 0, stream>>>(z, a, n);
  return cudaGetLastError();
}

cudaError_t LaunchReluBackward(const float* a, const float* da, float* dz, size_t n,
                               cudaStream_t stream) {
  relu_backward_kernel1<<<BlocksFor(n), kThreads, 0, stream>>>(a, da, dz, n);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const int32_t* labels, float* losses,
                                      float* dlogits, int batch, int classes,
                                      cudaStream_t stream) {
  constexpr int kWarpsPerBlock = kThreads / 32;
  const unsigned blocks = (batch + kWarpsPerBlock - 1) / kWarpsPerBlock;
  softmax_xent_kernel1<<<blocks, kThreads, 0, stream>>>(logits, labels, losses, dlogits, batch,
                                                        classes);
  return cudaGetLastError();
}

cudaError_t LaunchSgdUpdate(float* weights, const float* gradient, float* momentum_buffer,
                            size_t n, float learning_rate, float momentum, float weight_decay,
                            bool nesterov, cudaStream_t stream) {
  sgd_update_kernel1<<<BlocksFor(n), kThreads, 0, stream>>>(
      weights, gradient, momentum_buffer, n, learning_rate, momentum, weight_decay, nesterov);
  return cudaGetLastError();
}

}  // namespace tamp::kernels::internal
