// Every schedule kind at chosen steps, against values worked out by hand from the formulas in
// schedule.h. The run: base lr 0.5, 10 steps per epoch, 100 steps in all.
#include "optim/schedule.h"

#include <cmath>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optim/optimizer.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kStepsPerEpoch = 10;
constexpr uint64_t kTotalSteps = 100;

config::Optimizer Spec(config::Schedule::Kind kind) {
  config::Optimizer spec;
  spec.set_name("sgd");
  spec.set_learning_rate(0.5f);
  spec.mutable_schedule()->set_kind(kind);
  return spec;
}

config::Optimizer StepDecay(double factor, double epochs) {
  config::Optimizer spec = Spec(config::Schedule::STEP);
  spec.mutable_schedule()->set_decay_factor(factor);
  spec.mutable_schedule()->set_decay_epochs(epochs);
  return spec;
}

config::Optimizer Cosine(double min_lr) {
  config::Optimizer spec = Spec(config::Schedule::COSINE);
  spec.mutable_schedule()->set_min_lr(min_lr);
  return spec;
}

config::Optimizer WithWarmup(config::Optimizer spec, double epochs) {
  spec.mutable_schedule()->set_warmup_epochs(epochs);
  return spec;
}

double Lr(const config::Optimizer& spec, uint64_t step) {
  return LearningRate(spec, step, kStepsPerEpoch, kTotalSteps);
}

TEST(LearningRateTest, ConstantIgnoresTheRunLength) {
  const config::Optimizer spec = Spec(config::Schedule::CONSTANT);
  EXPECT_FALSE(ScheduleNeedsRunLength(spec.schedule()));
  EXPECT_EQ(Lr(spec, 0), 0.5);
  EXPECT_EQ(Lr(spec, 99), 0.5);
  EXPECT_EQ(Lr(spec, 1000), 0.5);
  EXPECT_EQ(LearningRate(spec, 7, 0, 0), 0.5);  // Before any handshake.
  // The rate is the float learning_rate widened exactly, so a float step uses it unchanged.
  config::Optimizer tenth = spec;
  tenth.set_learning_rate(0.1f);
  EXPECT_EQ(static_cast<float>(LearningRate(tenth, 3, 0, 0)), 0.1f);
}

TEST(LearningRateTest, WarmupRampsLinearlyFromOneStepsWorth) {
  // 1 epoch = 10 warm-up steps: step s uses (s + 1) / 10 of 0.5.
  const config::Optimizer spec = WithWarmup(Spec(config::Schedule::CONSTANT), 1);
  EXPECT_TRUE(ScheduleNeedsRunLength(spec.schedule()));
  EXPECT_DOUBLE_EQ(Lr(spec, 0), 0.05);  // Start: 1/10.
  EXPECT_DOUBLE_EQ(Lr(spec, 4), 0.25);  // Middle: 5/10.
  EXPECT_DOUBLE_EQ(Lr(spec, 9), 0.5);   // Last warm-up step: the full rate.
  EXPECT_DOUBLE_EQ(Lr(spec, 10), 0.5);  // After.
  EXPECT_DOUBLE_EQ(Lr(spec, 99), 0.5);
}

TEST(LearningRateTest, FractionalWarmup) {
  // 0.5 epoch = 5 steps: 0.1, 0.2, ..., 0.5.
  const config::Optimizer spec = WithWarmup(Spec(config::Schedule::CONSTANT), 0.5);
  EXPECT_DOUBLE_EQ(Lr(spec, 0), 0.1);
  EXPECT_DOUBLE_EQ(Lr(spec, 2), 0.3);
  EXPECT_DOUBLE_EQ(Lr(spec, 4), 0.5);
  EXPECT_DOUBLE_EQ(Lr(spec, 5), 0.5);
  // 0.04 epoch rounds to 0 steps: no warm-up at all.
  EXPECT_DOUBLE_EQ(Lr(WithWarmup(Spec(config::Schedule::CONSTANT), 0.04), 0), 0.5);
}

TEST(LearningRateTest, StepDecayAtItsBoundaries) {
  // Halve every 3 epochs = 30 steps.
  const config::Optimizer spec = StepDecay(0.5, 3);
  EXPECT_DOUBLE_EQ(Lr(spec, 0), 0.5);
  EXPECT_DOUBLE_EQ(Lr(spec, 29), 0.5);
  EXPECT_DOUBLE_EQ(Lr(spec, 30), 0.25);
  EXPECT_DOUBLE_EQ(Lr(spec, 59), 0.25);
  EXPECT_DOUBLE_EQ(Lr(spec, 60), 0.125);
  EXPECT_DOUBLE_EQ(Lr(spec, 99), 0.0625);
  // decay_factor 1 never decays.
  EXPECT_DOUBLE_EQ(Lr(StepDecay(1, 3), 99), 0.5);
}

