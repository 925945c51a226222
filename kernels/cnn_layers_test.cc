// GPU CNN layers (kernels/cnn_layers.h) against their CPU twins (kernels/cnn_ref.h).
// Tests that need a device skip without one ("no CUDA device: skipping (...)"); argument
// checks, which return before touching the device, run everywhere CUDA is built.
#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cnn_ref.h"
#include "kernels/cuda_testing.h"
#include "kernels/device.h"
#if TAMP_HAVE_CUDA
#include "kernels/cnn_layers.h"
#include "kernels/cuda_check.h"
#endif

namespace tamp::kernels {
namespace {

#if TAMP_HAVE_CUDA

using testing::CompareBitwise;
using testing::CompareClose;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = value(rng);
  return v;
}

// Host <-> device without CHECKs: a CUDA error fails the test and the binary goes on.
template <typename T>
::testing::AssertionResult ToDevice(const std::vector<T>& host, DeviceArray<T>* out) {
  auto array = DeviceArray<T>::Create(host.size());
  if (!array.ok()) return ::testing::AssertionFailure() << array.status();
  if (absl::Status s = array->CopyFromHost(host.data(), host.size(), nullptr); !s.ok()) {
    return ::testing::AssertionFailure() << s;
  }
  *out = *std::move(array);
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult ToHost(const DeviceArray<T>& array, std::vector<T>* out) {
  out->resize(array.size());
  if (absl::Status s = array.CopyToHost(out->data(), out->size(), nullptr); !s.ok()) {
    return ::testing::AssertionFailure() << s;
  }
  const absl::Status synced = CudaErrorToStatus(cudaStreamSynchronize(nullptr),
                                                "cudaStreamSynchronize", __FILE__, __LINE__);
  if (!synced.ok()) return ::testing::AssertionFailure() << synced;
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult Scratch(size_t n, DeviceArray<T>* out) {
  auto array = DeviceArray<T>::Create(n);
  if (!array.ok()) return ::testing::AssertionFailure() << array.status();
  *out = *std::move(array);
  return ::testing::AssertionSuccess();
}

struct Conv {
  int in, out, batch, side, kernel;
  size_t x_size() const { return size_t{1} * in * batch * side * side; }
  size_t z_size() const { return size_t{1} * out * batch * side * side; }
  size_t w_size() const { return size_t{1} * out * in * kernel * kernel; }
  size_t columns() const { return x_size() * kernel * kernel; }
};

class CnnLayersTest : public ::testing::TestWithParam<Conv> {};

// GEMM tolerance as kernels/layers_test.cc: inputs in [-1, 1], K <= 32 * 25 terms.
constexpr double kGemmAbs = 1e-4;
constexpr double kGemmRel = 1e-4;

TEST_P(CnnLayersTest, ConvolutionMatchesCpu) {
  TAMP_SKIP_WITHOUT_CUDA();
  const Conv s = GetParam();
  const auto x = Random(s.x_size(), 1), w = Random(s.w_size(), 2), dz = Random(s.z_size(), 3);
  std::vector<float> columns(s.columns()), z(s.z_size()), dw(s.w_size()), dx(s.x_size());
  ref::ConvForward(x.data(), w.data(), s.in, s.out, s.batch, s.side, s.kernel, columns.data(),
                   z.data());
  ref::ConvBackwardWeights(dz.data(), columns.data(), s.in, s.out, s.batch, s.side, s.kernel,
                           dw.data());
  const std::vector<float> columns_cpu = columns;
  ref::ConvBackwardData(w.data(), dz.data(), s.in, s.out, s.batch, s.side, s.kernel,
                        columns.data(), dx.data());

  auto cublas = CublasHandle::Create();
  ASSERT_TRUE(cublas.ok()) << cublas.status();
  DeviceArray<float> d_x, d_w, d_dz, d_columns, d_z, d_dw, d_dx;
  ASSERT_TRUE(ToDevice(x, &d_x));
  ASSERT_TRUE(ToDevice(w, &d_w));
  ASSERT_TRUE(ToDevice(dz, &d_dz));
  ASSERT_TRUE(Scratch(s.columns(), &d_columns));
  ASSERT_TRUE(Scratch(s.z_size(), &d_z));
  ASSERT_TRUE(Scratch(s.w_size(), &d_dw));
  ASSERT_TRUE(Scratch(s.x_size(), &d_dx));
  ASSERT_TRUE(ConvForward(*cublas, d_x.data(), d_w.data(), s.in, s.out, s.batch, s.side, s.kernel,
                          d_columns.data(), d_z.data(), nullptr)
                  .ok());
  std::vector<float> got;
  ASSERT_TRUE(ToHost(d_columns, &got));
  EXPECT_TRUE(CompareBitwise("im2col", got, columns_cpu));
  ASSERT_TRUE(ToHost(d_z, &got));
  EXPECT_TRUE(CompareClose("z", got, z, kGemmAbs, kGemmRel));

  ASSERT_TRUE(ConvBackwardWeights(*cublas, d_dz.data(), d_columns.data(), s.in, s.out, s.batch,
                                  s.side, s.kernel, d_dw.data(), nullptr)
                  .ok());
  ASSERT_TRUE(ToHost(d_dw, &got));
  EXPECT_TRUE(CompareClose("dW", got, dw, kGemmAbs, kGemmRel));

  ASSERT_TRUE(ConvBackwardData(*cublas, d_w.data(), d_dz.data(), s.in, s.out, s.batch, s.side,
                               s.kernel, d_columns.data(), d_dx.data(), nullptr)
                  .ok());
  ASSERT_TRUE(ToHost(d_dx, &got));
  EXPECT_TRUE(CompareClose("dx", got, dx, kGemmAbs, kGemmRel));
}

// Col2Im alone is bit-exact: the same additions in the same order.
TEST_P(CnnLayersTest, Col2ImMatchesCpuBitForBit) {
  TAMP_SKIP_WITHOUT_CUDA();
  const Conv s = GetParam();
  const auto col = Random(s.columns(), 4);
  std::vector<float> in(s.x_size());
  ref::Col2Im(col.data(), s.in, s.batch, s.side, s.kernel, in.data());
  DeviceArray<float> d_col, d_in;
  ASSERT_TRUE(ToDevice(col, &d_col));
  ASSERT_TRUE(Scratch(s.x_size(), &d_in));
  ASSERT_TRUE(Col2Im(d_col.data(), s.in, s.batch, s.side, s.kernel, d_in.data(), nullptr).ok());
  std::vector<float> got;
  ASSERT_TRUE(ToHost(d_in, &got));
  EXPECT_TRUE(CompareBitwise("col2im", got, in));
}

// Bias + relu, pool forward and backward, bias gradient, flatten and back: one conv block.
TEST_P(CnnLayersTest, PoolBlockMatchesCpu) {
  TAMP_SKIP_WITHOUT_CUDA();
  const Conv s = GetParam();
  if (s.side < 2) GTEST_SKIP() << "no pooling below 2x2";
  const size_t n = size_t{1} * s.batch * s.side * s.side;
  const int planes = s.out * s.batch;
  const size_t pooled_plane = size_t{1} * (s.side / 2) * (s.side / 2);
  const size_t pooled_size = planes * pooled_plane;
  auto z = Random(s.z_size(), 5);
  const auto bias = Random(s.out, 6), dout = Random(pooled_size, 7);
  z[0] = -0.0f;  // Passes relu as -0 on both.

  std::vector<float> a = z, pooled(pooled_size), db(s.out), flat(pooled_size),
                     unflat(pooled_size);
  std::vector<uint8_t> argmax(pooled_size);
  ref::ConvBiasRelu(a.data(), bias.data(), s.out, n);
  const std::vector<float> relu_cpu = a;
  ref::MaxPool2x2Forward(a.data(), planes, s.side, pooled.data(), argmax.data());
  ref::FlattenChannelMajor(pooled.data(), s.out, s.batch, pooled_plane, flat.data());
  ref::UnflattenChannelMajor(dout.data(), s.out, s.batch, pooled_plane, unflat.data());
  ref::MaxPoolReluBackward(dout.data(), argmax.data(), planes, s.side, a.data());
  ref::ConvBiasGrad(a.data(), s.out, n, db.data());

  DeviceArray<float> d_a, d_bias, d_dout, d_pooled, d_db, d_flat, d_unflat;
  DeviceArray<uint8_t> d_argmax;
  ASSERT_TRUE(ToDevice(z, &d_a));
  ASSERT_TRUE(ToDevice(bias, &d_bias));
  ASSERT_TRUE(ToDevice(dout, &d_dout));
  ASSERT_TRUE(Scratch(pooled_size, &d_pooled));
  ASSERT_TRUE(Scratch(pooled_size, &d_argmax));
  ASSERT_TRUE(Scratch(size_t(s.out), &d_db));
  ASSERT_TRUE(Scratch(pooled_size, &d_flat));
  ASSERT_TRUE(Scratch(pooled_size, &d_unflat));
  ASSERT_TRUE(ConvBiasRelu(d_a.data(), d_bias.data(), s.out, n, nullptr).ok());
  std::vector<float> got;
  ASSERT_TRUE(ToHost(d_a, &got));
  EXPECT_TRUE(CompareBitwise("relu(z + b)", got, relu_cpu));
  ASSERT_TRUE(
      MaxPool2x2Forward(d_a.data(), planes, s.side, d_pooled.data(), d_argmax.data(), nullptr).ok());
  ASSERT_TRUE(ToHost(d_pooled, &got));
  EXPECT_TRUE(CompareBitwise("pooled", got, pooled));
  std::vector<uint8_t> got_argmax;
  ASSERT_TRUE(ToHost(d_argmax, &got_argmax));
  EXPECT_EQ(got_argmax, argmax);
  ASSERT_TRUE(FlattenChannelMajor(d_pooled.data(), s.out, s.batch, pooled_plane, d_flat.data(),
                                  nullptr)
                  .ok());
  ASSERT_TRUE(ToHost(d_flat, &got));
  EXPECT_TRUE(CompareBitwise("flat", got, flat));
  ASSERT_TRUE(UnflattenChannelMajor(d_dout.data(), s.out, s.batch, pooled_plane,
                                    d_unflat.data(), nullptr)
                  .ok());
  ASSERT_TRUE(ToHost(d_unflat, &got));
  EXPECT_TRUE(CompareBitwise("unflat", got, unflat));
  ASSERT_TRUE(MaxPoolReluBackward(d_dout.data(), d_argmax.data(), planes, s.side, d_a.data(),
                                  nullptr)
                  .ok());
  ASSERT_TRUE(ToHost(d_a, &got));
  EXPECT_TRUE(CompareBitwise("dz", got, a));
  ASSERT_TRUE(ConvBiasGrad(d_a.data(), s.out, n, d_db.data(), nullptr).ok());
  ASSERT_TRUE(ToHost(d_db, &got));
  EXPECT_TRUE(CompareClose("db", got, db, 1e-6, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Shapes, CnnLayersTest,
                         ::testing::Values(Conv{1, 32, 4, 28, 5},  // The example's first layer.
                                           Conv{32, 16, 3, 14, 5},
                                           Conv{2, 3, 3, 7, 3},    // Odd side: a dropped row.
                                           Conv{2, 1, 1, 4, 7},    // Kernel wider than the image.
                                           Conv{3, 2, 2, 3, 1}));  // 1x1.

// Argument checks return before any CUDA call, so they run without a device too.
TEST(CnnLayersArgsTest, BadShapesNameTheArgument) {
  float dummy = 0;
  uint8_t byte = 0;
  const absl::Status even = Im2Col(&dummy, 1, 1, 4, 4, &dummy, nullptr);
  EXPECT_EQ(even.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(even.message(), "kernel must be odd ('same' padding), got 4");
  const absl::Status side = MaxPool2x2Forward(&dummy, 1, 1, &dummy, &byte, nullptr);
  EXPECT_EQ(side.message(), "side must be >= 2 for 2x2 pooling, got 1");
  EXPECT_EQ(ConvBiasGrad(nullptr, 2, 3, &dummy, nullptr).message(), "dz is null");
}

#else

TEST(CnnLayersTest, BuiltWithoutCuda) {
  EXPECT_FALSE(CudaDeviceAvailable());
}

#endif  // TAMP_HAVE_CUDA

}  // namespace
}  // namespace tamp::kernels
