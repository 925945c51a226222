// Shard without gRPC: closed-form updates of a synchronous step with codec "none" and plain
// SGD (lr 0.5, 2 workers), rejection of bad pushes with the state left bit-for-bit alone,
// multi-step runs, and the learning-rate schedule and Adam applied per step.
#include "server/shard.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "optim/schedule.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::Answer;
using ::tamp::testing::DecodePull;
using ::tamp::testing::EncodePush;
using ::tamp::testing::Record;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;
using ::tamp::testing::TestLayout;
using ::testing::HasSubstr;

constexpr float kLr = 0.5f;


// Counts down to zero once; Wait() blocks until then. On std::mutex rather than
// absl::BlockingCounter so that ThreadSanitizer (Debian's Abseil is uninstrumented) sees it.
class Latch {
 public:
  explicit Latch(int count) : count_(count) {}
  void CountDown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ == 0) zero_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    zero_.wait(lock, [this] { return count_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable zero_;
  int count_;
};

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  // Empty vectors may hold null data(), and memcmp with null is undefined even for 0 bytes.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void ExpectSameState(const Shard::ChunkSnapshot& a, const Shard::ChunkSnapshot& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_TRUE(BitIdentical(a.weights, b.weights));
  EXPECT_TRUE(BitIdentical(a.accumulator, b.accumulator));
  EXPECT_TRUE(BitIdentical(a.pull_residual, b.pull_residual));
  EXPECT_EQ(a.arrived, b.arrived);
}

class ShardTest : public ::testing::Test {
 protected:
  ShardTest() : config_(TestConfig()), layout_(TestLayout(config_)) {
    absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config_, layout_, 0);
    CHECK(shard.ok()) << shard.status();
    shard_ = *std::move(shard);
    chunk_ = shard_->chunk_ids().front();
  }

  size_t Length(uint32_t chunk) const { return layout_.chunks[chunk].chunk.length; }

  Shard::ChunkSnapshot Snapshot(uint32_t chunk) const {
    absl::StatusOr<Shard::ChunkSnapshot> snapshot = shard_->Snapshot(chunk);
    CHECK(snapshot.ok()) << snapshot.status();
    return *std::move(snapshot);
  }

  void Push(uint32_t worker, uint64_t step, uint32_t chunk, const std::vector<float>& gradient,
            Answer* answer) {
    shard_->PushPullRound(worker, step, 0, chunk,
                          EncodePush(config_, layout_, step, chunk, worker, gradient),
                          Record(answer));
  }

  // w - lr * (g0 + g1) / 2, in the fp32 operations the server performs.
  static std::vector<float> SgdStep(const std::vector<float>& w, const std::vector<float>& g0,
                                    const std::vector<float>& g1) {
    std::vector<float> out(w.size());
    for (size_t i = 0; i < w.size(); ++i) out[i] = w[i] - kLr * ((g0[i] + g1[i]) / 2);
    return out;
  }

  const config::RunConfig config_;
  const JobLayout layout_;
  std::unique_ptr<Shard> shard_;
  uint32_t chunk_;  // The shard's first chunk.
};

TEST_F(ShardTest, OwnsItsChunksWithInitialWeights) {
  EXPECT_EQ(shard_->chunk_ids(), layout_.ChunksOfShard(0));
  EXPECT_EQ(shard_->step(), 0u);
  for (uint32_t id : shard_->chunk_ids()) {
    const ChunkPlan& plan = layout_.chunks[id];
    std::vector<float> expected(plan.chunk.length);
    InitTensorSlice(layout_.tensor_of(plan), config_.model().init_seed(), plan.chunk.tensor,
                    plan.chunk.offset, absl::MakeSpan(expected));
    EXPECT_TRUE(BitIdentical(Snapshot(id).weights, expected)) << "chunk " << id;
  }
}

TEST_F(ShardTest, RejectsRankOutOfRange) {
  EXPECT_EQ(Shard::Create(config_, layout_, 2).status(),
            absl::InvalidArgumentError("server rank 2 out of range: the job has 2 servers"));
}

