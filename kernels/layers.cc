// Checked entry points of kernels/layers.h: shape checks, the cuBLAS GEMMs, and the launchers
// of kernels/layers.cu.
//
// Row-major on cuBLAS. cuBLAS is column-major: a row-major matrix M [r, c] with leading
// dimension c is, to cuBLAS, the column-major matrix M^T [c, r] with the same leading
// dimension. So a row-major product C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T: swap the operands, keep each one's transpose flag, and pass the
// column-major shapes (m = C's row-major column count, n = its row count). Concretely:
//   forward    y[B,O] = x[B,I] W[O,I]^T   ->  y^T[O,B] = W[O,I] x^T[I,B]
//              W is W^T[I,O] to cuBLAS, so op(A) = T (lda = I); x is x^T[I,B], op(B) = N
//              (ldb = I):  Sgemm(T, N, m = O, n = B, k = I, W, I, x, I, y, O)
//   dx         dx[B,I] = dy[B,O] W[O,I]   ->  dx^T[I,B] = W^T[I,O] dy^T[O,B]
//              both as cuBLAS sees them, no transposes:
//              Sgemm(N, N, m = I, n = B, k = O, W, I, dy, O, dx, I)
//   dW         dW[O,I] = dy^T[O,B] x[B,I] ->  dW^T[I,O] = x^T[I,B] dy[B,O]
//              x as x^T[I,B] (N, lda = I); dy^T[O,B] to cuBLAS, transposed to dy[B,O]
//              (T, ldb = O):  Sgemm(N, T, m = I, n = O, k = B, x, I, dy, O, dW, I)
// These are the cblas_sgemm(CblasRowMajor, ...) calls of worker/mlp_cpu.cc, restated.
// Without CUDA (tools/cuda.bzl) this file compiles to nothing.
#if TAMP_HAVE_CUDA

#include "kernels/layers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda_check.h"
#include "kernels/internal/arg_checks.h"
#include "kernels/internal/layers_launch.h"

namespace tamp::kernels {

using internal::CheckNotNull;
using internal::CheckPositive;

absl::StatusOr<CublasHandle> CublasHandle::Create() {
  cublasHandle_t handle = nullptr;
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasCreate(&handle));
  const cublasStatus_t mode = cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
  if (mode != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(handle);
    TAMP_CUBLAS_RETURN_IF_ERROR(mode);
  }
  return CublasHandle(handle);
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

absl::Status LinearForward(CublasHandle& cublas, const float* x, const float* w, const float* b,
                           float* y, int batch, int in, int out, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("batch", batch));
  TAMP_CHECK_ARG(CheckPositive("in", in));
  TAMP_CHECK_ARG(CheckPositive("out", out));
  TAMP_CHECK_ARG(CheckNotNull("x", x));
  TAMP_CHECK_ARG(CheckNotNull("w", w));
  TAMP_CHECK_ARG(CheckNotNull("y", y));
  const float one = 1.0f, zero = 0.0f;
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas.get(), stream));
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in,
                                          &one, w, in, x, in, &zero, y, out));
  if (b != nullptr) TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchBiasAdd(y, b, batch, out, stream));
  return absl::OkStatus();
}

absl::Status LinearBackwardInput(CublasHandle& cublas, const float* dy, const float* w, float* dx,
                                 int batch, int in, int out, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("batch", batch));
  TAMP_CHECK_ARG(CheckPositive("in", in));
  TAMP_CHECK_ARG(CheckPositive("out", out));
  TAMP_CHECK_ARG(CheckNotNull("dy", dy));
  TAMP_CHECK_ARG(CheckNotNull("w", w));
  TAMP_CHECK_ARG(CheckNotNull("dx", dx));
  const float one = 1.0f, zero = 0.0f;
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas.get(), stream));
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out,
                                          &one, w, in, dy, out, &zero, dx, in));
  return absl::OkStatus();
}

