// Worker failure in SYNC (server/shard.h, docs/consistency.md "Worker failure"), without
// gRPC: a barrier that waits past consistency.worker_timeout_ms drops the missing worker
// (made-up clock: ExpireBarriers with a `now` in the future), the step completes with the
// other worker's gradient alone, the drop holds for every chunk of the shard, a dropped
// worker's push is refused ABORTED with the state left alone, Rejoin counts it again from
// the announced step, PullReplica, the watchdog with a real 50 ms timeout, the config checks.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/config.h"
#include "server/barrier_watchdog.h"
#include "server/shard.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::Answer;
using ::tamp::testing::DecodePull;
using ::tamp::testing::EncodePush;
using ::tamp::testing::Record;
using ::tamp::testing::Rejoin;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;
using ::tamp::testing::TestLayout;
using ::testing::HasSubstr;

using Clock = std::chrono::steady_clock;
constexpr float kLr = 0.5f;  // test_job.h
constexpr uint32_t kTimeoutMs = 5000;


config::RunConfig TimeoutConfig(uint32_t timeout_ms) {
  return TestConfig([&](config::RunConfig& config) {
    config.mutable_consistency()->set_worker_timeout_ms(timeout_ms);
  });
}

class ShardFailureTest : public ::testing::Test {
 protected:
  void Init(const config::RunConfig& config) {
    config_ = config;
    layout_ = TestLayout(config_);
    absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config_, layout_, 0);
    ASSERT_TRUE(shard.ok()) << shard.status();
    shard_ = *std::move(shard);
    ASSERT_GE(shard_->chunk_ids().size(), 2u);
    chunk_ = shard_->chunk_ids()[0];
    other_chunk_ = shard_->chunk_ids()[1];
  }

  size_t Length(uint32_t chunk) const { return layout_.chunks[chunk].chunk.length; }

  Shard::ChunkSnapshot Snapshot(uint32_t chunk) const {
    absl::StatusOr<Shard::ChunkSnapshot> snapshot = shard_->Snapshot(chunk);
    CHECK(snapshot.ok()) << snapshot.status();
    return *std::move(snapshot);
  }

  void Push(uint32_t worker, uint64_t step, uint32_t chunk, Answer* answer) {
    const std::vector<float> gradient = TestGradient(Length(chunk), step, worker);
    shard_->PushPullRound(worker, step, 0, chunk,
                          EncodePush(config_, layout_, step, chunk, worker, gradient),
                          Record(answer));
  }

  // Past the timeout of a barrier that started now (ms later).
  static Clock::time_point In(int64_t ms) { return Clock::now() + std::chrono::milliseconds(ms); }

  config::RunConfig config_;
  JobLayout layout_;
  std::unique_ptr<Shard> shard_;
  uint32_t chunk_ = 0;
  uint32_t other_chunk_ = 0;
};

void ExpectNear(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], 1e-6f) << "at " << i;
  }
}

// w - lr * mean of the gradients of `workers` at `step`.
std::vector<float> SgdStep(const std::vector<float>& w, uint64_t step,
                           const std::vector<uint32_t>& workers) {
  std::vector<float> out = w;
  for (uint32_t worker : workers) {
    const std::vector<float> g = TestGradient(w.size(), step, worker);
    for (size_t i = 0; i < w.size(); ++i) out[i] -= kLr * g[i] / workers.size();
  }
  return out;
}

TEST_F(ShardFailureTest, SilentWorkerIsDroppedAndTheStepCompletesWithTheOther) {
  Init(TimeoutConfig(kTimeoutMs));
  EXPECT_EQ(shard_->worker_timeout(), std::chrono::milliseconds(kTimeoutMs));
  const std::vector<float> w0 = Snapshot(chunk_).weights;
  Answer answer;
  Push(0, 0, chunk_, &answer);
  shard_->ExpireBarriers(In(kTimeoutMs - 1000));  // Not yet.
  EXPECT_EQ(answer.calls, 0);
  EXPECT_EQ(Snapshot(chunk_).step, 0u);

  shard_->ExpireBarriers(In(kTimeoutMs + 1));
  ASSERT_EQ(answer.calls, 1);
  ASSERT_TRUE(answer.status.ok()) << answer.status;
  EXPECT_EQ(answer.step, 1u);
  // The mean over the one worker that pushed: its gradient whole, not halved.
  const Shard::ChunkSnapshot after = Snapshot(chunk_);
  EXPECT_EQ(after.step, 1u);
  ExpectNear(after.weights, SgdStep(w0, 0, {0}));
  std::vector<float> update = DecodePull(config_, layout_, 0, chunk_, answer.update);
  for (size_t i = 0; i < update.size(); ++i) update[i] += w0[i];
  ExpectNear(update, after.weights);

  // Later steps do not wait for the dropped worker.
  Answer next;
  Push(0, 1, chunk_, &next);
  ASSERT_EQ(next.calls, 1);
  EXPECT_TRUE(next.status.ok()) << next.status;
  ExpectNear(Snapshot(chunk_).weights, SgdStep(after.weights, 1, {0}));
}

