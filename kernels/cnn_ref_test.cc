// The CNN's CPU layers (kernels/cnn_ref.h: worker/cnn_cpu's math and the GPU's twins)
// against direct definitions: each convolution against the 7-deep loop of its formula in
// double, the pool against hand-worked planes.
#include "kernels/cnn_ref.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::kernels::ref {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = value(rng);
  return v;
}

// A 'same' convolution's shape and its index maps ([C, B, S, S] activations, W [O, C, K, K]).
struct Conv {
  int in, out, batch, side, kernel;
  int pad() const { return kernel / 2; }
  size_t x_size() const { return size_t{1} * in * batch * side * side; }
  size_t z_size() const { return size_t{1} * out * batch * side * side; }
  size_t w_size() const { return size_t{1} * out * in * kernel * kernel; }
  size_t columns() const { return x_size() * kernel * kernel; }
  size_t act(int c, int b, int y, int x) const {
    return ((size_t{1} * c * batch + b) * side + y) * side + x;
  }
  size_t weight(int o, int c, int ky, int kx) const {
    return ((size_t{1} * o * in + c) * kernel + ky) * kernel + kx;
  }
  bool inside(int y, int x) const { return y >= 0 && y < side && x >= 0 && x < side; }
};

class ConvTest : public ::testing::TestWithParam<Conv> {};

// The float results against the double formulas: float rounding over K <= 2 * 7 * 7 terms of
// magnitude <= 1 stays below 1e-5.
constexpr double kTolerance = 1e-5;

TEST_P(ConvTest, ForwardIsTheConvolution) {
  const Conv s = GetParam();
  const auto x = Random(s.x_size(), 1), w = Random(s.w_size(), 2);
  std::vector<float> columns(s.columns()), z(s.z_size());
  ConvForward(x.data(), w.data(), s.in, s.out, s.batch, s.side, s.kernel, columns.data(),
              z.data());
  for (int o = 0; o < s.out; ++o)
    for (int b = 0; b < s.batch; ++b)
      for (int y = 0; y < s.side; ++y)
        for (int xx = 0; xx < s.side; ++xx) {
          double sum = 0;
          for (int c = 0; c < s.in; ++c)
            for (int ky = 0; ky < s.kernel; ++ky)
              for (int kx = 0; kx < s.kernel; ++kx) {
                const int iy = y + ky - s.pad(), ix = xx + kx - s.pad();
                if (s.inside(iy, ix)) sum += double{w[s.weight(o, c, ky, kx)]} * x[s.act(c, b, iy, ix)];
              }
          ASSERT_NEAR(z[s.act(o, b, y, xx)], sum, kTolerance) << o << " " << b << " " << y << " " << xx;
        }
}

TEST_P(ConvTest, BackwardWeightsIsTheCorrelationOfInputAndGradient) {
  const Conv s = GetParam();
  const auto x = Random(s.x_size(), 3), w = Random(s.w_size(), 4), dz = Random(s.z_size(), 5);
  std::vector<float> columns(s.columns()), z(s.z_size()), dw(s.w_size());
  ConvForward(x.data(), w.data(), s.in, s.out, s.batch, s.side, s.kernel, columns.data(),
              z.data());
  ConvBackwardWeights(dz.data(), columns.data(), s.in, s.out, s.batch, s.side, s.kernel, dw.data());
  for (int o = 0; o < s.out; ++o)
    for (int c = 0; c < s.in; ++c)
      for (int ky = 0; ky < s.kernel; ++ky)
        for (int kx = 0; kx < s.kernel; ++kx) {
          double sum = 0;
          for (int b = 0; b < s.batch; ++b)
            for (int y = 0; y < s.side; ++y)
              for (int xx = 0; xx < s.side; ++xx) {
                const int iy = y + ky - s.pad(), ix = xx + kx - s.pad();
                if (s.inside(iy, ix)) sum += double{dz[s.act(o, b, y, xx)]} * x[s.act(c, b, iy, ix)];
              }
          ASSERT_NEAR(dw[s.weight(o, c, ky, kx)], sum, kTolerance) << o << " " << c << " " << ky << " " << kx;
        }
}

TEST_P(ConvTest, BackwardDataIsTheTransposedConvolution) {
  const Conv s = GetParam();
  const auto w = Random(s.w_size(), 6), dz = Random(s.z_size(), 7);
  std::vector<float> columns(s.columns()), dx(s.x_size());
  ConvBackwardData(w.data(), dz.data(), s.in, s.out, s.batch, s.side, s.kernel, columns.data(),
                   dx.data());
  for (int c = 0; c < s.in; ++c)
    for (int b = 0; b < s.batch; ++b)
      for (int iy = 0; iy < s.side; ++iy)
        for (int ix = 0; ix < s.side; ++ix) {
          double sum = 0;
          for (int o = 0; o < s.out; ++o)
            for (int ky = 0; ky < s.kernel; ++ky)
              for (int kx = 0; kx < s.kernel; ++kx) {
                const int y = iy - ky + s.pad(), xx = ix - kx + s.pad();
                if (s.inside(y, xx)) sum += double{w[s.weight(o, c, ky, kx)]} * dz[s.act(o, b, y, xx)];
              }
          ASSERT_NEAR(dx[s.act(c, b, iy, ix)], sum, kTolerance) << c << " " << b << " " << iy << " " << ix;
        }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvTest,
                         ::testing::Values(Conv{1, 3, 2, 6, 5},    // The first layer's shape.
                                           Conv{2, 3, 3, 5, 3},    // Odd side.
                                           Conv{2, 1, 1, 4, 7},    // Kernel wider than the image.
                                           Conv{3, 2, 2, 3, 1}));  // 1x1.

