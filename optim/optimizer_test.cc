// Closed-form checks of "sgd" and "adam" against values computed by hand from
// torch.optim.SGD's and torch.optim.Adam's rules. Hyper-parameters and inputs are dyadic
// (0.5, 0.25, ...) wherever possible so every intermediate is exact in fp32 and the
// comparisons can be exact; Adam's square roots need a tolerance.
#include "optim/optimizer.h"

#include <cmath>
#include <cstring>
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

config::Optimizer Adam(float lr, float beta1, float beta2, float epsilon = 1e-8f,
                       float weight_decay = 0) {
  config::Optimizer spec;
  spec.set_name("adam");
  spec.set_learning_rate(lr);
  spec.set_beta1(beta1);
  spec.set_beta2(beta2);
  spec.set_epsilon(epsilon);
  spec.set_weight_decay(weight_decay);
  return spec;
}

// Applies `gradients` (one per step, each as long as w) at the constant rate
// spec.learning_rate() and returns w.
std::vector<float> Train(const config::Optimizer& spec, std::vector<float> w,
                         const std::vector<std::vector<float>>& gradients) {
  auto optimizer = Create(spec, w.size());
  for (size_t step = 0; step < gradients.size(); ++step) {
    optimizer->Apply(absl::MakeSpan(w), gradients[step], static_cast<int64_t>(step),
                     spec.learning_rate());
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
  a->Apply(absl::MakeSpan(wa), g, 0, 0.5f);
  a->Apply(absl::MakeSpan(wa), g, 1, 0.5f);
  b->Apply(absl::MakeSpan(wb), g, 0, 0.5f);  // A fresh buffer: buf = g, not 0.5 * 1.5 + g.
  EXPECT_EQ(wa[0], -0.25f);
  EXPECT_EQ(wb[0], 0.5f);
}

TEST(SgdTest, UsesTheRateItIsGiven) {
  // The spec's learning_rate is the schedule's base; each step uses the rate passed in.
  // lr 0.25, 0.5, 0.125, momentum 0.5, g = 1: buf 1, 1.5, 1.75;
  //   w = 1 - 0.25 = 0.75;  0.75 - 0.75 = 0;  0 - 0.21875 = -0.21875.
  auto optimizer = Create(Sgd(4.0f, 0.5f), 1);
  std::vector<float> w = {1.0f};
  const std::vector<float> g = {1.0f};
  optimizer->Apply(absl::MakeSpan(w), g, 0, 0.25f);
  EXPECT_EQ(w[0], 0.75f);
  optimizer->Apply(absl::MakeSpan(w), g, 1, 0.5f);
  EXPECT_EQ(w[0], 0.0f);
  optimizer->Apply(absl::MakeSpan(w), g, 2, 0.125f);
  EXPECT_EQ(w[0], -0.21875f);
}

TEST(AdamTest, ClosedFormSteps) {
  // lr 0.1, beta1 0.5, beta2 0.75, g = 1, -1, 2 from w = 1 (t = step + 1):
  //   t 1: m 0.5,    v 0.25,     1-b1^t 0.5,   1-b2^t 0.25;     m^ 1,    v^ 1
  //        w = 1 - 0.1 * 1 / 1                         = 0.9
  //   t 2: m -0.25,  v 0.4375,   1-b1^t 0.75,  1-b2^t 0.4375;   m^ -1/3, v^ 1
  //        w = 0.9 + 0.1 / 3                           = 14/15 = 0.93333...
  //   t 3: m 0.875,  v 1.328125, 1-b1^t 0.875, 1-b2^t 0.578125; m^ 1,    v^ 85/37
  //        w = 14/15 - 0.1 * sqrt(37/85)               = 0.86735651...
  // (epsilon 1e-8 moves each value by < 1e-8.)
  const config::Optimizer spec = Adam(0.1f, 0.5f, 0.75f);
  EXPECT_NEAR(Train(spec, {1.0f}, {{1.0f}})[0], 0.9, 1e-6);
  EXPECT_NEAR(Train(spec, {1.0f}, {{1.0f}, {-1.0f}})[0], 14.0 / 15, 1e-6);
  EXPECT_NEAR(Train(spec, {1.0f}, {{1.0f}, {-1.0f}, {2.0f}})[0],
              14.0 / 15 - 0.1 * std::sqrt(37.0 / 85), 1e-6);
}

TEST(AdamTest, BiasCorrectionMakesEveryStepOfAConstantGradientMoveByLr) {
  // Without correction the first step would move by lr * (1 - b1) / sqrt(1 - b2) = 3.16 lr;
  // with it m^ = g and v^ = g^2 at every t, so each step moves by lr * g / |g|.
  const config::Optimizer spec = Adam(0.5f, 0.9f, 0.999f);
  for (int steps = 1; steps <= 5; ++steps) {
    const std::vector<std::vector<float>> gradients(steps, {0.25f, -4.0f});
    const std::vector<float> w = Train(spec, {1.0f, 1.0f}, gradients);
    EXPECT_NEAR(w[0], 1.0 - 0.5 * steps, 1e-5) << steps << " steps";
    EXPECT_NEAR(w[1], 1.0 + 0.5 * steps, 1e-5) << steps << " steps";
  }
}

TEST(AdamTest, DefaultsAreTorchs) {
  // beta1 0.9, beta2 0.999 when absent. lr 0.01, g = 1 then 0 from w = 1:
  //   t 1: m 0.1,  v 0.001;    m^ 1,         v^ 1;          w = 0.99
  //   t 2: m 0.09, v 0.000999; m^ 0.09/0.19, v^ 999/1999;
  //        w = 0.99 - 0.01 * (9/19) / sqrt(999/1999) = 0.98329942...
  config::Optimizer spec;
  spec.set_name("adam");
  spec.set_learning_rate(0.01f);
  EXPECT_NEAR(Train(spec, {1.0f}, {{1.0f}, {0.0f}})[0],
              0.99 - 0.01 * (9.0 / 19) / std::sqrt(999.0 / 1999), 1e-6);
}

TEST(AdamTest, WeightDecayIsAnL2TermInTheGradient) {
  // torch.optim.Adam's weight_decay: g = gradient + wd * w, then the usual rule (so, unlike
  // AdamW, the decay is normalised by v^ too). lr 0.1, b1 0.5, b2 0.75, wd 0.5, gradient 0,
  // w = 2:
  //   t 1: g 1;     m 0.5,   v 0.25;      m^ 1,        v^ 1;      w = 1.9
  //   t 2: g 0.95;  m 0.725, v 0.413125;  m^ 0.966667, v^ 0.944286;
  //        w = 1.9 - 0.1 * 0.966667 / 0.971744 = 1.80052246...
  EXPECT_NEAR(Train(Adam(0.1f, 0.5f, 0.75f, 1e-8f, 0.5f), {2.0f}, {{0.0f}, {0.0f}})[0],
              1.8005224628, 1e-6);
}

TEST(AdamTest, EpsilonBoundsTheStepOfATinyGradient) {
  // g = 1e-6 constant, epsilon 1e-6: each step moves by lr * 1e-6 / (1e-6 + 1e-6) = lr / 2.
  const std::vector<float> w =
      Train(Adam(0.5f, 0.5f, 0.5f, 1e-6f), {0.0f}, {{1e-6f}, {1e-6f}, {1e-6f}});
  EXPECT_NEAR(w[0], -0.75, 1e-5);
}

TEST(AdamTest, UsesTheStepItIsGivenForBiasCorrection) {
  // A fresh optimizer told it is at step 1 (t = 2) corrects by 1 - b^2 although its moments
  // hold one gradient: lr 0.1, b1 0.5, b2 0.75, g = 1: m 0.5, v 0.25; m^ 0.5/0.75 = 2/3,
  // v^ 0.25/0.4375 = 4/7; w = 1 - 0.1 * (2/3) / sqrt(4/7) = 0.91180954...
  auto optimizer = Create(Adam(0.1f, 0.5f, 0.75f), 1);
  std::vector<float> w = {1.0f};
  optimizer->Apply(absl::MakeSpan(w), std::vector<float>{1.0f}, 1, 0.1f);
  EXPECT_NEAR(w[0], 1 - 0.1 * (2.0 / 3) / std::sqrt(4.0 / 7), 1e-6);
}

// Each SGD variant (its own branch-free loop) and Adam.
std::vector<config::Optimizer> EveryRuleAndSwitch() {
  return {Sgd(0.1f),
          Sgd(0.1f, 0.9f),
          Sgd(0.1f, 0.9f, true),
          Sgd(0.1f, 0.9f, false, 0.01f),
          Sgd(0.1f, 0, false, 0.01f),
          Adam(0.01f, 0.9f, 0.999f, 1e-8f, 0.01f)};
}

// Apply() with a delta span: the same weights as without, and delta holds exactly the fp32
// difference w_new - w_old of every weight, for every rule and switch (each SGD variant has
// its own branch-free loop). Non-dyadic values, so that rounding would show any difference.
TEST(OptimizerTest, DeltaIsTheExactDifferenceAndLeavesTheUpdateUnchanged) {
  const size_t n = 37;  // Not a multiple of any vector width.
  for (const config::Optimizer& spec : EveryRuleAndSwitch()) {
    auto with_delta = Create(spec, n);
    auto without = Create(spec, n);
    std::vector<float> w(n), reference(n), delta(n);
    for (size_t i = 0; i < n; ++i) w[i] = reference[i] = std::sin(1.0f + i) / 3;
    for (int64_t step = 0; step < 4; ++step) {
      std::vector<float> g(n);
      for (size_t i = 0; i < n; ++i) g[i] = std::cos(0.7f * i + step) / 7;
      const std::vector<float> before = w;
      with_delta->Apply(absl::MakeSpan(w), g, step, 0.3f, absl::MakeSpan(delta));
      without->Apply(absl::MakeSpan(reference), g, step, 0.3f);
      ASSERT_EQ(w, reference) << spec.ShortDebugString() << " step " << step;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(delta[i], w[i] - before[i]) << spec.ShortDebugString() << " i " << i;
      }
    }
  }
}

