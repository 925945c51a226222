// Shard with a multi-round push codec: fc2.weight [10, 4] of the test job (2 workers, SGD
// lr 0.5, pull "none") pushes with powersgd. Two workers go through both rounds of a step;
// a rank-1 gradient in one row makes every operation exact, so the step is bit-for-bit the
// closed form w - lr * (g0 + g1) / 2. Also: bad pushes of either round leave the state
// bit-identical, rounds must come in order, rank-2 steps match the mean to fp32 tolerance,
// concurrent workers match a sequential run bit for bit, and Close() answers parked rounds.
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compress/powersgd.h"
#include "compress/registry.h"
#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "job/config.h"
#include "protocol/keys.h"
#include "server/shard.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::DecodePull;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;
using ::tamp::testing::TestLayout;
using ::testing::HasSubstr;

constexpr float kLr = 0.5f;
constexpr int kWorkers = 2;

// fc2.weight pushes with powersgd at `rank`; every other chunk stays "none".
config::RunConfig RoundsConfig(uint32_t rank) {
  return TestConfig([rank](config::RunConfig& c) {
    config::TensorOverride* override = c.mutable_compression()->add_tensor_overrides();
    override->set_pattern("fc2.weight");
    override->mutable_compression()->mutable_push()->set_name("powersgd");
    override->mutable_compression()->mutable_push()->set_rank(rank);
    override->mutable_compression()->mutable_pull()->set_name("none");
  });
}

uint32_t ChunkOf(const JobLayout& layout, const std::string& tensor) {
  for (const ChunkPlan& plan : layout.chunks) {
    if (layout.tensor_of(plan).name == tensor) return plan.chunk.id;
  }
  LOG(FATAL) << "no tensor " << tensor;
  return 0;
}

// What one PushPullRound's callback was given.
struct Answer {
  int calls = 0;
  absl::Status status;
  uint64_t step = 0;
  bool last_round = false;
  bool had_answer = false;
  std::string update;
  std::string aggregate;
};

Shard::RoundDoneCallback Record(Answer* answer) {
  return [answer](absl::Status status, const Shard::PushAnswer* given) {
    ++answer->calls;
    answer->status = std::move(status);
    answer->had_answer = given != nullptr;
    if (given != nullptr) {
      answer->step = given->step;
      answer->last_round = given->last_round;
      answer->update = *given->update;
      answer->aggregate = *given->aggregate;
    }
  };
}

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  // Empty vectors may hold null data(), and memcmp with null is undefined even for 0 bytes.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void ExpectSameState(const Shard::ChunkSnapshot& a, const Shard::ChunkSnapshot& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.round, b.round);
  EXPECT_TRUE(BitIdentical(a.weights, b.weights));
  EXPECT_TRUE(BitIdentical(a.accumulator, b.accumulator));
  EXPECT_TRUE(BitIdentical(a.pull_residual, b.pull_residual));
  EXPECT_EQ(a.arrived, b.arrived);
}

// The matrix of the message `message` of `round` (header, uint32 round, fp32 values).
std::vector<float> MessageValues(const std::string& message) {
  const size_t offset = compress::kHeaderBytes + 4;
  std::vector<float> values((message.size() - offset) / sizeof(float));
  std::memcpy(values.data(), message.data() + offset, values.size() * sizeof(float));
  return values;
}

// The shard holding fc2.weight and the two workers' push codecs for it.
class Rig {
 public:
  explicit Rig(uint32_t rank)
      : config_(RoundsConfig(rank)),
        layout_(TestLayout(config_)),
        chunk_(ChunkOf(layout_, "fc2.weight")),
        n_(layout_.chunks[chunk_].chunk.length) {
    shard_ = NewShard();
    for (int w = 0; w < kWorkers; ++w) workers_.push_back(NewWorkerCodec());
  }

  std::unique_ptr<Shard> NewShard() const {
    absl::StatusOr<std::unique_ptr<Shard>> shard =
        Shard::Create(config_, layout_, layout_.chunks[chunk_].chunk.shard);
    CHECK(shard.ok()) << shard.status();
    return *std::move(shard);
  }

  // A worker's push codec for the chunk, built as the trainer builds it.
  std::unique_ptr<compress::Codec> NewWorkerCodec() const {
    const ChunkPlan& plan = layout_.chunks[chunk_];
    auto codec = compress::CreateCodec(
        plan.compression.push(),
        compress::ChunkShapeInTensor(layout_.tensor_of(plan).shape, plan.chunk.offset, n_));
    CHECK(codec.ok()) << codec.status();
    return *std::move(codec);
  }