TEST_F(ShardFailureTest, DroppedWorkersPushIsRefusedAndChangesNothing) {
  Init(TimeoutConfig(kTimeoutMs));
  Answer first;
  Push(0, 0, chunk_, &first);
  shard_->ExpireBarriers(In(kTimeoutMs + 1));
  ASSERT_EQ(first.calls, 1);
  Answer waiting;
  Push(0, 1, chunk_, &waiting);  // Completes at once: worker 1 is no longer waited for.
  ASSERT_EQ(waiting.calls, 1);

  const Shard::ChunkSnapshot before = Snapshot(chunk_);
  for (uint64_t step : {0, 1, 2}) {
    Answer refused;
    Push(1, step, chunk_, &refused);
    ASSERT_EQ(refused.calls, 1);
    EXPECT_EQ(refused.status.code(), absl::StatusCode::kAborted) << refused.status;
    EXPECT_THAT(refused.status.message(), HasSubstr("worker 1 was dropped at step 0 after "));
    EXPECT_THAT(refused.status.message(), HasSubstr("rejoin with a handshake"));
  }
  const Shard::ChunkSnapshot after = Snapshot(chunk_);
  EXPECT_EQ(after.step, before.step);
  EXPECT_EQ(after.weights, before.weights);
  EXPECT_EQ(after.accumulator, before.accumulator);
  EXPECT_EQ(after.arrived, before.arrived);
}

TEST_F(ShardFailureTest, OneChunkTimingOutDropsTheWorkerFromEveryChunk) {
  Init(TimeoutConfig(kTimeoutMs));
  // Worker 1 pushes one chunk of step 0 and dies before the other.
  Answer a0, a1, b0;
  Push(0, 0, chunk_, &a0);
  Push(1, 0, chunk_, &a1);
  Push(0, 0, other_chunk_, &b0);
  ASSERT_EQ(a0.calls, 1);
  ASSERT_EQ(b0.calls, 0);
  // Only other_chunk_ has an open barrier; its timeout drops worker 1 for the whole shard.
  shard_->ExpireBarriers(In(kTimeoutMs + 1));
  ASSERT_EQ(b0.calls, 1);
  EXPECT_TRUE(b0.status.ok()) << b0.status;
  Answer next;
  Push(0, 1, chunk_, &next);
  EXPECT_EQ(next.calls, 1) << "chunk_ still waits for the dropped worker";
}

