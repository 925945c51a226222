#include "kernels/layers_ref.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tamp::kernels::ref {

void LinearForward(const float* x, const float* w, const float* b, float* y, int batch, int in,
                   int out) {
  // mlp_cpu.cc Forward(): z = a W^T (+ the bias, which it copies in first; here added after,
  // as the GPU does).
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 0.0f,
              y, out);
  if (b != nullptr) BiasAdd(y, b, batch, out);
}

void LinearBackwardInput(const float* dy, const float* w, float* dx, int batch, int in, int out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, in, out, 1.0f, dy, out, w, in,
              0.0f, dx, in);
}

void LinearBackwardParams(const float* x, const float* dy, float* dw, float* db, int batch, int in,
                          int out, bool accumulate) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, batch, 1.0f, dy, out, x, in,
              accumulate ? 1.0f : 0.0f, dw, in);
  if (db != nullptr) BiasGrad(dy, db, batch, out, accumulate);
}

void BiasAdd(float* y, const float* b, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) y[static_cast<size_t>(r) * cols + c] += b[c];
  }
}

void BiasGrad(const float* dy, float* db, int rows, int cols, bool accumulate) {
  if (!accumulate) std::fill(db, db + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = dy + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) db[c] += row[c];
  }
}

void ReluForward(const float* z, float* a, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = std::max(z[i], 0.0f);
}

void ReluBackward(const float* a, const float* da, float* dz, size_t n) {
  for (size_t i = 0; i < n; ++i) dz[i] = a[i] > 0.0f ? da[i] : 0.0f;
}

void SoftmaxCrossEntropy(const float* logits, const int32_t* labels, float* losses,
                         float* dlogits, int batch, int classes) {
  const float inv_batch = 1.0f / static_cast<float>(batch);
  for (int i = 0; i < batch; ++i) {
    const float* z = logits + static_cast<size_t>(i) * classes;
    float* dz = dlogits + static_cast<size_t>(i) * classes;
    const int label = labels[i];
    if (label < 0 || label >= classes) {
      losses[i] = std::numeric_limits<float>::quiet_NaN();
      std::fill(dz, dz + classes, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    // mlp_cpu.cc TrainStep(): m = max, e_j = exp(z_j - m), loss = log(sum) - (z_y - m),
    // dz_j = e_j * (1/B / sum), dz_y -= 1/B.
    const float m = *std::max_element(z, z + classes);
    const float z_label = z[label];
    float sum = 0.0f;
    for (int j = 0; j < classes; ++j) {
      dz[j] = std::exp(z[j] - m);
      sum += dz[j];
    }
    losses[i] = std::log(sum) - (z_label - m);
    const float scale = inv_batch / sum;
    for (int j = 0; j < classes; ++j) dz[j] *= scale;
    dz[label] -= inv_batch;
  }
}

}  // namespace tamp::kernels::ref