  Shard::ChunkSnapshot Snapshot() const {
    absl::StatusOr<Shard::ChunkSnapshot> snapshot = shard_->Snapshot(chunk_);
    CHECK(snapshot.ok()) << snapshot.status();
    return *std::move(snapshot);
  }

  std::string Round0(uint32_t worker, uint64_t step, const std::vector<float>& gradient) {
    std::string payload;
    const absl::Status status = workers_[worker]->EncodeRound(
        0, gradient, "", PushKey(config_, step, chunk_, worker), &payload);
    CHECK(status.ok()) << status;
    return payload;
  }
  std::string Round1(uint32_t worker, uint64_t step, const std::string& answer0) {
    std::string payload;
    const absl::Status status = workers_[worker]->EncodeRound(
        1, {}, answer0, PushKey(config_, step, chunk_, worker), &payload);
    CHECK(status.ok()) << status;
    return payload;
  }

  // Both workers through both rounds of `step`; returns worker 0's final answer.
  Answer RunStep(uint64_t step, const std::vector<float>& g0, const std::vector<float>& g1) {
    Answer a0, a1, b0, b1;
    shard_->PushPullRound(0, step, 0, chunk_, Round0(0, step, g0), Record(&a0));
    shard_->PushPullRound(1, step, 0, chunk_, Round0(1, step, g1), Record(&a1));
    EXPECT_TRUE(a0.status.ok()) << a0.status;
    EXPECT_EQ(a0.aggregate, a1.aggregate);
    shard_->PushPullRound(1, step, 1, chunk_, Round1(1, step, a1.aggregate), Record(&b1));
    shard_->PushPullRound(0, step, 1, chunk_, Round1(0, step, a0.aggregate), Record(&b0));
    EXPECT_TRUE(b0.status.ok()) << b0.status;
    EXPECT_EQ(b0.update, b1.update);
    EXPECT_EQ(b0.aggregate, b1.aggregate);
    for (int w = 0; w < kWorkers; ++w) {
      EXPECT_TRUE(workers_[w]->FinishRounds(b0.aggregate, PushKey(config_, step, chunk_, w), {}).ok());
    }
    return b0;
  }

  static std::vector<float> SgdStep(const std::vector<float>& w, const std::vector<float>& g0,
                                    const std::vector<float>& g1) {
    std::vector<float> out(w.size());
    for (size_t i = 0; i < w.size(); ++i) out[i] = w[i] - kLr * ((g0[i] + g1[i]) / 2);
    return out;
  }

  // A [10, 4] gradient whose only non-zero row is `row`: rank 1, multiples of 1/64.
  std::vector<float> RowGradient(size_t row, uint64_t step, uint32_t worker) const {
    std::vector<float> g(n_, 0.0f);
    const std::vector<float> values = TestGradient(4, step, worker);
    for (size_t k = 0; k < 4; ++k) g[row * 4 + k] = values[k];
    return g;
  }

  const config::RunConfig config_;
  const JobLayout layout_;
  const uint32_t chunk_;
  const size_t n_;
  std::unique_ptr<Shard> shard_;
  std::vector<std::unique_ptr<compress::Codec>> workers_;
};

class ShardRoundsTest : public ::testing::Test, public Rig {
 protected:
  ShardRoundsTest() : Rig(1) {}
};

class ShardRank2Test : public ::testing::Test, public Rig {
 protected:
  ShardRank2Test() : Rig(2) {}
};

TEST_F(ShardRoundsTest, TheChunkIsA10By4MatrixOnItsShard) {
  EXPECT_EQ(n_, 40u);
  EXPECT_EQ(layout_.chunks[chunk_].compression.push().name(), "powersgd");
  auto* codec = static_cast<compress::PowerSgdCodec*>(workers_[0].get());
  EXPECT_EQ(codec->view().rows, 10u);
  EXPECT_EQ(codec->view().cols, 4u);
  const Shard::ChunkSnapshot snapshot = Snapshot();
  EXPECT_EQ(snapshot.round, 0u);
  EXPECT_EQ(snapshot.accumulator.size(), 10u);  // P: [10, 1].
}

