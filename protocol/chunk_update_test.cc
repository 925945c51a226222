#include "protocol/chunk_update.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compress/topk.h"
#include "gtest/gtest.h"
#include "optim/optimizer.h"

namespace tamp {
namespace {

std::unique_ptr<Optimizer> MakeSgd(size_t n, float momentum = 0.9f) {
  config::Optimizer spec;
  spec.set_name("sgd");
  spec.set_learning_rate(0.1f);
  spec.set_momentum(momentum);
  return *CreateOptimizer(spec, n);
}

std::unique_ptr<compress::ErrorFeedback> MakeMemory(config::ErrorFeedback::Kind kind, size_t n,
                                                    float dgc_momentum = 0.0f) {
  config::ErrorFeedback spec;
  spec.set_kind(kind);
  if (dgc_momentum != 0.0f) spec.set_momentum(dgc_momentum);
  return *compress::ErrorFeedback::Create(spec, n);
}

// The two memories owe the same values, bit for bit.
::testing::AssertionResult SameResidual(const compress::ErrorFeedback& memory,
                                        const compress::ErrorFeedback& reference) {
  const absl::Span<const float> owed = memory.residual(), expected = reference.residual();
  if (owed.size() == expected.size() &&
      std::memcmp(owed.data(), expected.data(), owed.size() * sizeof(float)) == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "the residuals differ";
}

// RESIDUAL takes UpdateChunk()'s added path (the optimizer adds the update into the residual):
// the weights, payloads and memory it leaves are those of the plain path, Apply() into a
// delta and then Compress() of it.
TEST(UpdateChunkTest, ResidualAddedPathSameAsApplyThenCompress) {
  const size_t n = 5000;
  const auto kind = config::ErrorFeedback::RESIDUAL;
  auto optimizer = MakeSgd(n), reference_optimizer = MakeSgd(n);
  auto memory = MakeMemory(kind, n), reference_memory = MakeMemory(kind, n);
  compress::TopKCodec codec(n, 50), reference_codec(n, 50);
  std::vector<float> weights(n), reference_weights(n), update(n), delta(n), gradient(n);
  for (size_t i = 0; i < n; ++i) weights[i] = reference_weights[i] = std::sin(0.1f * i);
  for (int64_t step = 0; step < 5; ++step) {
    for (size_t i = 0; i < n; ++i) gradient[i] = std::cos(0.37f * i + step) / 3;
    const RandomKey key{.seed = 1, .step = static_cast<uint64_t>(step)};
    std::string payload, expected;
    ASSERT_TRUE(UpdateChunk(*optimizer, absl::MakeSpan(weights), gradient, step, 0.05f, *memory,
                            codec, key, absl::MakeSpan(update), &payload)
                    .ok());
    reference_optimizer->Apply(absl::MakeSpan(reference_weights), gradient, step, 0.05f,
                               absl::MakeSpan(delta));
    ASSERT_TRUE(reference_memory->Compress(reference_codec, delta, key, &expected).ok());
    ASSERT_EQ(weights, reference_weights) << "step " << step;
    ASSERT_EQ(payload, expected) << "step " << step;
    ASSERT_TRUE(SameResidual(*memory, *reference_memory)) << "step " << step;
  }
}

// Two steps of a 6-value chunk through top-2, against values worked out by hand from the
// definitions (optim/sgd.h, compress/error_feedback.h). Every value is a multiple of 1/8, so
// fp32 holds each sum and product exactly and the expectations are exact. Weights w0 and
// gradients g0, g1 are the same in every case; ties in magnitude send the lower index.
constexpr size_t kN = 6;
constexpr size_t kK = 2;
using Values = std::vector<float>;
const Values kW0 = {1, -2, 0.5, 3, -1, 0};
const Values kGradients[2] = {{2, 1, -4, 0.5, 1, -2}, {-2, 0, 1, 1, -1, 2}};
constexpr float kLr = 0.5f;

struct Expected {
  Values weights;  // After the step.
  Values sent;     // decode(payload).
  Values owed;     // memory->residual(): RESIDUAL's residual, DGC's v; empty for NONE.
  Values velocity; // DGC's u; empty for the other kinds.
};

// Runs the two steps and compares each with `expected`.
void ExpectSteps(Optimizer& optimizer, compress::ErrorFeedback& memory,
                 const Expected (&expected)[2]) {
  compress::TopKCodec codec(kN, kK);
  Values weights = kW0, update(kN), sent(kN);
  for (int64_t step = 0; step < 2; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    const RandomKey key{.seed = 1, .step = static_cast<uint64_t>(step)};
    std::string payload;
    ASSERT_TRUE(UpdateChunk(optimizer, absl::MakeSpan(weights), kGradients[step], step, kLr,
                            memory, codec, key, absl::MakeSpan(update), &payload)
                    .ok());
    ASSERT_TRUE(codec.Decode(payload, key, absl::MakeSpan(sent)).ok());
    EXPECT_EQ(weights, expected[step].weights);
    EXPECT_EQ(sent, expected[step].sent);
    const absl::Span<const float> owed = memory.residual();
    EXPECT_EQ(Values(owed.begin(), owed.end()), expected[step].owed);
    const absl::Span<const float> velocity = memory.velocity();
    EXPECT_EQ(Values(velocity.begin(), velocity.end()), expected[step].velocity);
  }
}

std::unique_ptr<Optimizer> MakeSgdWithMomentum(float momentum) {
  config::Optimizer spec;
  spec.set_name("sgd");
  spec.set_learning_rate(kLr);
  spec.set_momentum(momentum);
  return *CreateOptimizer(spec, kN);
}

// SGD with momentum 0.5: buf = 0.5 buf + g, w -= 0.5 buf, update d = w_new - w_old.
//   step 0: buf = g0 = {2, 1, -4, 0.5, 1, -2}; w1 = {0, -2.5, 2.5, 2.75, -1.5, 1};
//           d0 = {-1, -0.5, 2, -0.25, -0.5, 1}
//   step 1: buf = {1, 0.5, -2, 0.25, 0.5, -1} + g1 = {-1, 0.5, -1, 1.25, -0.5, 1};
//           w2 = {0.5, -2.75, 3, 2.125, -1.25, 0.5}; d1 = {0.5, -0.25, 0.5, -0.625, 0.25, -0.5}
// NONE sends top-2 of d: step 0 |2| at 2, |-1| at 0 (ties with 5); step 1 |-0.625| at 3,
// |0.5| at 0 (ties with 2 and 5).
// Sums of two sparse pushes whose entries overlap, through GatherSparseAggregate() (each
// nonzero mean once) and UpdateChunkSparse(): the weights, payloads and residual of
// FinishAggregate() over the whole accumulator and UpdateChunk(), and an accumulator left zero.
TEST(UpdateChunkTest, SparseSumsSameAsDense) {
  const size_t n = 5000;
  const auto kind = config::ErrorFeedback::RESIDUAL;
  auto optimizer = MakeSgd(n, 0.0f), reference_optimizer = MakeSgd(n, 0.0f);
  auto memory = MakeMemory(kind, n), reference_memory = MakeMemory(kind, n);
  ASSERT_TRUE(SparseUpdateApplies(optimizer.get(), *memory));
  EXPECT_FALSE(SparseUpdateApplies(MakeSgd(n).get(), *memory));  // Momentum moves them all.
  EXPECT_FALSE(
      SparseUpdateApplies(optimizer.get(), *MakeMemory(config::ErrorFeedback::NONE, n)));
  EXPECT_TRUE(SparseUpdateApplies(nullptr, *memory));  // AGGREGATE: the mean itself.
  compress::TopKCodec push_codec(n, 100), codec(n, 50), reference_codec(n, 50);
  std::vector<float> weights(n), reference_weights(n), update(n), accumulator(n, 0.0f);
  for (size_t i = 0; i < n; ++i) weights[i] = reference_weights[i] = std::sin(0.1f * i);
  compress::SparseEntries gathered;
  for (int64_t step = 0; step < 5; ++step) {
    std::vector<size_t> touched;
    for (int worker = 0; worker < 2; ++worker) {
      for (size_t i = step + worker * 20; i < n; i += 37 + worker) {
        accumulator[i] += std::cos(0.37f * i + step + worker) / 3;
        touched.push_back(i);
      }
    }
    touched.push_back(touched.front());  // A repeat.
    std::vector<float> mean = accumulator;
    push_codec.FinishAggregate(2, absl::MakeSpan(mean));
    const RandomKey key{.seed = 1, .step = static_cast<uint64_t>(step)};
    std::string payload, expected;
    GatherSparseAggregate(absl::MakeSpan(accumulator), touched, push_codec, 2, &gathered);
    const auto nonzero = std::count_if(mean.begin(), mean.end(), [](float v) { return v != 0; });
    ASSERT_EQ(gathered.indices.size(), static_cast<size_t>(nonzero));
    for (size_t j = 0; j < gathered.indices.size(); ++j) {
      ASSERT_EQ(gathered.values[j], mean[gathered.indices[j]]) << j;
    }
    ASSERT_TRUE(UpdateChunkSparse(optimizer.get(), absl::MakeSpan(weights), gathered, 0.05f,
                                  *memory, codec, key, &payload)
                    .ok());
    ASSERT_TRUE(UpdateChunk(*reference_optimizer, absl::MakeSpan(reference_weights), mean, step,
                            0.05f, *reference_memory, reference_codec, key,
                            absl::MakeSpan(update), &expected)
                    .ok());
    ASSERT_EQ(weights, reference_weights) << "step " << step;
    ASSERT_EQ(payload, expected) << "step " << step;
    ASSERT_TRUE(SameResidual(*memory, *reference_memory)) << "step " << step;
    ASSERT_EQ(accumulator, std::vector<float>(n, 0.0f)) << "step " << step;
  }
}

// server.mode AGGREGATE (no optimizer): the mean of sparse sums added into the residual
// leaves the payload and residual of the memory's Compress() of the dense mean.
TEST(UpdateChunkTest, SparseSumsWithoutAnOptimizerSameAsCompressingTheMean) {
  const size_t n = 3000;
  const auto kind = config::ErrorFeedback::RESIDUAL;
  auto memory = MakeMemory(kind, n), reference_memory = MakeMemory(kind, n);
  compress::TopKCodec push_codec(n, 100), codec(n, 40), reference_codec(n, 40);
  std::vector<float> accumulator(n, 0.0f);
  compress::SparseEntries gathered;
  for (int64_t step = 0; step < 4; ++step) {
    std::vector<size_t> touched;
    for (int worker = 0; worker < 3; ++worker) {
      for (size_t i = 2 * step + worker * 11; i < n; i += 29 + worker) {
        accumulator[i] += std::sin(0.21f * i - step + worker) / 5;
        touched.push_back(i);
      }
    }
    std::vector<float> mean = accumulator;
    push_codec.FinishAggregate(3, absl::MakeSpan(mean));
    const RandomKey key{.seed = 2, .step = static_cast<uint64_t>(step)};
    std::string payload, expected;
    GatherSparseAggregate(absl::MakeSpan(accumulator), touched, push_codec, 3, &gathered);
    ASSERT_TRUE(
        UpdateChunkSparse(nullptr, {}, gathered, 0.0f, *memory, codec, key, &payload).ok());
    ASSERT_TRUE(reference_memory->Compress(reference_codec, mean, key, &expected).ok());
    ASSERT_EQ(payload, expected) << "step " << step;
    ASSERT_TRUE(SameResidual(*memory, *reference_memory)) << "step " << step;
    ASSERT_EQ(accumulator, std::vector<float>(n, 0.0f)) << "step " << step;
  }
}

TEST(UpdateChunkTest, NoMemorySendsTopKOfTheMomentumUpdate) {
  auto optimizer = MakeSgdWithMomentum(0.5f);
  auto memory = MakeMemory(config::ErrorFeedback::NONE, kN);
  const Expected expected[2] = {
      {{0, -2.5, 2.5, 2.75, -1.5, 1}, {-1, 0, 2, 0, 0, 0}, {}, {}},
      {{0.5, -2.75, 3, 2.125, -1.25, 0.5}, {0.5, 0, 0, -0.625, 0, 0}, {}, {}},
  };
  ExpectSteps(*optimizer, *memory, expected);
}

// The same updates through RESIDUAL: c = d + r, send top-2 of c, r = c - sent.
//   step 0: c = d0, sent {0: -1, 2: 2}, r = {0, -0.5, 0, -0.25, -0.5, 1}
//   step 1: c = {0.5, -0.75, 0.5, -0.875, -0.25, 0.5}, sent {1: -0.75, 3: -0.875},
//           r = {0.5, 0, 0.5, 0, -0.25, 0.5}
TEST(UpdateChunkTest, ResidualCarriesWhatWasNotSent) {
  auto optimizer = MakeSgdWithMomentum(0.5f);
  auto memory = MakeMemory(config::ErrorFeedback::RESIDUAL, kN);
  const Expected expected[2] = {
      {{0, -2.5, 2.5, 2.75, -1.5, 1}, {-1, 0, 2, 0, 0, 0}, {0, -0.5, 0, -0.25, -0.5, 1}, {}},
      {{0.5, -2.75, 3, 2.125, -1.25, 0.5},
       {0, -0.75, 0, -0.875, 0, 0},
       {0.5, 0, 0.5, 0, -0.25, 0.5},
       {}},
  };
  ExpectSteps(*optimizer, *memory, expected);
}

// DGC momentum correction (m = 0.5) around plain SGD, as the paper pairs them: d = -0.5 g;
// u = 0.5 u + d; v = v + u; send top-2 of v; where sent, u = v = 0.
//   step 0: d0 = {-1, -0.5, 2, -0.25, -0.5, 1} = u = v; sent {0: -1, 2: 2};
//           u = v = {0, -0.5, 0, -0.25, -0.5, 1}; w1 = {0, -2.5, 2.5, 2.75, -1.5, 1}
//   step 1: d1 = {1, 0, -0.5, -0.5, 0.5, -1}; u = {1, -0.25, -0.5, -0.625, 0.25, -0.5};
//           v = {1, -0.75, -0.5, -0.875, -0.25, 0.5}; sent {0: 1, 3: -0.875};
//           u = {0, -0.25, -0.5, 0, 0.25, -0.5}; v = {0, -0.75, -0.5, 0, -0.25, 0.5};
//           w2 = {1, -2.5, 2, 2.25, -1, 0}
TEST(UpdateChunkTest, DgcMomentumCorrectsAndMasksWhatWasSent) {
  auto optimizer = MakeSgdWithMomentum(0.0f);
  auto memory = MakeMemory(config::ErrorFeedback::DGC_MOMENTUM, kN, 0.5f);
  const Expected expected[2] = {
      {{0, -2.5, 2.5, 2.75, -1.5, 1},
       {-1, 0, 2, 0, 0, 0},
       {0, -0.5, 0, -0.25, -0.5, 1},
       {0, -0.5, 0, -0.25, -0.5, 1}},
      {{1, -2.5, 2, 2.25, -1, 0},
       {1, 0, 0, -0.875, 0, 0},
       {0, -0.75, -0.5, 0, -0.25, 0.5},
       {0, -0.25, -0.5, 0, 0.25, -0.5}},
  };
  ExpectSteps(*optimizer, *memory, expected);
}

}  // namespace
}  // namespace tamp