TEST_F(ShardTest, OneStepIsTheClosedFormAndBothWorkersGetTheSameBytes) {
  const std::vector<float> w0 = Snapshot(chunk_).weights;
  const std::vector<float> g0 = TestGradient(Length(chunk_), 0, 0);
  const std::vector<float> g1 = TestGradient(Length(chunk_), 0, 1);

  Answer a0, a1;
  Push(0, 0, chunk_, g0, &a0);
  EXPECT_EQ(a0.calls, 0) << "answered before every worker pushed";
  Shard::ChunkSnapshot mid = Snapshot(chunk_);
  EXPECT_TRUE(BitIdentical(mid.accumulator, g0));
  EXPECT_EQ(mid.arrived, std::vector<bool>({true, false}));

  Push(1, 0, chunk_, g1, &a1);
  ASSERT_EQ(a0.calls, 1);
  ASSERT_EQ(a1.calls, 1);
  ASSERT_TRUE(a0.status.ok()) << a0.status;
  ASSERT_TRUE(a1.status.ok()) << a1.status;
  EXPECT_EQ(a0.update, a1.update);
  EXPECT_EQ(a0.step, 1u);
  EXPECT_EQ(a1.step, 1u);

  const std::vector<float> w1 = SgdStep(w0, g0, g1);
  const Shard::ChunkSnapshot after = Snapshot(chunk_);
  EXPECT_TRUE(BitIdentical(after.weights, w1));
  EXPECT_EQ(after.step, 1u);
  EXPECT_TRUE(BitIdentical(after.accumulator, std::vector<float>(Length(chunk_), 0.0f)));
  EXPECT_EQ(after.arrived, std::vector<bool>({false, false}));

  std::vector<float> expected_update(w0.size());
  for (size_t i = 0; i < w0.size(); ++i) expected_update[i] = w1[i] - w0[i];
  EXPECT_TRUE(BitIdentical(DecodePull(config_, layout_, 0, chunk_, a0.update), expected_update));
  // Other chunks did not move.
  EXPECT_EQ(shard_->step(), 0u);
}

TEST_F(ShardTest, BadPushesAreRejectedAndLeaveTheStateAlone) {
  const uint32_t other = layout_.ChunksOfShard(1).front();
  const std::vector<float> g0 = TestGradient(Length(chunk_), 0, 0);
  const std::vector<float> g1 = TestGradient(Length(chunk_), 0, 1);
  const std::vector<float> w0 = Snapshot(chunk_).weights;
  // Mid-step, so a clobbered accumulator or arrival set would show.
  Answer first;
  Push(0, 0, chunk_, g0, &first);
  const Shard::ChunkSnapshot before = Snapshot(chunk_);

  const std::string good = EncodePush(config_, layout_, 0, chunk_, 1, g1);
  std::string wrong_length = EncodePush(config_, layout_, 0, chunk_, 1, g1);
  wrong_length.pop_back();
  struct Case {
    const char* what;
    uint32_t worker;
    uint64_t step;
    uint32_t chunk;
    std::string payload;
    absl::StatusCode code;
    std::string message;
  };
  const Case cases[] = {
      {"worker out of range", 2, 0, chunk_, good, absl::StatusCode::kInvalidArgument,
       "worker 2 out of range: the job has 2 workers"},
      {"no such chunk", 1, 0, 99, good, absl::StatusCode::kInvalidArgument,
       "chunk 99 does not exist: the model has 7 chunks"},
      {"chunk of another shard", 1, 0, other, good, absl::StatusCode::kNotFound,
       absl::StrCat("chunk ", other, " is on shard 1, not on shard 0")},
      {"future step", 1, 2, chunk_, good, absl::StatusCode::kFailedPrecondition,
       absl::StrCat("chunk ", chunk_, " is at step 0, push was for step 2")},
      {"duplicate", 0, 0, chunk_, good, absl::StatusCode::kAlreadyExists,
       absl::StrCat("worker 0 already pushed chunk ", chunk_, " for step 0")},
      {"truncated payload", 1, 0, chunk_, wrong_length, absl::StatusCode::kInvalidArgument,
       absl::StrCat("chunk ", chunk_, " step 0 worker 1: ")},
      {"empty payload", 1, 0, chunk_, "", absl::StatusCode::kInvalidArgument,
       absl::StrCat("chunk ", chunk_, " step 0 worker 1: ")},
      {"payload of another chunk size", 1, 0, chunk_,
       EncodePush(config_, layout_, 0, chunk_, 1, std::vector<float>(Length(chunk_) + 1, 1.0f)),
       absl::StatusCode::kInvalidArgument, absl::StrCat("chunk ", chunk_, " step 0 worker 1: ")},
  };
  for (const Case& c : cases) {
    Answer answer;
    shard_->PushPullRound(c.worker, c.step, 0, c.chunk, c.payload, Record(&answer));
    EXPECT_EQ(answer.calls, 1) << c.what;
    EXPECT_EQ(answer.status.code(), c.code) << c.what << ": " << answer.status;
    EXPECT_THAT(std::string(answer.status.message()), HasSubstr(c.message)) << c.what;
    EXPECT_TRUE(answer.update.empty()) << c.what;
    ExpectSameState(Snapshot(chunk_), before);
  }
  EXPECT_EQ(first.calls, 0);

  // The step then completes as if the bad pushes had never happened.
  Answer second;
  Push(1, 0, chunk_, g1, &second);
  ASSERT_TRUE(second.status.ok()) << second.status;
  EXPECT_EQ(first.calls, 1);
  EXPECT_TRUE(BitIdentical(Snapshot(chunk_).weights, SgdStep(w0, g0, g1)));

  // A push for a step already completed is stale.
  Answer stale;
  Push(1, 0, chunk_, g1, &stale);
  EXPECT_EQ(stale.status, absl::FailedPreconditionError(absl::StrCat(
                              "chunk ", chunk_, " is at step 1, push was for step 0")));
}