// DeltaMode::kAdd: the same weights, and delta = (w_new - w_old) + what it held, exactly
// (the sum the pull memory would form, c = update + residual), for every rule and switch.
TEST(OptimizerTest, AddedDeltaIsTheDifferencePlusWhatDeltaHeld) {
  const size_t n = 37;
  for (const config::Optimizer& spec : EveryRuleAndSwitch()) {
    auto adding = Create(spec, n);
    auto storing = Create(spec, n);
    std::vector<float> w(n), reference(n), sum(n), stored(n);
    for (size_t i = 0; i < n; ++i) w[i] = reference[i] = std::sin(1.0f + i) / 3;
    for (int64_t step = 0; step < 4; ++step) {
      std::vector<float> g(n);
      for (size_t i = 0; i < n; ++i) g[i] = std::cos(0.7f * i + step) / 7;
      std::vector<float> held(n);
      for (size_t i = 0; i < n; ++i) held[i] = std::sin(0.3f * i - step) / 11;
      sum = held;
      adding->Apply(absl::MakeSpan(w), g, step, 0.3f, absl::MakeSpan(sum),
                    Optimizer::DeltaMode::kAdd);
      storing->Apply(absl::MakeSpan(reference), g, step, 0.3f, absl::MakeSpan(stored));
      ASSERT_EQ(w, reference) << spec.ShortDebugString() << " step " << step;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(sum[i], stored[i] + held[i]) << spec.ShortDebugString() << " i " << i;
      }
    }
  }
}