TEST(LearningRateTest, StepDecayEveryFractionOfAnEpoch) {
  // 0.5 epoch = 5 steps; 0.01 epoch rounds to 0 steps and decays every step.
  EXPECT_DOUBLE_EQ(Lr(StepDecay(0.5, 0.5), 4), 0.5);
  EXPECT_DOUBLE_EQ(Lr(StepDecay(0.5, 0.5), 5), 0.25);
  EXPECT_DOUBLE_EQ(Lr(StepDecay(0.5, 0.01), 3), 0.0625);
}

TEST(LearningRateTest, StepDecayBoundariesCountFromStepZeroThroughWarmup) {
  // 1 epoch warm-up, then halving every 2 epochs: the first boundary is step 20.
  const config::Optimizer spec = WithWarmup(StepDecay(0.5, 2), 1);
  EXPECT_DOUBLE_EQ(Lr(spec, 0), 0.05);
  EXPECT_DOUBLE_EQ(Lr(spec, 9), 0.5);
  EXPECT_DOUBLE_EQ(Lr(spec, 19), 0.5);
  EXPECT_DOUBLE_EQ(Lr(spec, 20), 0.25);
  // A boundary inside the warm-up scales the ramp: 1.5 epochs of warm-up (15 steps) over a
  // halving every epoch: step 12 uses 13/15 of 0.25.
  EXPECT_DOUBLE_EQ(Lr(WithWarmup(StepDecay(0.5, 1), 1.5), 12), 0.25 * 13 / 15);
}

TEST(LearningRateTest, CosineFromLrToMinLrOverTheRun) {
  const config::Optimizer spec = Cosine(0.1);
  EXPECT_DOUBLE_EQ(Lr(spec, 0), 0.5);
  // A quarter: 0.1 + 0.4 * (1 + cos(pi/4)) / 2.
  EXPECT_DOUBLE_EQ(Lr(spec, 25), 0.1 + 0.2 * (1 + std::sqrt(0.5)));
  EXPECT_NEAR(Lr(spec, 50), 0.3, 1e-15);  // Half: halfway between 0.5 and 0.1.
  // The last step (99) is just above min_lr; min_lr is reached at step 100, the run's end.
  EXPECT_GT(Lr(spec, 99), 0.1);
  EXPECT_NEAR(Lr(spec, 99), 0.1 + 0.2 * (1 + std::cos(M_PI * 0.99)), 1e-15);
  EXPECT_DOUBLE_EQ(Lr(spec, 100), 0.1);
  EXPECT_DOUBLE_EQ(Lr(spec, 1000), 0.1);  // Past the end: stays at min_lr.
  // min_lr defaults to 0.
  EXPECT_NEAR(Lr(Spec(config::Schedule::COSINE), 50), 0.25, 1e-15);
  EXPECT_DOUBLE_EQ(Lr(Spec(config::Schedule::COSINE), 100), 0);
}

TEST(LearningRateTest, CosineStartsWhereWarmupEnds) {
  // 2 epochs = 20 warm-up steps; the cosine spans steps 20..100.
  const config::Optimizer spec = WithWarmup(Cosine(0), 2);
  EXPECT_DOUBLE_EQ(Lr(spec, 0), 0.025);    // 1/20 of 0.5.
  EXPECT_DOUBLE_EQ(Lr(spec, 9), 0.25);     // 10/20.
  EXPECT_DOUBLE_EQ(Lr(spec, 19), 0.5);     // End of warm-up: the full rate.
  EXPECT_DOUBLE_EQ(Lr(spec, 20), 0.5);     // Cosine at 0.
  EXPECT_NEAR(Lr(spec, 60), 0.25, 1e-15);  // Cosine at half: (60 - 20) / 80.
  EXPECT_DOUBLE_EQ(Lr(spec, 100), 0);      // Cosine at its end.
  // A run no longer than its warm-up has no cosine part: min_lr once warm-up is over.
  EXPECT_DOUBLE_EQ(LearningRate(WithWarmup(Cosine(0.1), 2), 25, kStepsPerEpoch, 20), 0.1);
}

TEST(LearningRateTest, UsesStepsPerEpochAndTotalSteps) {
  // The same spec over another run: 4 steps per epoch, 40 steps.
  const config::Optimizer spec = WithWarmup(Cosine(0), 1);
  EXPECT_DOUBLE_EQ(LearningRate(spec, 1, 4, 40), 0.25);                // 2/4 of warm-up.
  EXPECT_NEAR(LearningRate(spec, 22, 4, 40), 0.25, 1e-15);             // (22 - 4) / 36.
  EXPECT_DOUBLE_EQ(LearningRate(StepDecay(0.5, 3), 12, 4, 40), 0.25);  // Boundary at 12.
}

