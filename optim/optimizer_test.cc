// Closed-form checks of "sgd" against values computed by hand from torch.optim.SGD's rule.
// Hyper-parameters and inputs are dyadic (0.5, 0.25, ...) wherever possible so every
// intermediate is exact in fp32 and the comparisons can be exact.
#include "optim/optimizer.h"

#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

config::Optimizer Sgd(float lr, float momentum = 0, bool nesterov = false, float weight_decay = 0) {
  config::Optimizer spec;
  spec.set_name("sgd");
  spec.set_learning_rate(lr);
  spec.set_momentum(momentum);
  spec.set_nesterov(nesterov);
  spec.set_weight_decay(weight_decay);
  return spec;
}

std::unique_ptr<Optimizer> Create(const config::Optimizer& spec, size_t n) {
  auto optimizer = CreateOptimizer(spec, n);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return std::move(optimizer).value();
}

// Applies `gradients` (one per step, each broadcast to every element) and returns w.
std::vector<float> Train(const config::Optimizer& spec, std::vector<float> w,
                         const std::vector<std::vector<float>>& gradients) {
  auto optimizer = Create(spec, w.size());
  for (size_t step = 0; step < gradients.size(); ++step) {
    optimizer->Apply(absl::MakeSpan(w), gradients[step], static_cast<int64_t>(step));
  }
  return w;
}

TEST(SgdTest, Plain) {
  // w -= 0.5 * g, three times: w0 - 1.5 g.
  const std::vector<float> g = {0.5f, 1.0f};
  EXPECT_THAT(Train(Sgd(0.5f), {1.0f, -2.0f}, {g, g, g}), ElementsAre(0.25f, -3.5f));
}

TEST(SgdTest, Momentum) {
  // lr 0.5, momentum 0.5, g = 1:
  //   buf 1,    w = 1     - 0.5 * 1    = 0.5
  //   buf 1.5,  w = 0.5   - 0.5 * 1.5  = -0.25
  //   buf 1.75, w = -0.25 - 0.5 * 1.75 = -1.125
  EXPECT_THAT(Train(Sgd(0.5f, 0.5f), {1.0f}, {{1.0f}, {1.0f}, {1.0f}}), ElementsAre(-1.125f));
}

TEST(SgdTest, Nesterov) {
  // lr 0.5, momentum 0.5, g = 1; d = g + 0.5 * buf:
  //   buf 1,    d 1.5,   w = 1      - 0.75   = 0.25
  //   buf 1.5,  d 1.75,  w = 0.25   - 0.875  = -0.625
  //   buf 1.75, d 1.875, w = -0.625 - 0.9375 = -1.5625
  EXPECT_THAT(Train(Sgd(0.5f, 0.5f, true), {1.0f}, {{1.0f}, {1.0f}, {1.0f}}),
              ElementsAre(-1.5625f));
}

TEST(SgdTest, NesterovWithVaryingGradientMatchesTorchValues) {
  // lr 0.1, momentum 0.9, g = 0.5, -0.25, 1 (not exact in fp32, so a tolerance):
  //   buf 0.5,  d 0.95,   w = 1     - 0.095  = 0.905
  //   buf 0.2,  d -0.07,  w = 0.905 + 0.007  = 0.912
  //   buf 1.18, d 2.062,  w = 0.912 - 0.2062 = 0.7058
  const std::vector<float> w = Train(Sgd(0.1f, 0.9f, true), {1.0f}, {{0.5f}, {-0.25f}, {1.0f}});
  EXPECT_NEAR(w[0], 0.7058f, 1e-6);
}

TEST(SgdTest, WeightDecay) {
  // lr 0.5, weight decay 0.5, g = 0: w *= 1 - 0.25 each step; 0.75^3 = 0.421875.
  EXPECT_THAT(Train(Sgd(0.5f, 0, false, 0.5f), {1.0f, -2.0f}, {{0, 0}, {0, 0}, {0, 0}}),
              ElementsAre(0.421875f, -0.84375f));
}

TEST(SgdTest, WeightDecayEntersTheMomentumBuffer) {
  // lr 0.5, momentum 0.5, weight decay 0.5, g = 1; d = g + 0.5 w:
  //   d 1.5,     buf 1.5,     w = 1       - 0.75     = 0.25
  //   d 1.125,   buf 1.875,   w = 0.25    - 0.9375   = -0.6875
  //   d 0.65625, buf 1.59375, w = -0.6875 - 0.796875 = -1.484375
  EXPECT_THAT(Train(Sgd(0.5f, 0.5f, false, 0.5f), {1.0f}, {{1.0f}, {1.0f}, {1.0f}}),
              ElementsAre(-1.484375f));
}

TEST(SgdTest, EachInstanceOwnsItsMomentum) {
  auto a = Create(Sgd(0.5f, 0.5f), 1);
  auto b = Create(Sgd(0.5f, 0.5f), 1);
  std::vector<float> wa = {1.0f}, wb = {1.0f};
  const std::vector<float> g = {1.0f};
  a->Apply(absl::MakeSpan(wa), g, 0);
  a->Apply(absl::MakeSpan(wa), g, 1);
  b->Apply(absl::MakeSpan(wb), g, 0);  // A fresh buffer: buf = g, not 0.5 * 1.5 + g.
  EXPECT_EQ(wa[0], -0.25f);
  EXPECT_EQ(wb[0], 0.5f);
}

TEST(ValidateOptimizerSpecTest, AcceptsSgd) {
  EXPECT_TRUE(ValidateOptimizerSpec(Sgd(0.1f, 0.9f, true, 1e-4f)).ok());
}

TEST(ValidateOptimizerSpecTest, ErrorsNameTheField) {
  struct Case {
    config::Optimizer spec;
    std::string message;
  };
  config::Optimizer adamw = Sgd(0.1f);
  adamw.set_name("adamw");
  const Case cases[] = {
      {adamw, "optimizer.name: unknown optimizer 'adamw' (known: sgd)"},
      {Sgd(0), "optimizer.learning_rate: must be > 0"},
      {Sgd(-1), "optimizer.learning_rate: must be > 0"},
      {Sgd(std::numeric_limits<float>::infinity()), "optimizer.learning_rate: must be > 0"},
      {Sgd(0.1f, -0.5f), "optimizer.momentum: must be in [0, 1)"},
      {Sgd(0.1f, 1.0f), "optimizer.momentum: must be in [0, 1)"},
      {Sgd(0.1f, std::numeric_limits<float>::quiet_NaN()), "optimizer.momentum"},
      {Sgd(0.1f, 0, true), "optimizer.nesterov: requires momentum > 0"},
      {Sgd(0.1f, 0, false, -1e-4f), "optimizer.weight_decay: must be >= 0"},
  };
  for (const Case& c : cases) {
    const absl::Status status = ValidateOptimizerSpec(c.spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
    // CreateOptimizer validates too.
    EXPECT_EQ(CreateOptimizer(c.spec, 4).status(), status);
  }
}

}  // namespace
}  // namespace tamp
