// Raw launchers of the kernels in kernels/cnn_layers.cu. Internal to kernels/: call the
// checked API of kernels/cnn_layers.h instead.
//
// Each launcher computes its grid, launches on `stream` and returns cudaGetLastError()
// (configuration errors; faults surface at the next synchronising call). Shapes are the
// caller's to check; every size is > 0. Plain C++ types only, so this header compiles under
// both nvcc and the host compiler. Contracts as in kernels/cnn_ref.h.
#ifndef TAMP_KERNELS_INTERNAL_CNN_LAYERS_LAUNCH_H_
#define TAMP_KERNELS_INTERNAL_CNN_LAYERS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tamp::kernels::internal {

cudaError_t LaunchIm2Col(const float* in, int channels, int batch, int side, int kernel,
                         float* col, cudaStream_t stream);

cudaError_t LaunchCol2Im(const float* col, int channels, int batch, int side, int kernel,
                         float* in, cudaStream_t stream);

cudaError_t LaunchConvBiasRelu(float* z, const float* bias, int channels, size_t n,
                               cudaStream_t stream);

cudaError_t LaunchConvBiasGrad(const float* dz, int channels, size_t n, float* db,
                               cudaStream_t stream);

cudaError_t LaunchMaxPool2x2Forward(const float* in, int planes, int side, float* out,
                                    uint8_t* argmax, cudaStream_t stream);

cudaError_t LaunchMaxPoolReluBackward(const float* dout, const uint8_t* argmax, int planes,
                                      int side, float* a, cudaStream_t stream);

// unflatten == false: [channels, batch, plane] -> [batch, channels * plane]; true: back.
cudaError_t LaunchChannelMajorTranspose(const float* in, int channels, int batch, size_t plane,
                                        bool unflatten, float* out, cudaStream_t stream);

}  // namespace tamp::kernels::internal

#endif  // TAMP_KERNELS_INTERNAL_CNN_LAYERS_LAUNCH_H_