TEST(EpochsToStepsTest, RoundsAndSaturates) {
  EXPECT_EQ(EpochsToSteps(0, 10), 0u);
  EXPECT_EQ(EpochsToSteps(2.5, 10), 25u);
  EXPECT_EQ(EpochsToSteps(0.25, 10), 3u);  // 2.5 rounds away from zero.
  EXPECT_EQ(EpochsToSteps(0.24, 10), 2u);
  EXPECT_EQ(EpochsToSteps(1e30, 10), std::numeric_limits<uint64_t>::max());
}

TEST(ValidateScheduleTest, AcceptsEachKind) {
  EXPECT_TRUE(ValidateSchedule(Spec(config::Schedule::CONSTANT)).ok());
  EXPECT_TRUE(ValidateSchedule(WithWarmup(Spec(config::Schedule::CONSTANT), 0.5)).ok());
  EXPECT_TRUE(ValidateSchedule(StepDecay(0.1, 30)).ok());
  EXPECT_TRUE(ValidateSchedule(StepDecay(1, 0.5)).ok());
  EXPECT_TRUE(ValidateSchedule(WithWarmup(Cosine(0.5), 5)).ok());  // min_lr == lr is allowed.
  EXPECT_TRUE(ValidateSchedule(Spec(config::Schedule::COSINE)).ok());
}

TEST(ValidateScheduleTest, ErrorsNameTheField) {
  struct Case {
    config::Optimizer spec;
    std::string message;
  };
  config::Optimizer unknown_kind = Spec(config::Schedule::CONSTANT);
  unknown_kind.mutable_schedule()->set_kind(static_cast<config::Schedule::Kind>(7));
  config::Optimizer no_factor = Spec(config::Schedule::STEP);
  no_factor.mutable_schedule()->set_decay_epochs(30);
  config::Optimizer no_epochs = Spec(config::Schedule::STEP);
  no_epochs.mutable_schedule()->set_decay_factor(0.1);
  config::Optimizer factor_on_cosine = Cosine(0);
  factor_on_cosine.mutable_schedule()->set_decay_factor(0.1);
  config::Optimizer epochs_on_constant = Spec(config::Schedule::CONSTANT);
  epochs_on_constant.mutable_schedule()->set_decay_epochs(3);
  config::Optimizer min_lr_on_step = StepDecay(0.1, 30);
  min_lr_on_step.mutable_schedule()->set_min_lr(0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const Case cases[] = {
      {unknown_kind, "optimizer.schedule.kind: unknown kind 7 (known: CONSTANT, STEP, COSINE)"},
      {no_factor, "optimizer.schedule.decay_factor: required for kind STEP"},
      {no_epochs, "optimizer.schedule.decay_epochs: required for kind STEP"},
      {StepDecay(0, 30), "optimizer.schedule.decay_factor: must be in (0, 1], got 0"},
      {StepDecay(2, 30), "optimizer.schedule.decay_factor: must be in (0, 1], got 2"},
      {StepDecay(nan, 30), "optimizer.schedule.decay_factor: must be in (0, 1]"},
      {StepDecay(0.1, 0), "optimizer.schedule.decay_epochs: must be > 0 and finite, got 0"},
      {StepDecay(0.1, inf), "optimizer.schedule.decay_epochs: must be > 0 and finite"},
      {factor_on_cosine,
       "optimizer.schedule.decay_factor: only used by kind STEP (kind is COSINE)"},
      {epochs_on_constant,
       "optimizer.schedule.decay_epochs: only used by kind STEP (kind is CONSTANT)"},
      {min_lr_on_step, "optimizer.schedule.min_lr: only used by kind COSINE (kind is STEP)"},
      {Cosine(-0.1), "optimizer.schedule.min_lr: must be in [0, optimizer.learning_rate (0.5)]"},
      {Cosine(0.6),
       "optimizer.schedule.min_lr: must be in [0, optimizer.learning_rate (0.5)], "
       "got 0.6"},
      {WithWarmup(Spec(config::Schedule::CONSTANT), -1),
       "optimizer.schedule.warmup_epochs: must be >= 0 and finite, got -1"},
      {WithWarmup(Cosine(0), nan), "optimizer.schedule.warmup_epochs: must be >= 0 and finite"},
  };
  for (const Case& c : cases) {
    const absl::Status status = ValidateSchedule(c.spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
    // ValidateOptimizerSpec checks the schedule too.
    EXPECT_EQ(ValidateOptimizerSpec(c.spec), status);
  }
}

TEST(LearningRateDeathTest, AScheduleThatNeedsTheRunLengthChecksIt) {
  EXPECT_DEATH(LearningRate(Cosine(0), 0, 0, 100), "run's length");
}

}  // namespace
}  // namespace tamp
