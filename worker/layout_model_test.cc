#include "worker/layout_model.h"

#include <chrono>
#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

using ::testing::ElementsAre;

std::vector<TensorSpec> Tensors() {
  return *ParseLayout("tamp-layout 1\nw1 256 64\nb1 256\nw2 10 256\n", "t.layout");
}

std::unique_ptr<LayoutModel> Model(const std::string& profile, uint64_t seed = 1) {
  const std::vector<TensorSpec> tensors = Tensors();
  absl::StatusOr<LayerProfile> parsed = ParseProfile(profile, "t.profile", tensors);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return *LayoutModel::Create(tensors, *parsed, seed);
}

double StdDev(absl::Span<const float> values) {
  double sum = 0, squares = 0;
  for (float v : values) {
    sum += v;
    squares += double{v} * v;
  }
  const double mean = sum / values.size();
  return std::sqrt(squares / values.size() - mean * mean);
}

TEST(LayoutModelTest, BackwardOrderAndProfileTime) {
  std::unique_ptr<LayoutModel> model =
      Model("tamp-profile 1\nscale 2\nlayer 5 5 w1 b1\nlayer 5 10 w2\n");
  std::vector<int> order;
  std::vector<double> ready_ms;
  const auto start = std::chrono::steady_clock::now();
  auto since = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  EXPECT_EQ(model->TrainStep(nullptr, nullptr, 0,
                             [&](int t) {
                               order.push_back(t);
                               ready_ms.push_back(since());
                             }),
            0);
  // Last layer first, each tensor once; w2 after forward (20 ms) and its backward (20 ms),
  // the first layer 10 ms later. Sleeps overshoot, never undershoot.
  EXPECT_THAT(order, ElementsAre(2, 1, 0));
  EXPECT_GE(ready_ms[0], 40);
  EXPECT_GE(ready_ms[1], 50);
  EXPECT_LT(ready_ms[1], 50 + 25);  // Generous: a loaded CI machine.
}

TEST(LayoutModelTest, GradientsAreScaledDecayingNoiseThatMovesEachStep) {
  std::unique_ptr<LayoutModel> model = Model("tamp-profile 1\nscale 1\nlayer 0 0 w1 b1 w2\n");
  model->FillGradients(0);
  const std::vector<float> step0(model->grads().begin(), model->grads().end());
  const absl::Span<const float> all(step0);
  // 0.01 / sqrt(fan_in): w1's fan_in is 64, b1's 1, w2's 256.
  EXPECT_NEAR(StdDev(all.subspan(0, 256 * 64)), 0.01 / 8, 0.01 / 8 * 0.05);
  EXPECT_NEAR(StdDev(all.subspan(256 * 64, 256)), 0.01, 0.01 * 0.15);
  EXPECT_NEAR(StdDev(all.subspan(256 * 64 + 256)), 0.01 / 16, 0.01 / 16 * 0.1);
  model->FillGradients(300);  // sqrt(1 + 300 / 100) = 2: half the scale.
  const std::vector<float> step300(model->grads().begin(), model->grads().end());
  EXPECT_NEAR(StdDev(absl::MakeConstSpan(step300).subspan(0, 256 * 64)), 0.01 / 16,
              0.01 / 16 * 0.05);
  int same = 0;
  for (size_t i = 0; i < step0.size(); ++i) same += step0[i] == 2 * step300[i];
  EXPECT_LT(same, 100);  // Rotated: not the same pattern scaled.
  // Deterministic in the seed; another seed, other noise.
  std::unique_ptr<LayoutModel> again = Model("tamp-profile 1\nscale 1\nlayer 0 0 w1 b1 w2\n");
  again->FillGradients(0);
  EXPECT_EQ(std::vector<float>(again->grads().begin(), again->grads().end()), step0);
  std::unique_ptr<LayoutModel> other = Model("tamp-profile 1\nscale 1\nlayer 0 0 w1 b1 w2\n", 2);
  other->FillGradients(0);
  EXPECT_NE(other->grads()[0], step0[0]);
}

}  // namespace
}  // namespace tamp