TEST_F(ShardRoundsTest, BothRoundsOfAStepAreTheClosedForm) {
  const std::vector<float> w0 = Snapshot().weights;
  const std::vector<float> g0 = RowGradient(0, 0, 0);
  const std::vector<float> g1 = RowGradient(0, 0, 1);

  // Round 0: parked until both workers pushed, then both get P̂ = +-e0 exactly.
  Answer a0, a1;
  shard_->PushPullRound(0, 0, 0, chunk_, Round0(0, 0, g0), Record(&a0));
  EXPECT_EQ(a0.calls, 0);
  EXPECT_EQ(Snapshot().arrived, std::vector<bool>({true, false}));
  shard_->PushPullRound(1, 0, 0, chunk_, Round0(1, 0, g1), Record(&a1));
  ASSERT_EQ(a0.calls, 1);
  ASSERT_EQ(a1.calls, 1);
  ASSERT_TRUE(a0.status.ok()) << a0.status;
  ASSERT_TRUE(a1.status.ok()) << a1.status;
  EXPECT_FALSE(a0.last_round);
  EXPECT_EQ(a0.step, 0u);  // Not completed yet.
  EXPECT_TRUE(a0.update.empty());
  EXPECT_EQ(a0.aggregate, a1.aggregate);
  EXPECT_EQ(a0.aggregate.size(), 16u + 4 * 10);
  const std::vector<float> p_hat = MessageValues(a0.aggregate);
  ASSERT_EQ(p_hat.size(), 10u);
  EXPECT_EQ(std::fabs(p_hat[0]), 1.0f);
  for (size_t i = 1; i < 10; ++i) EXPECT_EQ(p_hat[i], 0.0f) << i;
  Shard::ChunkSnapshot mid = Snapshot();
  EXPECT_EQ(mid.step, 0u);
  EXPECT_EQ(mid.round, 1u);
  EXPECT_EQ(mid.arrived, std::vector<bool>({false, false}));
  EXPECT_EQ(mid.accumulator, std::vector<float>(4, 0.0f));  // Q: [4, 1].
  EXPECT_TRUE(BitIdentical(mid.weights, w0));

  // Round 1: Q_i = M_iᵀ P̂ = +-row 0 of g_i, Q̄ their mean, G = P̂ Q̄ᵀ = (g0 + g1) / 2.
  Answer b0, b1;
  shard_->PushPullRound(1, 0, 1, chunk_, Round1(1, 0, a1.aggregate), Record(&b1));
  EXPECT_EQ(b1.calls, 0);
  shard_->PushPullRound(0, 0, 1, chunk_, Round1(0, 0, a0.aggregate), Record(&b0));
  ASSERT_TRUE(b0.status.ok()) << b0.status;
  ASSERT_TRUE(b1.status.ok()) << b1.status;
  EXPECT_TRUE(b0.last_round);
  EXPECT_EQ(b0.step, 1u);
  EXPECT_EQ(b0.update, b1.update);
  EXPECT_EQ(b0.aggregate, b1.aggregate);
  const std::vector<float> q_bar = MessageValues(b0.aggregate);
  ASSERT_EQ(q_bar.size(), 4u);
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(q_bar[k] * p_hat[0], (g0[k] + g1[k]) / 2) << k;

  const std::vector<float> w1 = SgdStep(w0, g0, g1);
  const Shard::ChunkSnapshot after = Snapshot();
  EXPECT_TRUE(BitIdentical(after.weights, w1));
  EXPECT_EQ(after.step, 1u);
  EXPECT_EQ(after.round, 0u);
  EXPECT_EQ(after.accumulator, std::vector<float>(10, 0.0f));
  EXPECT_EQ(after.arrived, std::vector<bool>({false, false}));
  std::vector<float> expected_update(n_);
  for (size_t i = 0; i < n_; ++i) expected_update[i] = w1[i] - w0[i];
  EXPECT_TRUE(BitIdentical(DecodePull(config_, layout_, 0, chunk_, b0.update), expected_update));

  // Both workers keep the same warm start for step 1.
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_TRUE(workers_[w]->FinishRounds(b0.aggregate, PushKey(config_, 0, chunk_, w), {}).ok());
  }
  const auto q0 = static_cast<compress::PowerSgdCodec*>(workers_[0].get())->warm_start();
  const auto q1 = static_cast<compress::PowerSgdCodec*>(workers_[1].get())->warm_start();
  EXPECT_EQ(std::vector<float>(q0.begin(), q0.end()), std::vector<float>(q1.begin(), q1.end()));
}

