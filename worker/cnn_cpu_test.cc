#include "worker/cnn_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/model_layout.h"
#include "proto/config.pb.h"
#include "worker/cpu_model_test_util.h"

namespace tamp {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct Shape {
  std::vector<uint32_t> channels;
  uint32_t kernel;
  std::vector<uint32_t> fc_hidden;
};

std::vector<TensorSpec> CnnTensors(const Shape& shape) {
  config::Model model;
  model.set_kind(config::Model::CNN);
  for (uint32_t c : shape.channels) model.add_conv_channels(c);
  model.set_kernel_size(shape.kernel);
  for (uint32_t h : shape.fc_hidden) model.add_fc_hidden(h);
  auto tensors = ModelTensors(model);
  CHECK(tensors.ok()) << tensors.status();
  return *tensors;
}

std::unique_ptr<CnnCpu> CreateCnn(const Shape& shape, int max_batch) {
  auto cnn = CnnCpu::Create(CnnTensors(shape), max_batch);
  CHECK(cnn.ok()) << cnn.status();
  return *std::move(cnn);
}

using testing::RandomInputs;
using testing::RandomizeParams;

// ---------------------------------------------------------------------------------------------
// The same model in double precision, written plainly (direct convolution, one example at a
// time, [channel][y][x]): mean softmax cross-entropy of `params`, laid out like
// CnnCpu::params().
double ReferenceLoss(const CnnCpu& cnn, const std::vector<double>& params,
                     const std::vector<float>& x, const std::vector<uint8_t>& labels) {
  const std::vector<TensorSpec>& tensors = cnn.tensors();
  double total = 0.0;
  for (size_t i = 0; i < labels.size(); ++i) {
    std::vector<double> a(x.begin() + i * kImageSize, x.begin() + (i + 1) * kImageSize);
    int64_t channels = 1, side = kImageSide;
    size_t t = 0;
    for (; tensors[t].shape.size() == 4; t += 2) {  // conv -> relu -> 2x2 max-pool
      const int64_t out = tensors[t].shape[0], k = tensors[t].shape[2], pad = k / 2;
      const double* w = &params[cnn.tensor_offset(t)];
      const double* b = &params[cnn.tensor_offset(t + 1)];
      std::vector<double> z(out * side * side);
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t y = 0; y < side; ++y) {
          for (int64_t xx = 0; xx < side; ++xx) {
            double sum = b[o];
            for (int64_t c = 0; c < channels; ++c) {
              for (int64_t ky = 0; ky < k; ++ky) {
                for (int64_t kx = 0; kx < k; ++kx) {
                  const int64_t iy = y + ky - pad, ix = xx + kx - pad;
                  if (iy < 0 || iy >= side || ix < 0 || ix >= side) continue;
                  sum += w[((o * channels + c) * k + ky) * k + kx] * a[(c * side + iy) * side + ix];
                }
              }
            }
            z[(o * side + y) * side + xx] = std::max(sum, 0.0);
          }
        }
      }
      const int64_t half = side / 2;
      a.assign(out * half * half, 0.0);
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t y = 0; y < half; ++y) {
          for (int64_t xx = 0; xx < half; ++xx) {
            double m = z[(o * side + 2 * y) * side + 2 * xx];
            m = std::max(m, z[(o * side + 2 * y) * side + 2 * xx + 1]);
            m = std::max(m, z[(o * side + 2 * y + 1) * side + 2 * xx]);
            m = std::max(m, z[(o * side + 2 * y + 1) * side + 2 * xx + 1]);
            a[(o * half + y) * half + xx] = m;
          }
        }
      }
      channels = out;
      side = half;
    }
    for (; t < tensors.size(); t += 2) {  // Fully connected, relu between.
      const int64_t n_out = tensors[t].shape[0], n_in = tensors[t].shape[1];
      const double* w = &params[cnn.tensor_offset(t)];
      const double* b = &params[cnn.tensor_offset(t + 1)];
      std::vector<double> z(n_out);
      for (int64_t o = 0; o < n_out; ++o) {
        z[o] = b[o];
        for (int64_t j = 0; j < n_in; ++j) z[o] += w[o * n_in + j] * a[j];
        if (t + 2 < tensors.size()) z[o] = std::max(z[o], 0.0);
      }
      a = std::move(z);
    }
    const double m = *std::max_element(a.begin(), a.end());
    double sum = 0.0;
    for (double v : a) sum += std::exp(v - m);
    total += std::log(sum) + m - a[labels[i]];
  }
  return total / labels.size();
}

