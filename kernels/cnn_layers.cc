// Checked entry points of kernels/cnn_layers.h: shape checks, the cuBLAS GEMMs of the
// convolutions, and the launchers of kernels/cnn_layers.cu.
//
// Row-major on cuBLAS (see kernels/layers.cc): a row-major C = op(A) op(B) is the
// column-major C^T = op(B)^T op(A)^T, so each call swaps the operands and passes
// m = C's column count, n = its row count. With K = in * k * k and n = batch * side^2:
//   forward     z[out,n] = W[out,K] col[K,n]     Sgemm(N, N, n, out, K, col, n, W, K, z, n)
//   dW          dW[out,K] = dz[out,n] col^T      Sgemm(T, N, K, out, n, col, n, dz, n, dW, K)
//   dcol        dcol[K,n] = W^T dz[out,n]        Sgemm(N, T, n, K, out, dz, n, W, K, dcol, n)
// the cblas_sgemm(CblasRowMajor, ...) calls of kernels/cnn_ref.cc, restated.
// Without CUDA (tools/cuda.bzl) this file compiles to nothing.
#if TAMP_HAVE_CUDA

#include "kernels/cnn_layers.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda_check.h"
#include "kernels/internal/arg_checks.h"
#include "kernels/internal/cnn_layers_launch.h"

namespace tamp::kernels {
namespace {

using internal::CheckNotNull;
using internal::CheckPositive;

// A 'same' convolution's shape: positive sizes, an odd kernel.
absl::Status CheckConvShape(int in_channels, int out_channels, int batch, int side, int kernel) {
  TAMP_CHECK_ARG(CheckPositive("in_channels", in_channels));
  TAMP_CHECK_ARG(CheckPositive("out_channels", out_channels));
  TAMP_CHECK_ARG(CheckPositive("batch", batch));
  TAMP_CHECK_ARG(CheckPositive("side", side));
  TAMP_CHECK_ARG(CheckPositive("kernel", kernel));
  if (kernel % 2 == 0) {
    return absl::InvalidArgumentError(absl::StrCat("kernel must be odd ('same' padding), got ",
                                                   kernel));
  }
  return absl::OkStatus();
}

absl::Status CheckPoolShape(int planes, int side) {
  TAMP_CHECK_ARG(CheckPositive("planes", planes));
  if (side < 2) {
    return absl::InvalidArgumentError(absl::StrCat("side must be >= 2 for 2x2 pooling, got ",
                                                   side));
  }
  return absl::OkStatus();
}

// FlattenChannelMajor() and UnflattenChannelMajor(): the same checks, the one transpose kernel
// in either direction.
absl::Status ChannelMajorTranspose(const float* in, int channels, int batch, size_t plane,
                                   bool unflatten, float* out, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("channels", channels));
  TAMP_CHECK_ARG(CheckPositive("batch", batch));
  TAMP_CHECK_ARG(CheckPositive("plane", static_cast<int64_t>(plane)));
  TAMP_CHECK_ARG(CheckNotNull("in", in));
  TAMP_CHECK_ARG(CheckNotNull("out", out));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchChannelMajorTranspose(in, channels, batch, plane,
                                                                  unflatten, out, stream));
  return absl::OkStatus();
}

}  // namespace

absl::Status Im2Col(const float* in, int channels, int batch, int side, int kernel, float* col,
                    cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckConvShape(channels, 1, batch, side, kernel));
  TAMP_CHECK_ARG(CheckNotNull("in", in));
  TAMP_CHECK_ARG(CheckNotNull("col", col));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchIm2Col(in, channels, batch, side, kernel, col, stream));
  return absl::OkStatus();
}

absl::Status Col2Im(const float* col, int channels, int batch, int side, int kernel, float* in,
                    cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckConvShape(channels, 1, batch, side, kernel));
  TAMP_CHECK_ARG(CheckNotNull("col", col));
  TAMP_CHECK_ARG(CheckNotNull("in", in));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchCol2Im(col, channels, batch, side, kernel, in, stream));
  return absl::OkStatus();
}

absl::Status ConvForward(CublasHandle& cublas, const float* x, const float* w, int in_channels,
                         int out_channels, int batch, int side, int kernel, float* columns,
                         float* z, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckConvShape(in_channels, out_channels, batch, side, kernel));
  TAMP_CHECK_ARG(CheckNotNull("w", w));
  TAMP_CHECK_ARG(CheckNotNull("z", z));
  TAMP_CHECK_ARG(Im2Col(x, in_channels, batch, side, kernel, columns, stream));
  const int k = in_channels * kernel * kernel;
  const int n = batch * side * side;
  const float one = 1.0f, zero = 0.0f;
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas.get(), stream));
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, out_channels,
                                          k, &one, columns, n, w, k, &zero, z, n));
  return absl::OkStatus();
}