TEST(OptimizerTest, OnlyPlainSgdKeepsZeroGradientWeights) {
  for (const config::Optimizer& spec : EveryRuleAndSwitch()) {
    const bool plain = spec.name() == "sgd" && spec.momentum() == 0 && spec.weight_decay() == 0;
    EXPECT_EQ(Create(spec, 4)->KeepsZeroGradientWeights(), plain) << spec.ShortDebugString();
  }
  EXPECT_TRUE(Create(Sgd(0.1f), 4)->KeepsZeroGradientWeights());
  EXPECT_FALSE(Create(Sgd(0.1f, 0, false, 1e-4f), 4)->KeepsZeroGradientWeights());
}

TEST(OptimizerTest, SparseApplyMovesWhatTheDenseApplyMovesBitForBit) {
  // A gradient that is zero but at a few entries (given in no order), against Apply() of
  // it dense with an added delta: the same weights and delta, every bit.
  const size_t n = 1000;
  auto sparse = Create(Sgd(0.3f), n);
  auto dense = Create(Sgd(0.3f), n);
  std::vector<float> w(n), reference(n), delta(n), reference_delta(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = reference[i] = std::sin(1.0f + i) / 3;
    delta[i] = reference_delta[i] = i % 3 == 0 ? 0.0f : std::cos(0.1f * i) / 5;
  }
  for (int64_t step = 0; step < 3; ++step) {
    std::vector<size_t> indices;
    std::vector<float> values;
    std::vector<float> g(n, 0.0f);
    for (size_t i = (7 * step + 3) % 11; i < n; i += 11) {
      indices.insert(indices.begin(), i);  // Descending: any order serves.
      values.insert(values.begin(), std::cos(0.7f * i + step) / 7);
      g[i] = values.front();
    }
    sparse->ApplySparse(absl::MakeSpan(w), indices, values, 0.05f, absl::MakeSpan(delta));
    dense->Apply(absl::MakeSpan(reference), g, step, 0.05f, absl::MakeSpan(reference_delta),
                 Optimizer::DeltaMode::kAdd);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(&w[i], &reference[i], sizeof(float)), 0)
          << "step " << step << " i " << i;
      ASSERT_EQ(std::memcmp(&delta[i], &reference_delta[i], sizeof(float)), 0)
          << "step " << step << " i " << i;
    }
  }
}