TEST_F(ShardRoundsTest, StepsRepeatWithTheWarmStart) {
  std::vector<float> w = Snapshot().weights;
  for (uint64_t step = 0; step < 4; ++step) {
    // A different row each step: the warm-started Q must still find it.
    const std::vector<float> g0 = RowGradient(step % 10, step, 0);
    const std::vector<float> g1 = RowGradient(step % 10, step, 1);
    const Answer answer = RunStep(step, g0, g1);
    ASSERT_TRUE(answer.status.ok()) << answer.status;
    ASSERT_EQ(answer.step, step + 1);
    w = SgdStep(w, g0, g1);
    ASSERT_TRUE(BitIdentical(Snapshot().weights, w)) << "step " << step;
  }
  EXPECT_EQ(Snapshot().step, 4u);
}

TEST_F(ShardRoundsTest, BadPushesOfEitherRoundAreRejectedAndLeaveTheStateAlone) {
  const std::vector<float> g0 = RowGradient(2, 0, 0);
  const std::vector<float> g1 = RowGradient(2, 0, 1);
  const std::vector<float> w0 = Snapshot().weights;
  Answer first;
  const std::string round0_of_1 = Round0(1, 0, g1);
  shard_->PushPullRound(0, 0, 0, chunk_, Round0(0, 0, g0), Record(&first));

  struct Case {
    const char* what;
    uint32_t worker;
    uint64_t step;
    uint32_t round;
    std::string payload;
    absl::StatusCode code;
    std::string message;
  };
  auto check = [&](const std::vector<Case>& cases) {
    const Shard::ChunkSnapshot before = Snapshot();
    for (const Case& c : cases) {
      Answer answer;
      shard_->PushPullRound(c.worker, c.step, c.round, chunk_, c.payload, Record(&answer));
      EXPECT_EQ(answer.calls, 1) << c.what;
      EXPECT_EQ(answer.status.code(), c.code) << c.what << ": " << answer.status;
      EXPECT_THAT(std::string(answer.status.message()), HasSubstr(c.message)) << c.what;
      EXPECT_FALSE(answer.had_answer) << c.what;
      ExpectSameState(Snapshot(), before);
    }
  };
  std::string truncated = round0_of_1;
  truncated.pop_back();
  const std::string id = std::to_string(chunk_);
  check({
      {"round out of range", 1, 0, 2, round0_of_1, absl::StatusCode::kInvalidArgument,
       "chunk " + id + " takes 2 round(s) per step, push was for round 2"},
      {"round 1 during round 0", 1, 0, 1, round0_of_1, absl::StatusCode::kFailedPrecondition,
       "chunk " + id + " is at step 0 round 0, push was for step 0 round 1"},
      {"future step", 1, 1, 0, round0_of_1, absl::StatusCode::kFailedPrecondition,
       "chunk " + id + " is at step 0 round 0, push was for step 1 round 0"},
      {"duplicate", 0, 0, 0, round0_of_1, absl::StatusCode::kAlreadyExists,
       "worker 0 already pushed chunk " + id + " for step 0 round 0"},
      {"truncated", 1, 0, 0, truncated, absl::StatusCode::kInvalidArgument,
       "chunk " + id + " step 0 round 0 worker 1: powersgd payload of round 0 has a 43-byte body"},
      {"empty", 1, 0, 0, "", absl::StatusCode::kInvalidArgument,
       "chunk " + id + " step 0 round 0 worker 1: powersgd payload: payload truncated"},
  });
  // Round 0 then completes as if nothing had happened.
  Answer second;
  shard_->PushPullRound(1, 0, 0, chunk_, round0_of_1, Record(&second));
  ASSERT_TRUE(second.status.ok()) << second.status;
  ASSERT_EQ(first.calls, 1);
  const std::string round1_of_0 = Round1(0, 0, first.aggregate);
  const std::string round1_of_1 = Round1(1, 0, second.aggregate);
  Answer third;
  shard_->PushPullRound(0, 0, 1, chunk_, round1_of_0, Record(&third));

  check({
      {"stale round 0", 1, 0, 0, round0_of_1, absl::StatusCode::kFailedPrecondition,
       "chunk " + id + " is at step 0 round 1, push was for step 0 round 0"},
      {"duplicate round 1", 0, 0, 1, round1_of_1, absl::StatusCode::kAlreadyExists,
       "worker 0 already pushed chunk " + id + " for step 0 round 1"},
      {"round 0 payload as round 1", 1, 0, 1, round0_of_1, absl::StatusCode::kInvalidArgument,
       "chunk " + id + " step 0 round 1 worker 1: powersgd payload of round 1 has a 44-byte body, "
       "expected 20"},
  });
  Answer fourth;
  shard_->PushPullRound(1, 0, 1, chunk_, round1_of_1, Record(&fourth));
  ASSERT_TRUE(fourth.status.ok()) << fourth.status;
  EXPECT_TRUE(BitIdentical(Snapshot().weights, SgdStep(w0, g0, g1)));
}

