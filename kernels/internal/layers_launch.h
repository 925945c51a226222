// Raw launchers of the kernels in kernels/layers.cu. Internal to kernels/: call the checked
// API of kernels/layers.h instead.
//
// Each launcher computes its grid, launches on `stream` and returns cudaGetLastError()
// (configuration errors; faults surface at the next synchronising call). Shapes are the
// caller's to check; every size is > 0. Plain C++ types only, so this header compiles under
// both nvcc and the host compiler.
#ifndef TAMP_KERNELS_INTERNAL_LAYERS_LAUNCH_H_
#define TAMP_KERNELS_INTERNAL_LAYERS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tamp::kernels::internal {

// y[r, c] += b[c] for a row-major y [rows, cols].
cudaError_t LaunchBiasAdd(float* y, const float* b, int rows, int cols, cudaStream_t stream);

// db[c] (+)= sum_r dy[r, c].
cudaError_t LaunchBiasGrad(const float* dy, float* db, int rows, int cols, bool accumulate,
                           cudaStream_t stream);

// a[i] = z[i] < 0 ? 0 : z[i] (std::max(z, 0.0f)); a may be z.
cudaError_t LaunchReluForward(const float* z, float* a, size_t n, cudaStream_t stream);

// dz[i] = a[i] > 0 ? da[i] : 0; dz may be da or a.
cudaError_t LaunchReluBackward(const float* a, const float* da, float* dz, size_t n,
                               cudaStream_t stream);

// Softmax cross-entropy per row of logits [batch, classes] (see kernels/layers.h).
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const int32_t* labels, float* losses,
                                      float* dlogits, int batch, int classes,
                                      cudaStream_t stream);

// One SGD step (optim/sgd.h); momentum_buffer may be null when momentum == 0.
cudaError_t LaunchSgdUpdate(float* weights, const float* gradient, float* momentum_buffer,
                            size_t n, float learning_rate, float momentum, float weight_decay,
                            bool nesterov, cudaStream_t stream);

}  // namespace tamp::kernels::internal

#endif  // TAMP_KERNELS_INTERNAL_LAYERS_LAUNCH_H_