class GradientCheckTest : public ::testing::TestWithParam<Shape> {};

// Every analytic gradient (every element of every tensor) against a central difference of
// the double-precision reference (step 1e-5: truncation ~1e-10, rounding ~1e-11). The float
// gradients must agree within 1e-5 + 1e-4 * |reference|; float rounding in the convolution
// and fc sums and the softmax gives at most 1.4e-6 here (measured), while an error of 0.1%
// in dloss/dlogits, a gradient routed to the wrong pool input or an off-by-one im2col shift
// fails by orders of magnitude. The seeds keep every pool window's top two inputs and every
// relu input further than the step's effect from a tie, so the loss is smooth at each probe.
TEST_P(GradientCheckTest, MatchesCentralDifferences) {
  constexpr int kBatch = 2;
  auto cnn = CreateCnn(GetParam(), kBatch);
  RandomizeParams(*cnn, /*seed=*/7);
  const std::vector<float> x = RandomInputs(kBatch, /*seed=*/8);
  const std::vector<uint8_t> labels = {2, 9};

  const float loss = cnn->TrainStep(x.data(), labels.data(), kBatch, nullptr);
  std::vector<double> params(cnn->params().begin(), cnn->params().end());
  EXPECT_NEAR(loss, ReferenceLoss(*cnn, params, x, labels), 1e-5 * loss);

  constexpr double kStep = 1e-5;
  int mismatches = 0;
  double worst = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const double saved = params[k];
    params[k] = saved + kStep;
    const double loss_plus = ReferenceLoss(*cnn, params, x, labels);
    params[k] = saved - kStep;
    const double loss_minus = ReferenceLoss(*cnn, params, x, labels);
    params[k] = saved;
    const double expected = (loss_plus - loss_minus) / (2 * kStep);
    const double actual = cnn->grads()[k];
    worst = std::max(worst, std::abs(actual - expected));
    if (std::abs(actual - expected) > 1e-5 + 1e-4 * std::abs(expected) && ++mismatches <= 10) {
      ADD_FAILURE() << "gradient " << k << ": analytic " << actual << ", central difference "
                    << expected;
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << params.size() << " gradients";
  LOG(INFO) << params.size() << " gradients, largest difference " << worst;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GradientCheckTest,
    ::testing::Values(Shape{{2, 3}, 3, {4}},     // The example's structure, tiny.
                      Shape{{2}, 5, {}},         // One conv, 5x5 kernel, pool to fc directly.
                      Shape{{2, 2, 3}, 3, {}},   // 7x7 pools to 3x3: odd sides drop a row.
                      Shape{{1, 2, 2, 2}, 1, {3}}));  // 1x1 kernels; 4 pools to 1x1.

// ---------------------------------------------------------------------------------------------
// The model.

TEST(CnnCpuTest, ZeroParamsGiveLogTenAndClosedFormGradients) {
  auto cnn = CreateCnn({{2, 3}, 3, {4}}, 3);
  const std::vector<float> x = RandomInputs(3, 1);
  const std::vector<uint8_t> labels = {0, 3, 3};
  const float loss = cnn->TrainStep(x.data(), labels.data(), 3, nullptr);
  EXPECT_NEAR(loss, std::log(10.0), 1e-6);

  // Softmax is uniform, so dloss/db_last[j] = mean_i(0.1 - [label_i == j]). Every activation
  // is relu(0) = 0 and every weight 0, so every other gradient is zero.
  const size_t last_bias = cnn->tensor_offset(7);
  for (size_t k = 0; k < cnn->grads().size(); ++k) {
    const int j = static_cast<int>(k - last_bias);
    const double expected =
        k < last_bias ? 0.0 : 0.1 - (j == 0 ? 1.0 / 3 : j == 3 ? 2.0 / 3 : 0.0);
    EXPECT_NEAR(cnn->grads()[k], expected, 1e-7) << "gradient " << k;
  }
}

TEST(CnnCpuTest, TensorsAreReadyLastLayerFirstAndFinalWhenAnnounced) {
  auto cnn = CreateCnn({{2, 3}, 3, {4}}, 4);
  RandomizeParams(*cnn, 3);
  const std::vector<float> x = RandomInputs(4, 4);
  const std::vector<uint8_t> labels = {1, 2, 3, 4};

  // A step on other labels first, so that a gradient announced before it was computed
  // would still hold that step's different values.
  const std::vector<uint8_t> other_labels = {5, 6, 7, 8};
  cnn->TrainStep(x.data(), other_labels.data(), 4, nullptr);
  std::vector<int> order;
  std::vector<std::vector<float>> at_ready(cnn->tensors().size());
  cnn->TrainStep(x.data(), labels.data(), 4, [&](int t) {
    order.push_back(t);
    at_ready[t].assign(cnn->grads().begin() + cnn->tensor_offset(t),
                       cnn->grads().begin() + cnn->tensor_offset(t) +
                           cnn->tensors()[t].elements());
  });
  EXPECT_THAT(order, ElementsAre(7, 6, 5, 4, 3, 2, 1, 0));
  for (int t = 0; t < 8; ++t) {
    const auto final_grads = cnn->grads().subspan(cnn->tensor_offset(t),
                                                  cnn->tensors()[t].elements());
    EXPECT_TRUE(std::equal(final_grads.begin(), final_grads.end(), at_ready[t].begin(),
                           at_ready[t].end()))
        << "tensor " << t << " changed after on_tensor_ready";
  }
}

// A smaller batch than max_batch uses the buffers compactly: the same examples give the same
// loss and gradients through a model built for a larger batch.
TEST(CnnCpuTest, SmallerBatchMatchesExactlySizedModel) {
  const Shape shape{{2, 3}, 3, {4}};
  auto exact = CreateCnn(shape, 2);
  auto larger = CreateCnn(shape, 5);
  RandomizeParams(*exact, 9);
  RandomizeParams(*larger, 9);
  const std::vector<float> x = RandomInputs(2, 10);
  const std::vector<uint8_t> labels = {4, 1};
  const float loss_exact = exact->TrainStep(x.data(), labels.data(), 2, nullptr);
  const float loss_larger = larger->TrainStep(x.data(), labels.data(), 2, nullptr);
  EXPECT_FLOAT_EQ(loss_exact, loss_larger);
  for (size_t k = 0; k < exact->grads().size(); ++k) {
    ASSERT_NEAR(exact->grads()[k], larger->grads()[k], 1e-6 + 1e-5 * std::abs(exact->grads()[k]))
        << "gradient " << k;
  }
}

// Ten classes, each lighting its own band of 78 pixels (plus noise): full-batch SGD (lr 0.1)
// on 30 examples must lower the loss by 10x in 30 steps (it reaches ~1/300 of the first) and
// classify all of them.
TEST(CnnCpuTest, SgdLearnsSeparableProblem) {
  constexpr int kBatch = 30;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> noise(-0.3f, 0.3f);
  std::vector<float> x(kBatch * kImageSize);
  std::vector<uint8_t> labels(kBatch);
  for (int i = 0; i < kBatch; ++i) {
    labels[i] = i % 10;
    for (int p = 0; p < kImageSize; ++p) {
      x[i * kImageSize + p] = (p / 78 == labels[i] ? 1.5f : -0.5f) + noise(rng);
    }
  }
  auto cnn = CreateCnn({{4, 8}, 3, {}}, kBatch);
  RandomizeParams(*cnn, 6);

  const float first_loss = cnn->TrainStep(x.data(), labels.data(), kBatch, nullptr);
  float loss = first_loss;
  std::vector<float> losses;
  for (int step = 0; step < 30; ++step) {
    for (size_t k = 0; k < cnn->params().size(); ++k) cnn->params()[k] -= 0.1f * cnn->grads()[k];
    loss = cnn->TrainStep(x.data(), labels.data(), kBatch, nullptr);
    losses.push_back(loss);
  }
  EXPECT_GT(first_loss, 1.5f);
  EXPECT_LT(loss, 0.1f * first_loss) << "first loss " << first_loss << ", losses "
                                     << ::testing::PrintToString(losses);
  EXPECT_EQ(cnn->CountCorrect(x.data(), labels.data(), kBatch), kBatch);
}

TEST(CnnCpuTest, FlatLayoutFollowsTensorOrder) {
  auto cnn = CreateCnn({{2, 3}, 3, {4}}, 1);
  const std::vector<size_t> sizes = {2 * 9, 2, 3 * 2 * 9, 3, 4 * 3 * 7 * 7, 4, 10 * 4, 10};
  size_t offset = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    EXPECT_EQ(cnn->tensor_offset(t), offset) << "tensor " << t;
    offset += sizes[t];
  }
  EXPECT_EQ(cnn->params().size(), offset);
  EXPECT_EQ(cnn->grads().size(), offset);
}