TEST(OptimizerDeathTest, SparseApplyOfARuleThatMovesZeroGradientWeightsIsAProgrammerError) {
  std::vector<float> w(4), delta(4);
  const std::vector<size_t> indices = {1};
  const std::vector<float> values = {0.5f};
  EXPECT_DEATH(Create(Sgd(0.1f, 0.9f), 4)->ApplySparse(absl::MakeSpan(w), indices, values,
                                                       0.1f, absl::MakeSpan(delta)),
               "momentum or weight decay");
  EXPECT_DEATH(Create(Adam(1e-3f, 0.9f, 0.999f), 4)
                   ->ApplySparse(absl::MakeSpan(w), indices, values, 0.1f, absl::MakeSpan(delta)),
               "KeepsZeroGradientWeights");
}

TEST(ValidateOptimizerSpecTest, AcceptsSgdAndAdam) {
  EXPECT_TRUE(ValidateOptimizerSpec(Sgd(0.1f, 0.9f, true, 1e-4f)).ok());
  EXPECT_TRUE(ValidateOptimizerSpec(Adam(1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f)).ok());
  config::Optimizer defaults;
  defaults.set_name("adam");
  defaults.set_learning_rate(1e-3f);
  EXPECT_TRUE(ValidateOptimizerSpec(defaults).ok());
}

TEST(ValidateOptimizerSpecTest, ErrorsNameTheField) {
  struct Case {
    config::Optimizer spec;
    std::string message;
  };
  config::Optimizer adamw = Sgd(0.1f);
  adamw.set_name("adamw");
  config::Optimizer sgd_with_beta = Sgd(0.1f);
  sgd_with_beta.set_beta2(0.99f);
  config::Optimizer adam_with_momentum = Adam(0.1f, 0.9f, 0.999f);
  adam_with_momentum.set_momentum(0.9f);
  config::Optimizer adam_with_nesterov = Adam(0.1f, 0.9f, 0.999f);
  adam_with_nesterov.set_nesterov(true);
  config::Optimizer bad_schedule = Adam(0.1f, 0.9f, 0.999f);
  bad_schedule.mutable_schedule()->set_kind(config::Schedule::STEP);
  bad_schedule.mutable_schedule()->set_decay_factor(2);
  const Case cases[] = {
      {adamw, "optimizer.name: unknown optimizer 'adamw' (known: sgd, adam)"},
      {Sgd(0), "optimizer.learning_rate: must be > 0"},
      {Sgd(-1), "optimizer.learning_rate: must be > 0"},
      {Sgd(std::numeric_limits<float>::infinity()), "optimizer.learning_rate: must be > 0"},
      {Sgd(0.1f, -0.5f), "optimizer.momentum: must be in [0, 1)"},
      {Sgd(0.1f, 1.0f), "optimizer.momentum: must be in [0, 1)"},
      {Sgd(0.1f, std::numeric_limits<float>::quiet_NaN()), "optimizer.momentum"},
      {Sgd(0.1f, 0, true), "optimizer.nesterov: requires momentum > 0"},
      {Sgd(0.1f, 0, false, -1e-4f), "optimizer.weight_decay: must be >= 0"},
      {sgd_with_beta, "optimizer.beta2: not used by sgd (only by adam)"},
      {adam_with_momentum, "optimizer.momentum: not used by adam"},
      {adam_with_nesterov, "optimizer.nesterov: not used by adam"},
      {Adam(0.1f, 1.0f, 0.999f), "optimizer.beta1: must be in [0, 1), got 1"},
      {Adam(0.1f, 0.9f, -0.5f), "optimizer.beta2: must be in [0, 1), got -0.5"},
      {Adam(0.1f, 0.9f, std::numeric_limits<float>::quiet_NaN()), "optimizer.beta2"},
      {Adam(0.1f, 0.9f, 0.999f, 0), "optimizer.epsilon: must be > 0 and finite, got 0"},
      {Adam(0.1f, 0.9f, 0.999f, 1e-8f, -1), "optimizer.weight_decay: must be >= 0"},
      // The schedule is validated too (optim/schedule_test.cc has its cases).
      {bad_schedule, "optimizer.schedule.decay_factor: must be in (0, 1], got 2"},
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
