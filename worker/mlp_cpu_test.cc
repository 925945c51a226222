#include "worker/mlp_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
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
using ::testing::HasSubstr;

std::vector<TensorSpec> MlpTensors(const std::vector<uint32_t>& hidden) {
  config::Model model;
  model.set_kind(config::Model::MLP);
  for (uint32_t h : hidden) model.add_hidden(h);
  auto tensors = ModelTensors(model);
  CHECK(tensors.ok()) << tensors.status();
  return *tensors;
}

std::unique_ptr<MlpCpu> CreateMlp(const std::vector<uint32_t>& hidden, int max_batch) {
  auto mlp = MlpCpu::Create(MlpTensors(hidden), max_batch);
  CHECK(mlp.ok()) << mlp.status();
  return *std::move(mlp);
}

using testing::RandomInputs;
using testing::RandomizeParams;

// The same model in double precision, written plainly: mean softmax cross-entropy of `params`
// (laid out like MlpCpu::params()) on a batch.
double ReferenceLoss(const MlpCpu& mlp, const std::vector<double>& params,
                     const std::vector<float>& x, const std::vector<uint8_t>& labels) {
  const int layers = static_cast<int>(mlp.tensors().size()) / 2;
  double total = 0.0;
  for (size_t i = 0; i < labels.size(); ++i) {
    std::vector<double> a(x.begin() + i * kImageSize, x.begin() + (i + 1) * kImageSize);
    for (int l = 0; l < layers; ++l) {
      const TensorSpec& weight = mlp.tensors()[2 * l];
      const int64_t n_out = weight.shape[0], n_in = weight.shape[1];
      const double* w = &params[mlp.tensor_offset(2 * l)];
      const double* b = &params[mlp.tensor_offset(2 * l + 1)];
      std::vector<double> z(n_out);
      for (int64_t o = 0; o < n_out; ++o) {
        z[o] = b[o];
        for (int64_t k = 0; k < n_in; ++k) z[o] += w[o * n_in + k] * a[k];
        if (l + 1 < layers) z[o] = std::max(z[o], 0.0);
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

class GradientCheckTest : public ::testing::TestWithParam<std::vector<uint32_t>> {};

// Every analytic gradient against a central difference of the double-precision reference
// (step 1e-5: truncation ~1e-10, rounding ~1e-11, both negligible). The float gradients, of
// magnitude up to ~2, must agree within 3e-6 + 1e-4 * |reference|; float rounding in the
// 784-long dot products and the softmax gives at most 5.3e-7 here (measured), while an error
// of 0.1% in dloss/dlogits already fails.
TEST_P(GradientCheckTest, MatchesCentralDifferences) {
  constexpr int kBatch = 3;
  auto mlp = CreateMlp(GetParam(), kBatch);
  RandomizeParams(*mlp, /*seed=*/7);
  const std::vector<float> x = RandomInputs(kBatch, /*seed=*/8);
  const std::vector<uint8_t> labels = {2, 9, 2};

  const float loss = mlp->TrainStep(x.data(), labels.data(), kBatch, nullptr);
  std::vector<double> params(mlp->params().begin(), mlp->params().end());
  EXPECT_NEAR(loss, ReferenceLoss(*mlp, params, x, labels), 1e-5 * loss);

  constexpr double kStep = 1e-5;
  int mismatches = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const double saved = params[k];
    params[k] = saved + kStep;
    const double loss_plus = ReferenceLoss(*mlp, params, x, labels);
    params[k] = saved - kStep;
    const double loss_minus = ReferenceLoss(*mlp, params, x, labels);
    params[k] = saved;
    const double expected = (loss_plus - loss_minus) / (2 * kStep);
    const double actual = mlp->grads()[k];
    if (std::abs(actual - expected) > 3e-6 + 1e-4 * std::abs(expected) && ++mismatches <= 10) {
      ADD_FAILURE() << "gradient " << k << ": analytic " << actual << ", central difference "
                    << expected;
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << params.size() << " gradients";
}

INSTANTIATE_TEST_SUITE_P(Hidden, GradientCheckTest,
                         ::testing::Values(std::vector<uint32_t>{5},
                                           std::vector<uint32_t>{6, 4},
                                           std::vector<uint32_t>{}));

TEST(MlpCpuTest, ZeroParamsGiveLogTenAndClosedFormGradients) {
  auto mlp = CreateMlp({5}, 3);
  const std::vector<float> x = RandomInputs(3, 1);
  const std::vector<uint8_t> labels = {0, 3, 3};
  const float loss = mlp->TrainStep(x.data(), labels.data(), 3, nullptr);
  EXPECT_NEAR(loss, std::log(10.0), 1e-6);

  // Softmax is uniform, so dloss/db2[j] = mean_i(0.1 - [label_i == j]). Hidden activations
  // are relu(0) = 0 and W2 = 0, so every other gradient is zero.
  const size_t b2 = mlp->tensor_offset(3);
  for (size_t k = 0; k < mlp->grads().size(); ++k) {
    const int j = static_cast<int>(k - b2);
    const double expected = k < b2 ? 0.0 : 0.1 - (j == 0 ? 1.0 / 3 : j == 3 ? 2.0 / 3 : 0.0);
    EXPECT_NEAR(mlp->grads()[k], expected, 1e-7) << "gradient " << k;
  }
}

// Softmax regression (no hidden layer) with W = 0 and b_j = offset + j: the loss of label y
// is log(sum_j e^j) - y whatever the offset, which must not overflow exp.
TEST(MlpCpuTest, LossOfKnownLogitsIsStableForLargeLogits) {
  double log_sum_exp = 0;
  for (int j = 0; j < 10; ++j) log_sum_exp += std::exp(j);
  log_sum_exp = std::log(log_sum_exp);  // 9.4586...
  const std::vector<uint8_t> labels = {9, 0, 4};
  const double expected = log_sum_exp - (9 + 0 + 4) / 3.0;

  for (float offset : {0.0f, 1000.0f, -1000.0f}) {
    auto mlp = CreateMlp({}, 3);
    for (int j = 0; j < 10; ++j) mlp->params()[mlp->tensor_offset(1) + j] = offset + j;
    const std::vector<float> x = RandomInputs(3, 2);
    EXPECT_NEAR(mlp->TrainStep(x.data(), labels.data(), 3, nullptr), expected, 1e-5)
        << "offset " << offset;
    // The label-9 example is right; label 0 and 4 are not.
    EXPECT_EQ(mlp->CountCorrect(x.data(), labels.data(), 3), 1) << "offset " << offset;
  }
}

TEST(MlpCpuTest, TensorsAreReadyLastLayerFirstAndFinalWhenAnnounced) {
  auto mlp = CreateMlp({8, 6}, 4);
  RandomizeParams(*mlp, 3);
  const std::vector<float> x = RandomInputs(4, 4);
  const std::vector<uint8_t> labels = {1, 2, 3, 4};

  // A step on other labels first, so that a gradient announced before it was computed
  // would still hold that step's different values.
  const std::vector<uint8_t> other_labels = {5, 6, 7, 8};
  mlp->TrainStep(x.data(), other_labels.data(), 4, nullptr);
  std::vector<int> order;
  std::vector<std::vector<float>> at_ready(mlp->tensors().size());
  mlp->TrainStep(x.data(), labels.data(), 4, [&](int t) {
    order.push_back(t);
    at_ready[t].assign(mlp->grads().begin() + mlp->tensor_offset(t),
                       mlp->grads().begin() + mlp->tensor_offset(t) +
                           mlp->tensors()[t].elements());
  });
  EXPECT_THAT(order, ElementsAre(5, 4, 3, 2, 1, 0));
  for (int t = 0; t < 6; ++t) {
    const auto final_grads = mlp->grads().subspan(mlp->tensor_offset(t),
                                                  mlp->tensors()[t].elements());
    EXPECT_TRUE(std::equal(final_grads.begin(), final_grads.end(), at_ready[t].begin(),
                           at_ready[t].end()))
        << "tensor " << t << " changed after on_tensor_ready";
  }
}

// Ten classes, each lighting its own band of 78 pixels (plus noise): full-batch SGD on 30
// examples must lower the loss at every step, by 10x overall, and classify all of them.
TEST(MlpCpuTest, SgdLearnsSeparableProblem) {
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
  auto mlp = CreateMlp({16}, kBatch);
  RandomizeParams(*mlp, 6);

  const float first_loss = mlp->TrainStep(x.data(), labels.data(), kBatch, nullptr);
  float loss = first_loss;
  for (int step = 0; step < 30; ++step) {
    for (size_t k = 0; k < mlp->params().size(); ++k) mlp->params()[k] -= 0.1f * mlp->grads()[k];
    const float previous = loss;
    loss = mlp->TrainStep(x.data(), labels.data(), kBatch, nullptr);
    EXPECT_LT(loss, previous) << "step " << step;
  }
  EXPECT_GT(first_loss, 1.5f);
  EXPECT_LT(loss, 0.1f * first_loss) << "first loss " << first_loss;
  EXPECT_EQ(mlp->CountCorrect(x.data(), labels.data(), kBatch), kBatch);
}

TEST(MlpCpuTest, FlatLayoutFollowsTensorOrder) {
  auto mlp = CreateMlp({5}, 1);
  EXPECT_EQ(mlp->tensor_offset(0), 0u);
  EXPECT_EQ(mlp->tensor_offset(1), 784u * 5);
  EXPECT_EQ(mlp->tensor_offset(2), 784u * 5 + 5);
  EXPECT_EQ(mlp->tensor_offset(3), 784u * 5 + 5 + 5 * 10);
  EXPECT_EQ(mlp->params().size(), 784u * 5 + 5 + 5 * 10 + 10);
  EXPECT_EQ(mlp->grads().size(), mlp->params().size());
}

void ExpectInvalid(std::vector<TensorSpec> tensors, int max_batch, const std::string& message) {
  const auto mlp = MlpCpu::Create(std::move(tensors), max_batch);
  ASSERT_FALSE(mlp.ok());
  EXPECT_EQ(mlp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mlp.status().message(), HasSubstr(message));
}

TEST(MlpCpuTest, CreateRejectsBrokenChains) {
  ExpectInvalid(MlpTensors({5}), 0, "max_batch must be >= 1, got 0");
  ExpectInvalid({}, 1, "an MLP needs (weight, bias) tensor pairs, got 0 tensors");

  auto tensors = MlpTensors({5});
  tensors.pop_back();
  ExpectInvalid(tensors, 1, "got 3 tensors");

  tensors = MlpTensors({5});
  tensors[0].shape = {5, 783};
  ExpectInvalid(tensors, 1,
                "tensor 0 (fc1.weight): expected a weight of shape [out, 784], got shape [5, 783]");

  tensors = MlpTensors({5});
  tensors[1].shape = {4};
  ExpectInvalid(tensors, 1, "tensor 1 (fc1.bias): expected a bias of shape [5], got shape [4]");

  tensors = MlpTensors({5});
  tensors[2].shape = {10, 4};
  ExpectInvalid(tensors, 1, "tensor 2 (fc2.weight): expected a weight of shape [out, 5]");

  tensors = MlpTensors({5});
  std::swap(tensors[0], tensors[1]);
  ExpectInvalid(tensors, 1, "tensor 0 (fc1.bias): expected a weight");

  tensors = MlpTensors({5});
  tensors.resize(2);
  ExpectInvalid(tensors, 1,
                "tensor 0 (fc1.weight): expected the last layer to have 10 outputs, got shape "
                "[5, 784]");
}

TEST(MlpCpuDeathTest, BatchOverMaxBatchIsAProgrammerError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto mlp = CreateMlp({5}, 2);
  const std::vector<float> x = RandomInputs(3, 1);
  const std::vector<uint8_t> labels = {0, 1, 2};
  EXPECT_DEATH(mlp->TrainStep(x.data(), labels.data(), 3, nullptr), "batch <= max_batch_");
}

}  // namespace
}  // namespace tamp