TEST_F(ShardTest, MultiStepRunOfEveryChunk) {
  constexpr int kSteps = 4;
  std::vector<std::vector<float>> expected;  // Indexed like chunk_ids().
  for (uint32_t id : shard_->chunk_ids()) expected.push_back(Snapshot(id).weights);
  for (uint64_t step = 0; step < kSteps; ++step) {
    for (size_t k = 0; k < shard_->chunk_ids().size(); ++k) {
      const uint32_t id = shard_->chunk_ids()[k];
      const std::vector<float> g0 = TestGradient(Length(id), step + id, 0);
      const std::vector<float> g1 = TestGradient(Length(id), step + id, 1);
      // Worker 1 first this time: arrival order must not matter.
      Answer a1, a0;
      Push(1, step, id, g1, &a1);
      Push(0, step, id, g0, &a0);
      ASSERT_TRUE(a0.status.ok()) << a0.status;
      ASSERT_EQ(a0.update, a1.update);
      ASSERT_EQ(a0.step, step + 1);
      const std::vector<float> next = SgdStep(expected[k], g0, g1);
      std::vector<float> update(next.size());
      for (size_t i = 0; i < next.size(); ++i) update[i] = next[i] - expected[k][i];
      ASSERT_TRUE(BitIdentical(DecodePull(config_, layout_, step, id, a0.update), update));
      expected[k] = next;
    }
  }
  EXPECT_EQ(shard_->step(), static_cast<uint64_t>(kSteps));

  rpc::PullWeightsResponse response;
  ASSERT_TRUE(shard_->PullWeights(0, &response).ok());
  EXPECT_EQ(response.step(), static_cast<uint64_t>(kSteps));
  ASSERT_EQ(response.chunks_size(), static_cast<int>(shard_->chunk_ids().size()));
  for (size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(response.chunks(k).chunk_id(), shard_->chunk_ids()[k]);
    std::vector<float> values(expected[k].size());
    ASSERT_EQ(response.chunks(k).values().size(), values.size() * sizeof(float));
    std::memcpy(values.data(), response.chunks(k).values().data(), values.size() * sizeof(float));
    EXPECT_TRUE(BitIdentical(values, expected[k])) << "chunk " << shard_->chunk_ids()[k];
  }
}

TEST_F(ShardTest, PullWeightsReportsTheSlowestChunk) {
  Answer a0, a1;
  Push(0, 0, chunk_, TestGradient(Length(chunk_), 0, 0), &a0);
  Push(1, 0, chunk_, TestGradient(Length(chunk_), 0, 1), &a1);
  rpc::PullWeightsResponse response;
  ASSERT_TRUE(shard_->PullWeights(0, &response).ok());
  EXPECT_EQ(response.step(), 0u);
  EXPECT_EQ(Snapshot(chunk_).step, 1u);
}

