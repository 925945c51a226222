// Host emulation of the CNN kernels (kernels/cnn_layers.cu) against their CPU twins
// (kernels/cnn_ref.h). Runs on any machine.
//
// The kernels are grid-stride loops over the per-element functions of
// internal/cnn_agent.h. This test calls the same functions for every index, as the threads
// would, and requires the twins' results bit for bit: im2col, col2im (the gather against
// ref::Col2Im's scatter), bias + ReLU (NaN and -0 included), max-pool forward (ties, NaN)
// and backward (odd sides), and the flatten between conv and fc layers. What it cannot
// check is the CUDA plumbing (grids, launches, the bias gradient's tree): cnn_layers_test.cc
// does that on a GPU.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cnn_ref.h"
#include "kernels/cuda_testing.h"
#include "kernels/internal/cnn_agent.h"

namespace tamp::kernels::internal {
namespace {

using testing::CompareBitwise;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = value(rng);
  return v;
}

struct Shape {
  int channels, batch, side, kernel;
  size_t image() const { return size_t{1} * channels * batch * side * side; }
  size_t columns() const { return image() * kernel * kernel; }
};

class CnnAgentTest : public ::testing::TestWithParam<Shape> {};

TEST_P(CnnAgentTest, Im2ColAndCol2ImMatchTheirTwins) {
  const Shape s = GetParam();
  const auto in = Random(s.image(), 1), col = Random(s.columns(), 2);
  std::vector<float> want_col(s.columns()), want_in(s.image());
  ref::Im2Col(in.data(), s.channels, s.batch, s.side, s.kernel, want_col.data());
  ref::Col2Im(col.data(), s.channels, s.batch, s.side, s.kernel, want_in.data());
  std::vector<float> got_col(s.columns()), got_in(s.image());
  for (size_t i = 0; i < got_col.size(); ++i) {
    got_col[i] = Im2ColValue(in.data(), s.channels, s.batch, s.side, s.kernel, i);
  }
  for (size_t i = 0; i < got_in.size(); ++i) {
    got_in[i] = Col2ImValue(col.data(), s.channels, s.batch, s.side, s.kernel, i);
  }
  EXPECT_TRUE(CompareBitwise("im2col", got_col, want_col));
  EXPECT_TRUE(CompareBitwise("col2im", got_in, want_in));
}

TEST_P(CnnAgentTest, BiasReluPoolAndFlattenMatchTheirTwins) {
  const Shape s = GetParam();
  if (s.side < 2) GTEST_SKIP() << "no pooling below 2x2";
  const int planes = s.channels * s.batch;
  const size_t n = size_t{1} * s.batch * s.side * s.side;
  const size_t pooled_plane = size_t{1} * (s.side / 2) * (s.side / 2);
  const size_t pooled = planes * pooled_plane;
  auto z = Random(s.image(), 3);
  const auto bias = Random(s.channels, 4), dout = Random(pooled, 5);
  z[0] = -0.0f;
  z[1] = std::numeric_limits<float>::quiet_NaN();
  if (z.size() > 5) z[5] = z[4];  // A tie inside a window.

  std::vector<float> want_a = z, want_pooled(pooled), want_flat(pooled), want_unflat(pooled);
  std::vector<uint8_t> want_argmax(pooled);
  ref::ConvBiasRelu(want_a.data(), bias.data(), s.channels, n);
  const std::vector<float> relu = want_a;
  ref::MaxPool2x2Forward(want_a.data(), planes, s.side, want_pooled.data(), want_argmax.data());
  ref::FlattenChannelMajor(want_pooled.data(), s.channels, s.batch, pooled_plane,
                           want_flat.data());
  ref::UnflattenChannelMajor(dout.data(), s.channels, s.batch, pooled_plane, want_unflat.data());
  ref::MaxPoolReluBackward(dout.data(), want_argmax.data(), planes, s.side, want_a.data());

  std::vector<float> got_relu(z.size()), got_pooled(pooled), got_flat(pooled),
      got_unflat(pooled), got_dz(z.size());
  std::vector<uint8_t> got_argmax(pooled);
  for (size_t i = 0; i < z.size(); ++i) got_relu[i] = BiasReluValue(z[i], bias[i / n]);
  for (size_t i = 0; i < pooled; ++i) {
    const PoolWinner winner = MaxPoolValue(got_relu.data(), s.side, i);
    got_pooled[i] = winner.value;
    got_argmax[i] = winner.argmax;
  }
  for (size_t i = 0; i < pooled; ++i) {
    const size_t flat = FlatIndex(s.channels, s.batch, pooled_plane, i);
    got_flat[flat] = got_pooled[i];
    got_unflat[i] = dout[flat];
  }
  for (size_t i = 0; i < z.size(); ++i) {
    got_dz[i] = MaxPoolReluBackwardValue(dout.data(), got_argmax.data(), s.side, relu[i], i);
  }
  EXPECT_TRUE(CompareBitwise("relu(z + b)", got_relu, relu));
  EXPECT_TRUE(CompareBitwise("pooled", got_pooled, want_pooled));
  EXPECT_EQ(got_argmax, want_argmax);
  EXPECT_TRUE(CompareBitwise("flat", got_flat, want_flat));
  EXPECT_TRUE(CompareBitwise("unflat", got_unflat, want_unflat));
  EXPECT_TRUE(CompareBitwise("dz", got_dz, want_a));
}

INSTANTIATE_TEST_SUITE_P(Shapes, CnnAgentTest,
                         ::testing::Values(Shape{1, 3, 28, 5},  // The example's first layer.
                                           Shape{4, 2, 14, 5},
                                           Shape{2, 3, 7, 3},   // Odd side: a dropped row.
                                           Shape{2, 1, 4, 7},   // Kernel wider than the image.
                                           Shape{3, 2, 3, 1},   // 1x1, odd side.
                                           Shape{1, 1, 1, 3})); // 1x1 image: no pooling.

}  // namespace
}  // namespace tamp::kernels::internal