TEST_F(ShardFailureTest, RejoinCountsTheWorkerFromTheAnnouncedStep) {
  Init(TimeoutConfig(kTimeoutMs));
  Answer answer;
  Push(0, 0, chunk_, &answer);
  shard_->ExpireBarriers(In(kTimeoutMs + 1));
  Push(0, 1, chunk_, &answer);
  ASSERT_EQ(Snapshot(chunk_).step, 2u);
  EXPECT_EQ(shard_->latest_step(), 2u);

  const absl::Status passed = Rejoin(*shard_, 1, 1);
  EXPECT_EQ(passed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(passed.message(), HasSubstr("is at step 2"));
  EXPECT_EQ(Rejoin(*shard_, 2, 5).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Rejoin(*shard_, 1, 3).ok());

  // Step 2 still goes on without worker 1, which may not push it.
  Answer refused;
  Push(1, 2, chunk_, &refused);
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(refused.status.message(), HasSubstr("worker 1 rejoined at step 3"));
  Answer alone;
  Push(0, 2, chunk_, &alone);
  ASSERT_EQ(alone.calls, 1);
  const std::vector<float> w3 = Snapshot(chunk_).weights;

  // From step 3 the barrier waits for both again, and averages both.
  Answer both0, both1;
  Push(0, 3, chunk_, &both0);
  EXPECT_EQ(both0.calls, 0);
  Push(1, 3, chunk_, &both1);
  ASSERT_EQ(both0.calls, 1);
  ASSERT_EQ(both1.calls, 1);
  EXPECT_TRUE(both1.status.ok()) << both1.status;
  EXPECT_EQ(both0.update, both1.update);
  ExpectNear(Snapshot(chunk_).weights, SgdStep(w3, 3, {0, 1}));
}

TEST_F(ShardFailureTest, ReplacementRejoiningReleasesTheBarrierWaitingForIt) {
  Init(TimeoutConfig(0));  // No timeout: only the rejoin releases step 0.
  Answer answer;
  Push(0, 0, chunk_, &answer);
  shard_->ExpireBarriers(In(1000000));
  EXPECT_EQ(answer.calls, 0) << "worker_timeout_ms 0 waits forever";
  ASSERT_TRUE(Rejoin(*shard_, 1, 1).ok());
  ASSERT_EQ(answer.calls, 1);
  EXPECT_TRUE(answer.status.ok()) << answer.status;
  EXPECT_EQ(answer.step, 1u);
}

TEST_F(ShardFailureTest, WhenEveryWorkerRejoinsLaterTheStepsNoOneTakesAreSkipped) {
  Init(TimeoutConfig(0));
  // Chunk_ completes step 0; other_chunk_ gets worker 0's push of step 1, and then both
  // workers die.
  Answer answer0, answer1, lone;
  Push(0, 0, chunk_, &answer0);
  Push(1, 0, chunk_, &answer1);
  Push(0, 0, other_chunk_, &answer0);
  Push(1, 0, other_chunk_, &answer1);
  Push(0, 1, chunk_, &lone);
  ASSERT_EQ(Snapshot(chunk_).step, 1u);
  const std::vector<float> other_weights = Snapshot(other_chunk_).weights;
  // Their successors rejoin at step 2: worker 0's push still completes chunk_'s step 1 (it
  // waits for no one else), and other_chunk_, which no one will push at step 1, moves to 2
  // unchanged.
  ASSERT_TRUE(Rejoin(*shard_, 0, 2).ok());
  EXPECT_EQ(lone.calls, 0) << "worker 1 is still counted at step 1";
  ASSERT_TRUE(Rejoin(*shard_, 1, 2).ok());
  ASSERT_EQ(lone.calls, 1);
  EXPECT_TRUE(lone.status.ok()) << lone.status;
  EXPECT_EQ(Snapshot(chunk_).step, 2u);
  EXPECT_EQ(Snapshot(other_chunk_).step, 2u);
  EXPECT_EQ(Snapshot(other_chunk_).weights, other_weights);
  // From step 2 on both count again.
  Answer both0, both1;
  Push(0, 2, other_chunk_, &both0);
  EXPECT_EQ(both0.calls, 0);
  Push(1, 2, other_chunk_, &both1);
  EXPECT_EQ(both1.calls, 1);
  ExpectNear(Snapshot(other_chunk_).weights, SgdStep(other_weights, 2, {0, 1}));
}

TEST_F(ShardFailureTest, PullReplicaIsTheWeightsLessTheResidualAndKeepsIt) {
  Init(TestConfig([](config::RunConfig& config) {
    config::ChunkCompression* compression =
        config.mutable_compression()->mutable_default_compression();
    compression->mutable_pull()->set_name("topk");
    compression->mutable_pull()->set_ratio(0.25);
    compression->mutable_pull_feedback()->set_kind(config::ErrorFeedback::RESIDUAL);
  }));
  const std::vector<float> w_init = Snapshot(chunk_).weights;
  Answer a0, a1;
  Push(0, 0, chunk_, &a0);
  Push(1, 0, chunk_, &a1);
  ASSERT_EQ(a0.calls, 1);
  const Shard::ChunkSnapshot before = Snapshot(chunk_);
  ASSERT_EQ(before.pull_residual.size(), w_init.size());
  rpc::PullWeightsResponse response;
  ASSERT_TRUE(shard_->PullReplica(1, &response).ok());
  EXPECT_EQ(response.step(), 0u) << "the shard's other chunks are still at step 0";
  ASSERT_EQ(response.chunks(0).chunk_id(), chunk_);
  std::vector<float> replica(Length(chunk_));
  ASSERT_EQ(response.chunks(0).values().size(), replica.size() * sizeof(float));
  std::memcpy(replica.data(), response.chunks(0).values().data(), replica.size() * sizeof(float));
  // What the workers hold: the start plus the decoded (top-k) update; the residual is the
  // rest of the update, which the replica lacks too.
  std::vector<float> held = DecodePull(config_, layout_, 0, chunk_, a0.update);
  for (size_t i = 0; i < held.size(); ++i) held[i] += w_init[i];
  ExpectNear(replica, held);
  size_t owed = 0;
  for (size_t i = 0; i < replica.size(); ++i) {
    EXPECT_EQ(replica[i], before.weights[i] - before.pull_residual[i]) << "at " << i;
    owed += before.pull_residual[i] != 0.0f;
  }
  EXPECT_GT(owed, 0u) << "top-k 25% leaves most of the update owed";
  EXPECT_EQ(Snapshot(chunk_).pull_residual, before.pull_residual) << "the residual is kept";
}

TEST_F(ShardFailureTest, WatchdogDropsWithARealTimeout) {
  Init(TimeoutConfig(50));
  std::unique_ptr<BarrierWatchdog> watchdog = BarrierWatchdog::Start(shard_.get());
  ASSERT_NE(watchdog, nullptr);
  EXPECT_EQ(watchdog->period(), std::chrono::milliseconds(10));
  std::mutex mu;
  std::condition_variable answered;
  bool done = false;
  absl::Status status;
  const Clock::time_point start = Clock::now();
  shard_->PushPullRound(0, 0, 0, chunk_,
                        EncodePush(config_, layout_, 0, chunk_, 0,
                                   TestGradient(Length(chunk_), 0, 0)),
                        [&](absl::Status s, const Shard::PushAnswer*) {
                          std::lock_guard<std::mutex> lock(mu);
                          status = std::move(s);
                          done = true;
                          answered.notify_one();
                        });
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(answered.wait_for(lock, std::chrono::seconds(10), [&] { return done; }));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(50));
  EXPECT_EQ(Snapshot(chunk_).step, 1u);
}