TEST_F(ShardTest, ConcurrentWorkersMatchTheSequentialRun) {
  constexpr int kSteps = 10;
  const std::vector<uint32_t>& ids = shard_->chunk_ids();
  std::vector<std::vector<float>> expected;
  for (uint32_t id : ids) expected.push_back(Snapshot(id).weights);
  for (uint64_t step = 0; step < kSteps; ++step) {
    for (size_t k = 0; k < ids.size(); ++k) {
      expected[k] = SgdStep(expected[k], TestGradient(Length(ids[k]), step, 0),
                            TestGradient(Length(ids[k]), step, 1));
    }
  }
  // Each worker pushes every chunk of a step, then waits for all their answers (BSP).
  std::vector<std::string> errors(2);
  auto worker = [&](uint32_t rank) {
    for (uint64_t step = 0; step < kSteps; ++step) {
      Latch answered(static_cast<int>(ids.size()));
      std::vector<absl::Status> statuses(ids.size());
      for (size_t k = 0; k < ids.size(); ++k) {
        shard_->PushPullRound(rank, step, 0, ids[k],
                              EncodePush(config_, layout_, step, ids[k], rank,
                                         TestGradient(Length(ids[k]), step, rank)),
                              [&, k](absl::Status status, const Shard::PushAnswer*) {
                                statuses[k] = std::move(status);
                                answered.CountDown();
                              });
      }
      answered.Wait();
      for (const absl::Status& status : statuses) {
        if (!status.ok()) errors[rank] = status.ToString();
      }
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(errors, std::vector<std::string>(2));
  for (size_t k = 0; k < ids.size(); ++k) {
    EXPECT_TRUE(BitIdentical(Snapshot(ids[k]).weights, expected[k])) << "chunk " << ids[k];
  }
}

TEST_F(ShardTest, CloseFailsParkedAndLaterPushes) {
  Answer parked, later;
  Push(0, 0, chunk_, TestGradient(Length(chunk_), 0, 0), &parked);
  shard_->Close(absl::UnavailableError("server shutting down"));
  EXPECT_EQ(parked.calls, 1);
  EXPECT_EQ(parked.status, absl::UnavailableError("server shutting down"));
  Push(1, 0, chunk_, TestGradient(Length(chunk_), 0, 1), &later);
  EXPECT_EQ(later.status, absl::UnavailableError("server shutting down"));
}

// Shard 0 of `config`.
std::unique_ptr<Shard> ShardWith(const config::RunConfig& config, const JobLayout& layout) {
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config, layout, 0);
  CHECK(shard.ok()) << shard.status();
  return *std::move(shard);
}

// The test job (plain SGD, lr 0.5) with optimizer.schedule given in text format, run for
// `epochs` epochs.
config::RunConfig ScheduledConfig(absl::string_view schedule, uint32_t epochs = 4) {
  return TestConfig([&](config::RunConfig& c) {
    c.mutable_training()->set_epochs(epochs);
    CHECK(google::protobuf::TextFormat::ParseFromString(std::string(schedule),
                                                        c.mutable_optimizer()->mutable_schedule()));
  });
}

TEST(ShardScheduleTest, TheFirstJoinFixesTheRunLengthAndLaterOnesMustAgree) {
  const config::RunConfig config = ScheduledConfig("kind: COSINE");
  const JobLayout layout = TestLayout(config);
  std::unique_ptr<Shard> shard = ShardWith(config, layout);
  EXPECT_EQ(shard->Join(0, 0, 8, 0), absl::InvalidArgumentError(
                                           "steps_per_epoch and total_steps must be >= 1, got 0 "
                                           "and 8"));
  EXPECT_EQ(shard->Join(0, 4, 0, 0).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(shard->Join(0, 2, 8, 0).ok());
  EXPECT_TRUE(shard->Join(0, 2, 8, 0).ok());  // Every worker sends the same.
  EXPECT_EQ(shard->Join(0, 4, 8, 0),
            absl::FailedPreconditionError(
                "steps_per_epoch: worker says 4, server 0 has 2 from the first handshake"));
  EXPECT_EQ(shard->Join(0, 2, 6, 0),
            absl::FailedPreconditionError(
                "total_steps: worker says 6, server 0 has 8 from the first handshake"));
}

TEST(ShardScheduleTest, NoStepBeforeAScheduleKnowsTheRunLength) {
  const config::RunConfig config = ScheduledConfig("kind: CONSTANT warmup_epochs: 1");
  const JobLayout layout = TestLayout(config);
  std::unique_ptr<Shard> shard = ShardWith(config, layout);
  const uint32_t chunk = shard->chunk_ids().front();
  const size_t n = layout.chunks[chunk].chunk.length;
  Answer answer;
  shard->PushPullRound(0, 0, 0, chunk,
                       EncodePush(config, layout, 0, chunk, 0, TestGradient(n, 0, 0)),
                       Record(&answer));
  EXPECT_EQ(answer.calls, 1);
  EXPECT_EQ(answer.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(answer.status.message()),
              HasSubstr("optimizer.schedule needs the run's length"));
  absl::StatusOr<Shard::ChunkSnapshot> snapshot = shard->Snapshot(chunk);
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(snapshot->arrived, std::vector<bool>(2, false));  // The push was not taken.
}

// Runs `steps` steps of every chunk of shard 0 with plain SGD under `schedule`, 2 steps per
// epoch; checks that each step's change is exactly -lr(s) * mean gradient, with lr(s) from
// `expected_lr` (fp32 operations as the server performs them).
template <typename ExpectedLr>
void ExpectEachStepUsesTheScheduledRate(absl::string_view schedule, uint64_t steps,
                                        ExpectedLr expected_lr) {
  const config::RunConfig config = ScheduledConfig(schedule, steps / 2);
  const JobLayout layout = TestLayout(config);
  std::unique_ptr<Shard> shard = ShardWith(config, layout);
  ASSERT_TRUE(shard->Join(0, 2, steps, 0).ok());
  for (uint64_t step = 0; step < steps; ++step) {
    const float lr = expected_lr(step);
    for (uint32_t id : shard->chunk_ids()) {
      const size_t n = layout.chunks[id].chunk.length;
      absl::StatusOr<Shard::ChunkSnapshot> before = shard->Snapshot(id);
      ASSERT_TRUE(before.ok());
      const std::vector<float> g0 = TestGradient(n, step + id, 0);
      const std::vector<float> g1 = TestGradient(n, step + id, 1);
      Answer a0, a1;
      shard->PushPullRound(0, step, 0, id, EncodePush(config, layout, step, id, 0, g0),
                           Record(&a0));
      shard->PushPullRound(1, step, 0, id, EncodePush(config, layout, step, id, 1, g1),
                           Record(&a1));
      ASSERT_TRUE(a1.status.ok()) << a1.status;
      std::vector<float> expected(n);
      for (size_t i = 0; i < n; ++i) expected[i] = before->weights[i] - lr * ((g0[i] + g1[i]) / 2);
      EXPECT_TRUE(BitIdentical(shard->Snapshot(id)->weights, expected))
          << "chunk " << id << " step " << step << " lr " << lr;
    }
  }
}

TEST(ShardScheduleTest, StepDecayWithWarmupAtEachStep) {
  // lr 0.5; 1 epoch (2 steps) of warm-up: 0.25, 0.5; then halved every 2 epochs (4 steps)
  // counting from step 0: steps 2-3 at 0.5, steps 4-7 at 0.25.
  const float kRates[] = {0.25f, 0.5f, 0.5f, 0.5f, 0.25f, 0.25f, 0.25f, 0.25f};
  ExpectEachStepUsesTheScheduledRate(
      "kind: STEP decay_factor: 0.5 decay_epochs: 2 warmup_epochs: 1", 8,
      [&](uint64_t step) { return kRates[step]; });
}

TEST(ShardScheduleTest, CosineWithWarmupFollowsLearningRate) {
  // lr 0.5, 1.5 epochs (3 steps) of warm-up, cosine to 0.05 over steps 3..10.
  constexpr char kSchedule[] = "kind: COSINE min_lr: 0.05 warmup_epochs: 1.5";
  const config::Optimizer optimizer = ScheduledConfig(kSchedule).optimizer();
  ExpectEachStepUsesTheScheduledRate(kSchedule, 10, [&](uint64_t step) {
    return static_cast<float>(LearningRate(optimizer, step, 2, 10));
  });
}

TEST(ShardScheduleTest, AdamFirstStepMovesEachWeightByLr) {
  // Bias-corrected Adam's first step is lr * g / (|g| + epsilon): every weight whose mean
  // gradient is not 0 moves by lr against its sign.
  const config::RunConfig config = TestConfig([](config::RunConfig& c) {
    c.mutable_optimizer()->set_name("adam");
    c.mutable_optimizer()->set_learning_rate(0.01f);
  });
  const JobLayout layout = TestLayout(config);
  std::unique_ptr<Shard> shard = ShardWith(config, layout);
  const uint32_t chunk = shard->chunk_ids().front();
  const size_t n = layout.chunks[chunk].chunk.length;
  const std::vector<float> w0 = shard->Snapshot(chunk)->weights;
  const std::vector<float> g0 = TestGradient(n, 0, 0);
  const std::vector<float> g1 = TestGradient(n, 0, 1);
  Answer a0, a1;
  shard->PushPullRound(0, 0, 0, chunk, EncodePush(config, layout, 0, chunk, 0, g0), Record(&a0));
  shard->PushPullRound(1, 0, 0, chunk, EncodePush(config, layout, 0, chunk, 1, g1), Record(&a1));
  ASSERT_TRUE(a1.status.ok()) << a1.status;
  const std::vector<float> w1 = shard->Snapshot(chunk)->weights;
  for (size_t i = 0; i < n; ++i) {
    const float mean = (g0[i] + g1[i]) / 2;
    const float expected = mean > 0 ? -0.01f : mean < 0 ? 0.01f : 0.0f;
    ASSERT_NEAR(w1[i] - w0[i], expected, 1e-6) << "element " << i << " mean gradient " << mean;
  }
}

}  // namespace
}  // namespace tamp