TEST_F(ShardRoundsTest, OtherChunksAdvanceIndependently) {
  // A "none" chunk of the same shard completes a step while fc2.weight sits in round 1.
  const uint32_t shard_rank = layout_.chunks[chunk_].chunk.shard;
  uint32_t other = chunk_;
  for (uint32_t id : shard_->chunk_ids()) {
    if (id != chunk_) other = id;
  }
  ASSERT_NE(other, chunk_) << "shard " << shard_rank << " has only the powersgd chunk";
  Answer a0, a1;
  shard_->PushPullRound(0, 0, 0, chunk_, Round0(0, 0, RowGradient(1, 0, 0)), Record(&a0));
  shard_->PushPullRound(1, 0, 0, chunk_, Round0(1, 0, RowGradient(1, 0, 1)), Record(&a1));
  ASSERT_TRUE(a1.status.ok());
  const size_t n = layout_.chunks[other].chunk.length;
  Answer o0, o1;
  shard_->PushPullRound(0, 0, 0, other,
                        testing::EncodePush(config_, layout_, 0, other, 0, TestGradient(n, 0, 0)),
                        Record(&o0));
  shard_->PushPullRound(1, 0, 0, other,
                        testing::EncodePush(config_, layout_, 0, other, 1, TestGradient(n, 0, 1)),
                        Record(&o1));
  ASSERT_TRUE(o0.status.ok()) << o0.status;
  EXPECT_TRUE(o0.last_round);
  EXPECT_EQ(o0.step, 1u);
  EXPECT_TRUE(o0.aggregate.empty());  // Single-round codecs answer with the update alone.
  EXPECT_EQ(Snapshot().round, 1u);
}

TEST(ShardRoundsConfigTest, ChunksTooThinForTheRankAndPowerSgdPullsAreRefused) {
  // fc1.bias has 4 values: a 2 x 2 view, too small for rank 3.
  const config::RunConfig config = TestConfig([](config::RunConfig& c) {
    config::TensorOverride* override = c.mutable_compression()->add_tensor_overrides();
    override->set_pattern("fc1.bias");
    override->mutable_compression()->mutable_push()->set_name("powersgd");
    override->mutable_compression()->mutable_push()->set_rank(3);
    override->mutable_compression()->mutable_pull()->set_name("none");
  });
  const JobLayout layout = TestLayout(config);
  const uint32_t bias = ChunkOf(layout, "fc1.bias");
  absl::StatusOr<std::unique_ptr<Shard>> shard =
      Shard::Create(config, layout, layout.chunks[bias].chunk.shard);
  EXPECT_EQ(shard.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(shard.status().message()),
              HasSubstr(absl::StrCat("chunk ", bias, " (fc1.bias): codec 'powersgd': rank 3 needs "
                                     "a matrix of at least 3 x 3, but a vector of 4 values is "
                                     "viewed near-square as 2 x 2")));

  config::RunConfig pull = RoundsConfig(1);
  pull.mutable_compression()->mutable_default_compression()->mutable_pull()->set_name("powersgd");
  pull.mutable_compression()->mutable_default_compression()->mutable_pull()->set_rank(1);
  EXPECT_EQ(ValidateConfig(pull),
            absl::InvalidArgumentError(
                "compression.default_compression.pull.name: codec 'powersgd' takes 2 rounds per "
                "step and can only push; the pull side answers in one"));
}