absl::Status LinearBackwardParams(CublasHandle& cublas, const float* x, const float* dy,
                                  float* dw, float* db, int batch, int in, int out,
                                  bool accumulate, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("batch", batch));
  TAMP_CHECK_ARG(CheckPositive("in", in));
  TAMP_CHECK_ARG(CheckPositive("out", out));
  TAMP_CHECK_ARG(CheckNotNull("x", x));
  TAMP_CHECK_ARG(CheckNotNull("dy", dy));
  TAMP_CHECK_ARG(CheckNotNull("dw", dw));
  const float one = 1.0f;
  const float beta = accumulate ? 1.0f : 0.0f;
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas.get(), stream));
  TAMP_CUBLAS_RETURN_IF_ERROR(cublasSgemm(cublas.get(), CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch,
                                          &one, x, in, dy, out, &beta, dw, in));
  if (db != nullptr) {
    TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchBiasGrad(dy, db, batch, out, accumulate, stream));
  }
  return absl::OkStatus();
}

absl::Status BiasAdd(float* y, const float* b, int rows, int cols, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("rows", rows));
  TAMP_CHECK_ARG(CheckPositive("cols", cols));
  TAMP_CHECK_ARG(CheckNotNull("y", y));
  TAMP_CHECK_ARG(CheckNotNull("b", b));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchBiasAdd(y, b, rows, cols, stream));
  return absl::OkStatus();
}

absl::Status BiasGrad(const float* dy, float* db, int rows, int cols, bool accumulate,
                      cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("rows", rows));
  TAMP_CHECK_ARG(CheckPositive("cols", cols));
  TAMP_CHECK_ARG(CheckNotNull("dy", dy));
  TAMP_CHECK_ARG(CheckNotNull("db", db));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchBiasGrad(dy, db, rows, cols, accumulate, stream));
  return absl::OkStatus();
}

absl::Status ReluForward(const float* z, float* a, size_t n, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("n", static_cast<int64_t>(n)));
  TAMP_CHECK_ARG(CheckNotNull("z", z));
  TAMP_CHECK_ARG(CheckNotNull("a", a));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchReluForward(z, a, n, stream));
  return absl::OkStatus();
}

absl::Status ReluBackward(const float* a, const float* da, float* dz, size_t n,
                          cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("n", static_cast<int64_t>(n)));
  TAMP_CHECK_ARG(CheckNotNull("a", a));
  TAMP_CHECK_ARG(CheckNotNull("da", da));
  TAMP_CHECK_ARG(CheckNotNull("dz", dz));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchReluBackward(a, da, dz, n, stream));
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropy(const float* logits, const int32_t* labels, float* losses,
                                 float* dlogits, int batch, int classes, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("batch", batch));
  TAMP_CHECK_ARG(CheckPositive("classes", classes));
  TAMP_CHECK_ARG(CheckNotNull("logits", logits));
  TAMP_CHECK_ARG(CheckNotNull("labels", labels));
  TAMP_CHECK_ARG(CheckNotNull("losses", losses));
  TAMP_CHECK_ARG(CheckNotNull("dlogits", dlogits));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchSoftmaxCrossEntropy(logits, labels, losses, dlogits,
                                                                batch, classes, stream));
  return absl::OkStatus();
}

absl::Status SgdUpdate(float* weights, const float* gradient, float* momentum_buffer, size_t n,
                       const SgdParams& params, cudaStream_t stream) {
  TAMP_CHECK_ARG(CheckPositive("n", static_cast<int64_t>(n)));
  TAMP_CHECK_ARG(CheckNotNull("weights", weights));
  TAMP_CHECK_ARG(CheckNotNull("gradient", gradient));
  if (params.momentum != 0.0f) TAMP_CHECK_ARG(CheckNotNull("momentum_buffer", momentum_buffer));
  TAMP_CUDA_RETURN_IF_ERROR(internal::LaunchSgdUpdate(
      weights, gradient, params.momentum != 0.0f ? momentum_buffer : nullptr, n,
      params.learning_rate, params.momentum, params.weight_decay, params.nesterov, stream));
  return absl::OkStatus();
}

}  // namespace tamp::kernels

#endif  // TAMP_HAVE_CUDA