namespace tamp {
namespace {

// A resync (exact-weight pull) in SYNC delivers everything the pull residual still owed the
// replicas, so the shard forgets it: otherwise later updates would deliver it twice.
TEST(ShardResyncTest, ExactPullClearsThePullResidual) {
  const config::RunConfig config = TestConfig([](config::RunConfig& c) {
    config::ChunkCompression* compression =
        c.mutable_compression()->mutable_default_compression();
    compression->mutable_pull()->set_name("topk");
    compression->mutable_pull()->set_ratio(0.1);
    compression->mutable_pull_feedback()->set_kind(config::ErrorFeedback::RESIDUAL);
  });
  const JobLayout layout = TestLayout(config);
  std::unique_ptr<Shard> shard = ShardWith(config, layout);
  const uint32_t chunk = shard->chunk_ids().front();
  const size_t n = layout.chunks[chunk].chunk.length;

  Answer a0, a1;
  shard->PushPullRound(0, 0, 0, chunk,
                       EncodePush(config, layout, 0, chunk, 0, TestGradient(n, 0, 0)),
                       Record(&a0));
  shard->PushPullRound(1, 0, 0, chunk,
                       EncodePush(config, layout, 0, chunk, 1, TestGradient(n, 0, 1)),
                       Record(&a1));
  ASSERT_TRUE(a0.status.ok() && a1.status.ok()) << a0.status << " " << a1.status;
  absl::StatusOr<Shard::ChunkSnapshot> before = shard->Snapshot(chunk);
  ASSERT_TRUE(before.ok());
  const auto nonzero = [](const std::vector<float>& v) {
    return std::count_if(v.begin(), v.end(), [](float x) { return x != 0.0f; });
  };
  ASSERT_GT(nonzero(before->pull_residual), 0) << "top-k 10% of the update should leave a residual";

  rpc::PullWeightsResponse response;
  ASSERT_TRUE(shard->PullWeights(0, &response).ok());
  absl::StatusOr<Shard::ChunkSnapshot> after = shard->Snapshot(chunk);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(nonzero(after->pull_residual), 0);
  EXPECT_TRUE(BitIdentical(after->weights, before->weights)) << "a pull changes no weight";
  ASSERT_GE(response.chunks_size(), 1);
  EXPECT_EQ(response.chunks(0).values(),
            std::string(reinterpret_cast<const char*>(after->weights.data()), n * sizeof(float)));
}

}  // namespace
}  // namespace tamp