void ExpectInvalid(std::vector<TensorSpec> tensors, int max_batch, const std::string& message) {
  const auto cnn = CnnCpu::Create(std::move(tensors), max_batch);
  ASSERT_FALSE(cnn.ok());
  EXPECT_EQ(cnn.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cnn.status().message(), HasSubstr(message));
}

TEST(CnnCpuTest, CreateRejectsBrokenChains) {
  const Shape shape{{2, 3}, 3, {4}};
  ExpectInvalid(CnnTensors(shape), 0, "max_batch must be >= 1, got 0");
  ExpectInvalid({}, 1, "a CNN needs (weight, bias) tensor pairs, got 0 tensors");

  auto tensors = CnnTensors(shape);
  tensors[0].shape = {2, 2, 3, 3};
  ExpectInvalid(tensors, 1,
                "tensor 0 (conv1.weight): expected a conv weight of shape [out, 1, k, k], k odd, "
                "got shape [2, 2, 3, 3]");

  tensors = CnnTensors(shape);
  tensors[2].shape = {3, 2, 4, 4};
  ExpectInvalid(tensors, 1, "tensor 2 (conv2.weight): expected a conv weight of shape [out, 2");

  tensors = CnnTensors(shape);
  tensors[3].shape = {2};
  ExpectInvalid(tensors, 1, "tensor 3 (conv2.bias): expected a bias of shape [3], got shape [2]");

  tensors = CnnTensors(shape);
  tensors[4].shape = {4, 3 * 7 * 7 + 1};
  ExpectInvalid(tensors, 1, "tensor 4 (fc1.weight): expected an fc weight of shape [out, 147]");

  tensors = CnnTensors(shape);
  tensors.resize(6);
  ExpectInvalid(tensors, 1, "tensor 4 (fc1.weight): expected the last layer to have 10 outputs");

  tensors = CnnTensors(shape);
  tensors.resize(4);
  ExpectInvalid(tensors, 1, "a CNN needs fully connected layers after its 2 conv layers");

  // An MLP is not a CNN.
  config::Model mlp;
  mlp.set_kind(config::Model::MLP);
  ExpectInvalid(*ModelTensors(mlp), 1,
                "tensor 0 (fc1.weight): expected a conv weight of shape [out, 1, k, k] first");

  // Five pools would run out of image: 28 -> 14 -> 7 -> 3 -> 1.
  tensors = CnnTensors({{1, 1, 1, 1}, 1, {}});
  tensors.insert(tensors.begin() + 8, {TensorSpec{"conv5.weight", {1, 1, 1, 1}, 1, false},
                                       TensorSpec{"conv5.bias", {1}, 1, true}});
  ExpectInvalid(tensors, 1, "tensor 8 (conv5.weight): expected no conv layer on a 1x1 input");
}

TEST(CnnCpuDeathTest, BatchOverMaxBatchIsAProgrammerError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto cnn = CreateCnn({{2}, 3, {}}, 2);
  const std::vector<float> x = RandomInputs(3, 1);
  const std::vector<uint8_t> labels = {0, 1, 2};
  EXPECT_DEATH(cnn->TrainStep(x.data(), labels.data(), 3, nullptr), "batch <= max_batch_");
}

}  // namespace
}  // namespace tamp
