#include "kernels/cnn_ref.h"

#include <cblas.h>

#include <algorithm>
#include <cstddef>

namespace tamp::kernels::ref {
namespace {

// For kernel column kx of a 'same' convolution: output x reads input x + kx - pad, which is
// inside [0, side) exactly for x in [*x0, *x1).
void ValidRange(int side, int kernel, int kx, int* x0, int* x1) {
  const int shift = kx - kernel / 2;
  *x0 = std::max(0, -shift);
  *x1 = std::min(side, side - shift);
}

}  // namespace

void Im2Col(const float* in, int channels, int batch, int side, int kernel, float* col) {
  const int pad = kernel / 2;
  const size_t plane = static_cast<size_t>(side) * side;
  const size_t cols = static_cast<size_t>(batch) * plane;
  float* dst = col;
  for (int c = 0; c < channels; ++c) {
    for (int ky = 0; ky < kernel; ++ky) {
      for (int kx = 0; kx < kernel; ++kx) {
        int x0, x1;
        ValidRange(side, kernel, kx, &x0, &x1);
        const int shift = kx - pad;
        for (int b = 0; b < batch; ++b) {
          const float* src = in + (static_cast<size_t>(c) * batch + b) * plane;
          for (int y = 0; y < side; ++y) {
            float* d = dst + (static_cast<size_t>(b) * side + y) * side;
            const int iy = y + ky - pad;
            if (iy < 0 || iy >= side || x0 >= x1) {
              std::fill(d, d + side, 0.0f);
              continue;
            }
            const float* s = src + static_cast<size_t>(iy) * side;
            std::fill(d, d + x0, 0.0f);
            std::copy(s + x0 + shift, s + x1 + shift, d + x0);
            std::fill(d + x1, d + side, 0.0f);
          }
        }
        dst += cols;
      }
    }
  }
}

void Col2Im(const float* col, int channels, int batch, int side, int kernel, float* in) {
  const int pad = kernel / 2;
  const size_t plane = static_cast<size_t>(side) * side;
  const size_t cols = static_cast<size_t>(batch) * plane;
  std::fill(in, in + static_cast<size_t>(channels) * cols, 0.0f);
  const float* src = col;
  for (int c = 0; c < channels; ++c) {
    for (int ky = 0; ky < kernel; ++ky) {
      for (int kx = 0; kx < kernel; ++kx) {
        int x0, x1;
        ValidRange(side, kernel, kx, &x0, &x1);
        const int shift = kx - pad;
        for (int b = 0; b < batch; ++b) {
          float* dst = in + (static_cast<size_t>(c) * batch + b) * plane;
          for (int y = 0; y < side; ++y) {
            const int iy = y + ky - pad;
            if (iy < 0 || iy >= side) continue;
            const float* s = src + (static_cast<size_t>(b) * side + y) * side;
            float* d = dst + static_cast<size_t>(iy) * side;
            for (int x = x0; x < x1; ++x) d[x + shift] += s[x];
          }
        }
        src += cols;
      }
    }
  }
}

void MaxPool2x2Forward(const float* in, int planes, int side, float* out, uint8_t* argmax) {
  const int half = side / 2;
  for (int p = 0; p < planes; ++p) {
    const float* plane = in + static_cast<size_t>(p) * side * side;
    for (int oy = 0; oy < half; ++oy) {
      const float* row0 = plane + static_cast<size_t>(2 * oy) * side;
      const float* row1 = row0 + side;
      for (int ox = 0; ox < half; ++ox) {
        const float v[4] = {row0[2 * ox], row0[2 * ox + 1], row1[2 * ox], row1[2 * ox + 1]};
        uint8_t best = 0;
        for (uint8_t i = 1; i < 4; ++i) {
          if (v[i] > v[best]) best = i;
        }
        *out++ = v[best];
        *argmax++ = best;
      }
    }
  }
}

void MaxPoolReluBackward(const float* dout, const uint8_t* argmax, int planes, int side,
                         float* a) {
  const int half = side / 2;
  for (int p = 0; p < planes; ++p) {
    float* plane = a + static_cast<size_t>(p) * side * side;
    for (int oy = 0; oy < half; ++oy) {
      float* rows[2] = {plane + static_cast<size_t>(2 * oy) * side,
                        plane + static_cast<size_t>(2 * oy + 1) * side};
      for (int ox = 0; ox < half; ++ox) {
        const float g = *dout++;
        const uint8_t best = *argmax++;
        for (uint8_t i = 0; i < 4; ++i) {
          float& value = rows[i / 2][2 * ox + i % 2];
          value = (i == best && value > 0.0f) ? g : 0.0f;
        }
      }
      if (side % 2 != 0) {
        rows[0][side - 1] = 0.0f;
        rows[1][side - 1] = 0.0f;
      }
    }
    if (side % 2 != 0) {
      float* last = plane + static_cast<size_t>(side - 1) * side;
      std::fill(last, last + side, 0.0f);
    }
  }
}

void ConvForward(const float* x, const float* w, int in_channels, int out_channels, int batch,
                 int side, int kernel, float* columns, float* z) {
  const int k = in_channels * kernel * kernel;
  const int n = batch * side * side;
  Im2Col(x, in_channels, batch, side, kernel, columns);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out_channels, n, k, 1.0f, w, k, columns,
              n, 0.0f, z, n);
}

void ConvBackwardWeights(const float* dz, const float* columns, int in_channels, int out_channels,
                         int batch, int side, int kernel, float* dw) {
  const int k = in_channels * kernel * kernel;
  const int n = batch * side * side;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, out_channels, k, n, 1.0f, dz, n, columns,
              n, 0.0f, dw, k);
}

void ConvBackwardData(const float* w, const float* dz, int in_channels, int out_channels,
                      int batch, int side, int kernel, float* columns, float* dx) {
  const int k = in_channels * kernel * kernel;
  const int n = batch * side * side;
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, out_channels, 1.0f, w, k, dz, n,
              0.0f, columns, n);
  Col2Im(columns, in_channels, batch, side, kernel, dx);
}

void ConvBiasRelu(float* z, const float* bias, int channels, size_t n) {
  for (int c = 0; c < channels; ++c) {
    float* row = z + static_cast<size_t>(c) * n;
    const float b = bias[c];
    for (size_t j = 0; j < n; ++j) row[j] = std::max(row[j] + b, 0.0f);
  }
}

void ConvBiasGrad(const float* dz, int channels, size_t n, float* db) {
  for (int c = 0; c < channels; ++c) {
    const float* row = dz + static_cast<size_t>(c) * n;
    double sum = 0.0;
    for (size_t j = 0; j < n; ++j) sum += row[j];
    db[c] = static_cast<float>(sum);
  }
}

void FlattenChannelMajor(const float* in, int channels, int batch, size_t plane, float* out) {
  const size_t features = static_cast<size_t>(channels) * plane;
  for (int c = 0; c < channels; ++c) {
    for (int i = 0; i < batch; ++i) {
      const float* src = in + (static_cast<size_t>(c) * batch + i) * plane;
      std::copy(src, src + plane, out + i * features + c * plane);
    }
  }
}

void UnflattenChannelMajor(const float* in, int channels, int batch, size_t plane, float* out) {
  const size_t features = static_cast<size_t>(channels) * plane;
  for (int c = 0; c < channels; ++c) {
    for (int i = 0; i < batch; ++i) {
      const float* src = in + i * features + c * plane;
      std::copy(src, src + plane, out + (static_cast<size_t>(c) * batch + i) * plane);
    }
  }
}

}  // namespace tamp::kernels::ref
