#include "worker/grad_clip.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace tamp {
namespace {

double Norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return std::sqrt(sum);
}

TEST(GradClipTest, ThresholdScalesWithInverseSqrtOfWorkers) {
  EXPECT_DOUBLE_EQ(LocalClipThreshold(2.0, 1), 2.0);
  EXPECT_DOUBLE_EQ(LocalClipThreshold(2.0, 4), 1.0);
}

TEST(GradClipTest, AboveTheThresholdTheNormBecomesTheThreshold) {
  std::vector<float> grad(1000);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>(std::sin(0.1 * i));
  const double before = Norm(grad);
  const double threshold = before / 8;
  const float scale = ClipScale(grad, threshold);
  EXPECT_NEAR(scale, 0.125f, 1e-6f);
  for (float& g : grad) g *= scale;
  EXPECT_NEAR(Norm(grad), threshold, 1e-5 * threshold);
}

TEST(GradClipTest, AtOrBelowTheThresholdTheGradientIsUnchanged) {
  const std::vector<float> grad = {3.0f, -4.0f};  // Norm 5.
  EXPECT_EQ(ClipScale(grad, 5.0), 1.0f);
  EXPECT_EQ(ClipScale(grad, 100.0), 1.0f);
  EXPECT_EQ(ClipScale({}, 1.0), 1.0f);
  EXPECT_FLOAT_EQ(ClipScale(grad, 2.5), 0.5f);
}

TEST(GradClipTest, NonFiniteNormsAreNotScaled) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ClipScale(std::vector<float>{1.0f, nan}, 0.1), 1.0f);
  EXPECT_EQ(ClipScale(std::vector<float>{inf, 1.0f}, 0.1), 1.0f);
}

}  // namespace
}  // namespace tamp