TEST_F(ShardRank2Test, RankTwoGradientsGiveTheMeanToFp32Tolerance) {
  // Both workers' gradients have their column space in span(a, b): the mean has rank 2.
  std::vector<float> w = Snapshot().weights;
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<float> g[kWorkers];
    for (int worker = 0; worker < kWorkers; ++worker) {
      const std::vector<float> x = TestGradient(4, step, worker);
      const std::vector<float> y = TestGradient(4, step + 5, worker);
      g[worker].resize(n_);
      for (size_t i = 0; i < 10; ++i) {
        for (size_t k = 0; k < 4; ++k) {
          g[worker][i * 4 + k] = (i + 1.0f) * x[k] + (i % 3 - 1.0f) * y[k];
        }
      }
    }
    ASSERT_TRUE(RunStep(step, g[0], g[1]).status.ok());
    w = SgdStep(w, g[0], g[1]);
    const std::vector<float> actual = Snapshot().weights;
    for (size_t i = 0; i < n_; ++i) ASSERT_NEAR(actual[i], w[i], 1e-5) << step << " " << i;
  }
}

TEST_F(ShardRank2Test, ConcurrentWorkersMatchTheSequentialRun) {
  // Each worker thread pushes round 0, waits for its answer, pushes round 1, waits; the
  // shard's answers come from whichever thread completes a round.
  constexpr int kSteps = 6;
  auto gradient = [&](uint64_t step, uint32_t worker) {
    std::vector<float> g = TestGradient(n_, step, worker);
    return g;
  };
  // Sequential reference on a second shard, with its own worker codecs.
  std::vector<float> reference;
  {
    Rig sequential(2);
    for (uint64_t step = 0; step < kSteps; ++step) {
      ASSERT_TRUE(sequential.RunStep(step, gradient(step, 0), gradient(step, 1)).status.ok());
    }
    reference = sequential.Snapshot().weights;
  }
  std::vector<std::string> errors(kWorkers);
  auto worker = [&](uint32_t rank) {
    for (uint64_t step = 0; step < kSteps; ++step) {
      std::string previous;
      for (uint32_t round = 0; round < 2; ++round) {
        std::mutex mu;
        std::condition_variable done;
        bool answered = false;
        absl::Status status;
        std::string aggregate;
        const std::string payload =
            round == 0 ? Round0(rank, step, gradient(step, rank)) : Round1(rank, step, previous);
        shard_->PushPullRound(rank, step, round, chunk_, payload,
                              [&](absl::Status s, const Shard::PushAnswer* answer) {
                                std::lock_guard<std::mutex> lock(mu);
                                status = std::move(s);
                                if (answer != nullptr) aggregate = *answer->aggregate;
                                answered = true;
                                done.notify_one();
                              });
        std::unique_lock<std::mutex> lock(mu);
        done.wait(lock, [&] { return answered; });
        if (!status.ok()) {
          errors[rank] = status.ToString();
          return;
        }
        previous = aggregate;
      }
      const absl::Status finished =
          workers_[rank]->FinishRounds(previous, PushKey(config_, step, chunk_, rank), {});
      if (!finished.ok()) errors[rank] = finished.ToString();
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(errors, std::vector<std::string>(kWorkers));
  EXPECT_TRUE(BitIdentical(Snapshot().weights, reference));
  EXPECT_EQ(Snapshot().step, static_cast<uint64_t>(kSteps));
}

TEST_F(ShardRoundsTest, CloseFailsParkedPushesOfLaterRounds) {
  Answer a0, a1, parked, later;
  shard_->PushPullRound(0, 0, 0, chunk_, Round0(0, 0, RowGradient(0, 0, 0)), Record(&a0));
  shard_->PushPullRound(1, 0, 0, chunk_, Round0(1, 0, RowGradient(0, 0, 1)), Record(&a1));
  shard_->PushPullRound(0, 0, 1, chunk_, Round1(0, 0, a0.aggregate), Record(&parked));
  EXPECT_EQ(parked.calls, 0);
  shard_->Close(absl::UnavailableError("server shutting down"));
  EXPECT_EQ(parked.calls, 1);
  EXPECT_EQ(parked.status, absl::UnavailableError("server shutting down"));
  EXPECT_FALSE(parked.had_answer);
  shard_->PushPullRound(1, 0, 1, chunk_, Round1(1, 0, a1.aggregate), Record(&later));
  EXPECT_EQ(later.status, absl::UnavailableError("server shutting down"));
}

}  // namespace
}  // namespace tamp