absl::Status ConvBackwardWeights(CublasHandle& cublas, const float* dz, const float* columns,
                                 int in_channels, int out_channels, int batch, int side,
                                 int kernel, float* dw, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckConvShape(in_channels, out_channels, batch, side, kernel));
  TAMP_CHECK_ARG(CheckNotNull("dz", dz));
  TAMP_CHECK_ARG(CheckNotNull("columns", columns));
  TAMP_CHECK_ARG(CheckNotNull("dw", dw));
  const int k = in_channels * kernel * kernel;
  const int n = batch * side * side;
  const float one = 1.0f, zero = 0.0f;
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas.get(), stream));
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, k, out_channels,
                                          n, &one, columns, n, dz, n, &zero, dw, k));
  return absl::OkStatus();
}

absl::Status ConvBackwardData(CublasHandle& cublas, const float* w, const float* dz,
                              int in_channels, int out_channels, int batch, int side, int kernel,
                              float* columns, float* dx, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckConvShape(in_channels, out_channels, batch, side, kernel));
  TAMP_CHECK_ARG(CheckNotNull("w", w));
  TAMP_CHECK_ARG(CheckNotNull("dz", dz));
  TAMP_CHECK_ARG(CheckNotNull("columns", columns));
  const int k = in_channels * kernel * kernel;
  const int n = batch * side * side;
  const float one = 1.0f, zero = 0.0f;
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas.get(), stream));
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_T, n, k,
                                          out_channels, &one, dz, n, w, k, &zero, columns, n));
  return Col2Im(columns, in_channels, batch, side, kernel, dx, stream);
}

absl::Status ConvBiasRelu(float* z, const float* bias, int channels, size_t n,
                          cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("channels", channels));
  TAMP_CHECK_ARG(CheckPositive("n", static_cast<int64_t>(n)));
  TAMP_CHECK_ARG(CheckNotNull("z", z));
  TAMP_CHECK_ARG(CheckNotNull("bias", bias));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchConvBiasRelu(z, bias, channels, n, stream));
  return absl::OkStatus();
}

absl::Status ConvBiasGrad(const float* dz, int channels, size_t n, float* db,
                          cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("channels", channels));
  TAMP_CHECK_ARG(CheckPositive("n", static_cast<int64_t>(n)));
  TAMP_CHECK_ARG(CheckNotNull("dz", dz));
  TAMP_CHECK_ARG(CheckNotNull("db", db));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchConvBiasGrad(dz, channels, n, db, stream));
  return absl::OkStatus();
}

absl::Status MaxPool2x2Forward(const float* in, int planes, int side, float* out,
                               uint8_t* argmax, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPoolShape(planes, side));
  TAMP_CHECK_ARG(CheckNotNull("in", in));
  TAMP_CHECK_ARG(CheckNotNull("out", out));
  TAMP_CHECK_ARG(CheckNotNull("argmax", argmax));
  TAMP_CUDA_RETURN_IF_ERROR(
      internal::LaunchMaxPool2x2Forward(in, planes, side, out, argmax, stream));
  return absl::OkStatus();
}

absl::Status MaxPoolReluBackward(const float* dout, const uint8_t* argmax, int planes, int side,
                                 float* a, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPoolShape(planes, side));
  TAMP_CHECK_ARG(CheckNotNull("dout", dout));
  TAMP_CHECK_ARG(CheckNotNull("argmax", argmax));
  TAMP_CHECK_ARG(CheckNotNull("a", a));
  TAMP_CUDA_RETURN_IF_ERROR(
      internal::LaunchMaxPoolReluBackward(dout, argmax, planes, side, a, stream));
  return absl::OkStatus();
}

absl::Status FlattenChannelMajor(const float* in, int channels, int batch, size_t plane,
                                 float* out, cudaStream_t stream) {
  return ChannelMajorTranspose(in, channels, batch, plane, /*unflatten=*/false, out, stream);
}

absl::Status UnflattenChannelMajor(const float* in, int channels, int batch, size_t plane,
                                   float* out, cudaStream_t stream) {
  return ChannelMajorTranspose(in, channels, batch, plane, /*unflatten=*/true, out, stream);
}

}  // namespace tamp::kernels

#endif  // TAMP_HAVE_CUDA
