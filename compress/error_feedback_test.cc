#include "compress/error_feedback.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compress/none.h"
#include "compress/topk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

std::unique_ptr<ErrorFeedback> Make(config::ErrorFeedback::Kind kind, size_t n) {
  config::ErrorFeedback spec;
  spec.set_kind(kind);
  absl::StatusOr<std::unique_ptr<ErrorFeedback>> memory = ErrorFeedback::Create(spec, n);
  EXPECT_TRUE(memory.ok()) << memory.status();
  return *std::move(memory);
}

std::vector<float> Decode(const Codec& codec, const std::string& payload) {
  std::vector<float> out(codec.size());
  EXPECT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
  return out;
}

TEST(ErrorFeedbackTest, RejectsUnknownKinds) {
  config::ErrorFeedback spec;
  spec.set_kind(static_cast<config::ErrorFeedback::Kind>(7));
  const absl::Status status = ErrorFeedback::Create(spec, 4).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "error feedback kind 7 is not supported");
}

TEST(ErrorFeedbackTest, NoneKeepsNoResidualAndEncodesTheInputAsIs) {
  const size_t n = 6;
  auto memory = Make(config::ErrorFeedback::NONE, n);
  TopKCodec codec(n, 2);
  const std::vector<float> input = {1, -5, 2, 4, 0, 3};
  std::string payload, direct;
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(memory->Compress(codec, input, {}, &payload).ok());
    EXPECT_TRUE(memory->residual().empty());
    ASSERT_TRUE(codec.Encode(input, {}, &direct).ok());
    EXPECT_EQ(payload, direct);  // Nothing carried over: same bytes every step.
  }
}

// input + old residual == decoded + new residual, to the rounding of the one fp32
// subtraction residual = c - decoded (c = input + old residual is computed in fp32, as the
// implementation does).
void ExpectIdentityOverSteps(Codec& codec, int steps, uint32_t seed) {
  const size_t n = codec.size();
  auto memory = Make(config::ErrorFeedback::RESIDUAL, n);
  ASSERT_EQ(memory->residual().size(), n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> input(n);
  std::string payload;
  for (int step = 0; step < steps; ++step) {
    for (float& x : input) x = normal(rng);
    const std::vector<float> old_residual(memory->residual().begin(), memory->residual().end());
    ASSERT_TRUE(memory->Compress(codec, input, {}, &payload).ok());
    const std::vector<float> decoded = Decode(codec, payload);
    for (size_t i = 0; i < n; ++i) {
      const float c = input[i] + old_residual[i];
      const float residual = memory->residual()[i];
      const double error = std::fabs(double{c} - (double{decoded[i]} + residual));
      ASSERT_LE(error, std::fabs(residual) * std::numeric_limits<float>::epsilon() / 2)
          << "step " << step << " element " << i;
    }
  }
}

TEST(ErrorFeedbackTest, ResidualKeepsTheIdentityWithNone) {
  NoneCodec codec(100);
  ExpectIdentityOverSteps(codec, 5, 1);
}

TEST(ErrorFeedbackTest, ResidualKeepsTheIdentityWithTopK) {
  TopKCodec codec(1000, 37);
  ExpectIdentityOverSteps(codec, 20, 2);
}

TEST(ErrorFeedbackTest, ResidualIsExactlyWhatTopKDidNotSend) {
  auto memory = Make(config::ErrorFeedback::RESIDUAL, 4);
  TopKCodec codec(4, 1);
  std::string payload;
  ASSERT_TRUE(memory->Compress(codec, std::vector<float>{1, -4, 2, 3}, {}, &payload).ok());
  EXPECT_THAT(Decode(codec, payload), testing::ElementsAre(0, -4, 0, 0));
  EXPECT_THAT(memory->residual(), testing::ElementsAre(1, 0, 2, 3));
  // c = {2, -4, 4, 6}: the residual of index 3 now wins.
  ASSERT_TRUE(memory->Compress(codec, std::vector<float>{1, -4, 2, 3}, {}, &payload).ok());
  EXPECT_THAT(Decode(codec, payload), testing::ElementsAre(0, 0, 0, 6));
  EXPECT_THAT(memory->residual(), testing::ElementsAre(2, -4, 4, 0));
}

// A constant gradient through top-1%: entries that lose keep growing in the residual until
// they win, so every entry is sent, and sent + residual is the whole sum.
TEST(ErrorFeedbackTest, TopKWithResidualEventuallySendsEverything) {
  const size_t n = 200;
  const int steps = 400;
  auto memory = Make(config::ErrorFeedback::RESIDUAL, n);
  TopKCodec codec(n, 2);
  std::vector<float> gradient(n);
  for (size_t i = 0; i < n; ++i) gradient[i] = (i % 2 ? -1.0f : 1.0f) * (1.0f + 0.01f * i);
  std::vector<double> sent(n, 0.0);
  std::vector<int> times_sent(n, 0);
  std::string payload;
  for (int step = 0; step < steps; ++step) {
    ASSERT_TRUE(memory->Compress(codec, gradient, {}, &payload).ok());
    const std::vector<float> decoded = Decode(codec, payload);
    for (size_t i = 0; i < n; ++i) {
      sent[i] += decoded[i];
      times_sent[i] += decoded[i] != 0.0f;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    EXPECT_GE(times_sent[i], 1) << "element " << i << " was never sent";
    const double total = double{gradient[i]} * steps;
    EXPECT_NEAR(sent[i] + memory->residual()[i], total, 1e-4 * std::fabs(total)) << i;
  }
}

}  // namespace
}  // namespace tamp::compress
