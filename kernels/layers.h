// The layers of the MLP (worker/mlp_cpu.h) on the GPU: cuBLAS GEMMs and small kernels.
//
// Shapes follow worker/mlp_cpu.h: B = batch, I = inputs, O = outputs, all matrices
// row-major fp32 in device memory; a weight is W [O, I], a bias b [O]:
//   LinearForward         y[B, O] = x[B, I] W^T + b                    (y =)
//   LinearBackwardInput   dx[B, I] = dy[B, O] W                        (dx =)
//   LinearBackwardParams  dW[O, I] (+)= dy^T x,  db[O] (+)= sum_B dy   (= or +=)
//   BiasAdd, BiasGrad     the bias halves of the above, on their own
//   ReluForward           a = max(z, 0)          ReluBackward  dz = a > 0 ? da : 0
//   SoftmaxCrossEntropy   losses[B] = logsumexp(z) - z_y,  dz = (softmax(z) - onehot(y)) / B
//   SgdUpdate             one step of optim/sgd.h (momentum, nesterov, weight decay)
//
// Every function checks its shapes (INVALID_ARGUMENT naming the argument) and every CUDA and
// cuBLAS call (kernels/cuda_check.h), and only enqueues work on `stream`: it returns before
// the GPU has run it, and errors raised while running surface at the next synchronising
// call. Buffers must stay alive until then. Not thread-safe per CublasHandle.
//
// Precision: the GEMMs run in plain fp32 (CUBLAS_DEFAULT_MATH: no TF32), so results match
// the CPU twin within ordinary fp32 summation-order error (kernels/layers_test.cc: abs 1e-4
// + rel 1e-4 for K <= 1024). The elementwise ops and SGD match their twins bit for bit.
//
// CPU twins: kernels/layers_ref.h (the math of worker/mlp_cpu.cc) and optim/sgd.cc.
//
// Example (one hidden layer, forward):
//   TAMP_ASSIGN_OR_RETURN(auto cublas, kernels::CublasHandle::Create());
//   TAMP_RETURN_IF_ERROR(kernels::LinearForward(cublas, x, w1, b1, z1, batch, 784, 128, s));
//   TAMP_RETURN_IF_ERROR(kernels::ReluForward(z1, z1, size_t{batch} * 128, s));
#ifndef TAMP_KERNELS_LAYERS_H_
#define TAMP_KERNELS_LAYERS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tamp::kernels {

// CublasHandle
//
// An owned cuBLAS handle set to CUBLAS_DEFAULT_MATH (fp32, no TF32). Move-only. The layer
// functions bind it to their stream before each call.
class CublasHandle {
 public:
  // CublasHandle::Create()
  //
  // FAILED_PRECONDITION without a usable device; RESOURCE_EXHAUSTED out of memory.
  static absl::StatusOr<CublasHandle> Create();

  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle();

  cublasHandle_t get() const { return handle_; }

 private:
  explicit CublasHandle(cublasHandle_t handle) : handle_(handle) {}
  cublasHandle_t handle_ = nullptr;
};

// LinearForward()
//
// y[B, O] = x[B, I] W[O, I]^T + b[O]; b may be null (no bias).
absl::Status LinearForward(CublasHandle& cublas, const float* x, const float* w, const float* b,
                           float* y, int batch, int in, int out, cudaStream_t stream);

// LinearBackwardInput()
//
// dx[B, I] = dy[B, O] W[O, I].
absl::Status LinearBackwardInput(CublasHandle& cublas, const float* dy, const float* w, float* dx,
                                 int batch, int in, int out, cudaStream_t stream);

// LinearBackwardParams()
//
// dW[O, I] = dy^T x and db[O] = sum over the batch of dy (+= both with `accumulate`); db may
// be null (no bias).
absl::Status LinearBackwardParams(CublasHandle& cublas, const float* x, const float* dy,
                                  float* dw, float* db, int batch, int in, int out,
                                  bool accumulate, cudaStream_t stream);

// BiasAdd()
//
// y[r, c] += b[c] for y [rows, cols].
absl::Status BiasAdd(float* y, const float* b, int rows, int cols, cudaStream_t stream);

// BiasGrad()
//
// db[c] = sum_r dy[r, c] (+= with `accumulate`). Deterministic (fixed summation order).
absl::Status BiasGrad(const float* dy, float* db, int rows, int cols, bool accumulate,
                      cudaStream_t stream);

// ReluForward()
//
// a[i] = max(z[i], 0) for i < n, as std::max(z, 0.0f) (NaN and -0 pass through); a may be z.
absl::Status ReluForward(const float* z, float* a, size_t n, cudaStream_t stream);

// ReluBackward()
//
// dz[i] = a[i] > 0 ? da[i] : 0, where a is ReluForward's output; dz may be da or a (each
// element is read before it is written).
absl::Status ReluBackward(const float* a, const float* da, float* dz, size_t n,
                          cudaStream_t stream);

// SoftmaxCrossEntropy()
//
// For each row i of logits [batch, classes] with label y_i (labels: int32 on the device):
//   losses[i] = log(sum_j exp(z_ij - m_i)) - (z_iy - m_i),  m_i = max_j z_ij
//   dlogits[i, j] = exp(z_ij - m_i) / sum_j(...) / batch - [j == y_i] / batch
// i.e. the gradient of the mean loss. Subtracting the row max keeps exp() in range for any
// finite logits. dlogits may be logits (overwritten in place). A label outside
// [0, classes) gives a NaN loss and a NaN gradient row (memory is never read out of range);
// callers that want an error check labels on the host.
absl::Status SoftmaxCrossEntropy(const float* logits, const int32_t* labels, float* losses,
                                 float* dlogits, int batch, int classes, cudaStream_t stream);

// SgdParams
//
// The hyper-parameters of optim/sgd.h for one step.
struct SgdParams {
  float learning_rate = 0.0f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

// SgdUpdate()
//
// One step of optim/sgd.h on n values, bit for bit the CPU's arithmetic:
//   d = g + weight_decay * w;  buf = momentum * buf + d;  d = nesterov ? d + momentum * buf : buf;
//   w -= learning_rate * d
// momentum_buffer (n values, zero before the first step) may be null iff momentum == 0.
absl::Status SgdUpdate(float* weights, const float* gradient, float* momentum_buffer, size_t n,
                       const SgdParams& params, cudaStream_t stream);

}  // namespace tamp::kernels

#endif  // TAMP_KERNELS_LAYERS_H_