TEST(WorkerTimeoutTest, DefaultIsHalfTheRpcTimeoutAndAsyncHasNone) {
  EXPECT_EQ(Shard::Create(TestConfig(), TestLayout(TestConfig()), 0).value()->worker_timeout(),
            std::chrono::milliseconds(60000));
  const config::RunConfig async = TestConfig([](config::RunConfig& config) {
    config.mutable_consistency()->set_mode(config::Consistency::ASYNC);
  });
  std::unique_ptr<Shard> shard = Shard::Create(async, TestLayout(async), 0).value();
  EXPECT_EQ(shard->worker_timeout(), std::chrono::milliseconds(0));
  EXPECT_EQ(BarrierWatchdog::Start(shard.get()), nullptr);
  EXPECT_EQ(Rejoin(*shard, 1, 3).code(), absl::StatusCode::kFailedPrecondition);
}

absl::Status Validate(const std::string& consistency, uint32_t rpc_timeout_ms = 0) {
  absl::StatusOr<config::RunConfig> config = ParseConfig(
      absl::StrCat(::tamp::testing::kTestJob, " consistency { ", consistency, " }"), "test");
  if (!config.ok()) return config.status();
  config->mutable_cluster()->set_rpc_timeout_ms(rpc_timeout_ms);
  ApplyDefaults(&*config);
  return ValidateConfig(*config);
}

TEST(WorkerTimeoutTest, ConfigErrorsNameTheField) {
  EXPECT_TRUE(Validate("worker_timeout_ms: 0").ok());
  EXPECT_TRUE(Validate("worker_timeout_ms: 5000").ok());
  EXPECT_TRUE(Validate("mode: ASYNC worker_timeout_ms: 0").ok());
  EXPECT_THAT(Validate("mode: ASYNC worker_timeout_ms: 5000").message(),
              HasSubstr("consistency.worker_timeout_ms: is only used by mode SYNC"));
  EXPECT_THAT(Validate("worker_timeout_ms: 120000").message(),
              HasSubstr("consistency.worker_timeout_ms: 120000 must be below "
                        "cluster.rpc_timeout_ms (120000)"));
  EXPECT_THAT(Validate("worker_timeout_ms: 3000", 2000).message(),
              HasSubstr("consistency.worker_timeout_ms: 3000 must be below cluster.rpc_timeout_ms "
                        "(2000)"));
}

}  // namespace
}  // namespace tamp