TEST(CnnRefTest, ConvBiasReluAddsPerChannelThenClamps) {
  std::vector<float> z = {1, -2, 3, -0.5f, 0.25f, -4};  // [2 channels, 3]
  const std::vector<float> bias = {1, 0.5f};
  ConvBiasRelu(z.data(), bias.data(), 2, 3);
  EXPECT_THAT(z, ElementsAre(2, 0, 4, 0, 0.75f, 0));
}

TEST(CnnRefTest, ConvBiasGradSumsEachChannel) {
  const std::vector<float> dz = {1, 2, 3, 0.5f, -1, 0.25f};
  std::vector<float> db(2);
  ConvBiasGrad(dz.data(), 2, 3, db.data());
  EXPECT_THAT(db, ElementsAre(6, -0.25f));
}

// [2 channels, 2 examples, plane 3]: example b's features are channel 0's plane, then 1's.
TEST(CnnRefTest, FlattenPutsEachExamplesChannelsSideBySide) {
  const std::vector<float> in = {0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15};
  std::vector<float> flat(12), back(12);
  FlattenChannelMajor(in.data(), 2, 2, 3, flat.data());
  EXPECT_THAT(flat, ElementsAre(0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15));
  UnflattenChannelMajor(flat.data(), 2, 2, 3, back.data());
  EXPECT_EQ(back, in);
}

// Two 5x5 planes: the 2x2 windows cover rows/columns 0-3; row and column 4 are dropped.
TEST(CnnRefTest, MaxPoolRoutesGradientToTheArgmaxOnly) {
  // clang-format off
  const std::vector<float> in = {
      // Plane 0: a distinct maximum in each window, at a different position.
      1, 5,   2, 0,   9,
      3, 4,   8, 1,   9,
      0, 2,   0, 0,   9,
      7, 1,   0, 3,   9,
      9, 9,   9, 9,   9,
      // Plane 1: window 0 all zero (relu'd), window 1 ties (first wins), window 2 has its
      // maximum at 0, window 3 a negative maximum (cannot follow a relu, still masked).
      0, 0,   6, 6,   1,
      0, 0,   6, 6,   1,
      0, -1, -3, -2,  1,
      -1, 0, -4, -5,  1,
      1, 1,   1, 1,   1};
  // clang-format on
  std::vector<float> out(8);
  std::vector<uint8_t> argmax(8);
  MaxPool2x2Forward(in.data(), 2, 5, out.data(), argmax.data());
  EXPECT_THAT(out, ElementsAre(5, 8, 7, 3, 0, 6, 0, -2));
  EXPECT_THAT(argmax, ElementsAre(1, 2, 2, 3, 0, 0, 0, 1));

  const std::vector<float> dout = {10, 20, 30, 40, 50, 60, 70, 80};
  std::vector<float> a = in;
  MaxPoolReluBackward(dout.data(), argmax.data(), 2, 5, a.data());
  // clang-format off
  EXPECT_THAT(a, ElementsAreArray<float>({
      0, 10,  0, 0,   0,
      0, 0,  20, 0,   0,
      0, 0,   0, 0,   0,
      30, 0,  0, 40,  0,
      0, 0,   0, 0,   0,
      0, 0,  60, 0,   0,
      0, 0,   0, 0,   0,
      0, 0,   0, 0,   0,
      0, 0,   0, 0,   0,
      0, 0,   0, 0,   0}));
  // clang-format on
}

// 'same' 3x3 columns of one 3x3 image: the centre row is the image, the others are shifted
// copies with zeros where the kernel hangs over the border.
TEST(CnnRefTest, Im2ColPadsWithZeros) {
  const std::vector<float> in = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> col(9 * 9);
  Im2Col(in.data(), 1, 1, 3, 3, col.data());
  auto row = [&](int r) {
    return std::vector<float>(col.begin() + 9 * r, col.begin() + 9 * r + 9);
  };
  EXPECT_THAT(row(0), ElementsAre(0, 0, 0, 0, 1, 2, 0, 4, 5));  // (ky, kx) = (0, 0): up-left.
  EXPECT_THAT(row(4), ElementsAreArray(in));                    // Centre.
  EXPECT_THAT(row(5), ElementsAre(2, 3, 0, 5, 6, 0, 8, 9, 0));  // (1, 2): right neighbour.
  EXPECT_THAT(row(8), ElementsAre(5, 6, 0, 8, 9, 0, 0, 0, 0));  // (2, 2): down-right.
}

// Col2Im is Im2Col's adjoint: <Im2Col(x), y> == <x, Col2Im(y)> for any x, y (2 channels,
// batch 3, 6x6, kernels 1, 3, 5 and 7 — the last wider than half the image).
TEST(CnnRefTest, Col2ImIsTheAdjointOfIm2Col) {
  constexpr int kChannels = 2, kBatch = 3, kSide = 6;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int kernel : {1, 3, 5, 7}) {
    const size_t image = kChannels * kBatch * kSide * kSide;
    const size_t columns = image * kernel * kernel;
    std::vector<float> x(image), y(columns), col(columns), back(image);
    for (float& v : x) v = value(rng);
    for (float& v : y) v = value(rng);
    Im2Col(x.data(), kChannels, kBatch, kSide, kernel, col.data());
    Col2Im(y.data(), kChannels, kBatch, kSide, kernel, back.data());
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < columns; ++i) lhs += double{col[i]} * y[i];
    for (size_t i = 0; i < image; ++i) rhs += double{x[i]} * back[i];
    EXPECT_NEAR(lhs, rhs, 1e-4) << "kernel " << kernel;
  }
}

}  // namespace
}  // namespace tamp::kernels::ref
