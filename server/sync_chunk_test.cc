// SyncChunk alone, without a Shard: the barrier answers every push of a step with one update,
// a timed-out barrier completes over the workers that pushed, and a rejoin is checked against
// the chunk's position.
#include "server/sync_chunk.h"

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::Answer;
using ::tamp::testing::DecodePull;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;

class SyncChunkTest : public ::tamp::testing::ChunkTest<SyncChunk> {
 protected:
  SyncChunkTest() { Init(TestConfig()); }

  // The first chunk of shard 0 of the job `config`, in its initial state.
  void Init(const config::RunConfig& config) { InitChunk(config); }
};

TEST_F(SyncChunkTest, TheLastPushAnswersTheStepWithTheMeanGradientsUpdate) {
  const std::vector<float> w0 = chunk_->Snapshot().weights;
  Answer a0, a1;
  Push(0, 0, &a0);
  EXPECT_EQ(a0.calls, 0) << "waits for worker 1";
  EXPECT_EQ(chunk_->Snapshot().arrived, (std::vector<bool>{true, false}));
  Push(1, 0, &a1);
  ASSERT_EQ(a0.calls, 1);
  ASSERT_TRUE(a1.status.ok()) << a1.status;
  EXPECT_EQ(a0.update, a1.update);
  EXPECT_EQ(a0.step, 1u);
  EXPECT_EQ(chunk_->step(), 1u);
  // Plain SGD at lr 0.5 over the mean of two gradients of multiples of 1/64: exact.
  const std::vector<float> g0 = TestGradient(n_, 0, 0), g1 = TestGradient(n_, 0, 1);
  const std::vector<float> update = DecodePull(config_, layout_, 0, id_, a0.update);
  const std::vector<float> w1 = chunk_->Snapshot().weights;
  for (size_t i = 0; i < n_; ++i) {
    ASSERT_EQ(w1[i], w0[i] - 0.5f * ((g0[i] + g1[i]) / 2)) << i;
    ASSERT_EQ(update[i], w1[i] - w0[i]) << i;
  }
}

TEST_F(SyncChunkTest, AnExpiredBarrierCompletesOverTheWorkersThatPushed) {
  Answer a0;
  Push(0, 0, &a0);
  const auto now = std::chrono::steady_clock::now();
  EXPECT_FALSE(chunk_->ExpireWait(now, std::chrono::hours(1), 0)) << "not waited long enough";
  EXPECT_TRUE(chunk_->ExpireWait(now + std::chrono::seconds(10), std::chrono::seconds(5), 0));
  EXPECT_EQ(a0.calls, 0) << "ExpireWait drops; CompleteIfDone completes";
  chunk_->CompleteIfDone();
  ASSERT_EQ(a0.calls, 1);
  ASSERT_TRUE(a0.status.ok()) << a0.status;
  EXPECT_EQ(chunk_->step(), 1u);
  Answer late;
  Push(1, 1, &late);
  EXPECT_EQ(late.status.code(), absl::StatusCode::kAborted) << late.status;
}

TEST_F(SyncChunkTest, ARejoinCannotGoBehindTheChunk) {
  Answer a0;
  Push(0, 0, &a0);
  {
    std::unique_lock<std::mutex> hold = chunk_->Hold();
    EXPECT_EQ(chunk_->CheckRejoinHeld(0, 0, 3),
              absl::FailedPreconditionError(absl::StrCat(
                  "worker 0 cannot rejoin at step 0 on server 3: chunk ", id_,
                  " is at step 0; rejoin at a later step")));
    EXPECT_TRUE(chunk_->CheckRejoinHeld(1, 0, 3).ok()) << "worker 1 has not pushed step 0";
    EXPECT_TRUE(chunk_->CheckRejoinHeld(0, 1, 3).ok());
    EXPECT_EQ(chunk_->StepHeld(), 0u);
  }
  Answer a1;
  Push(1, 0, &a1);
  std::unique_lock<std::mutex> hold = chunk_->Hold();
  EXPECT_EQ(chunk_->CheckRejoinHeld(1, 0, 3).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SyncChunkTest, AReplicaPullKeepsTheResidualAnExactPullDropsIt) {
  Init(TestConfig([](config::RunConfig& config) {
    config::ChunkCompression* compression =
        config.mutable_compression()->mutable_default_compression();
    compression->mutable_pull()->set_name("topk");
    compression->mutable_pull()->set_ratio(0.25);
    compression->mutable_pull_feedback()->set_kind(config::ErrorFeedback::RESIDUAL);
  }));
  Answer a0, a1;
  Push(0, 0, &a0);
  Push(1, 0, &a1);
  ASSERT_TRUE(a1.status.ok()) << a1.status;
  const ChunkSnapshot after = chunk_->Snapshot();
  ASSERT_EQ(after.pull_residual.size(), n_);
  std::string values;
  EXPECT_EQ(chunk_->Pull(1, PullKind::kReplica, &values), 1u);
  std::vector<float> replica(n_);
  ASSERT_EQ(values.size(), n_ * sizeof(float));
  std::memcpy(replica.data(), values.data(), values.size());
  size_t owed = 0;
  for (size_t i = 0; i < n_; ++i) {
    ASSERT_EQ(replica[i], after.weights[i] - after.pull_residual[i]) << i;
    owed += after.pull_residual[i] != 0.0f;
  }
  EXPECT_GT(owed, 0u) << "top-k leaves some of the update owed";
  EXPECT_EQ(chunk_->Snapshot().pull_residual, after.pull_residual);

  EXPECT_EQ(chunk_->Pull(0, PullKind::kExact, &values), 1u);
  EXPECT_EQ(values, std::string(reinterpret_cast<const char*>(after.weights.data()),
                                n_ * sizeof(float)));
  EXPECT_EQ(chunk_->Snapshot().pull_residual, std::vector<float>(n_, 0.0f));
}

// A sparse push codec (top-k), plain SGD (or server.mode AGGREGATE) and a RESIDUAL pull
// memory: the chunk answers from the pushed entries alone (FinishStep in O(entries) instead
// of passes over the chunk); with momentum, it takes the mean over them alone.
// nonfinite_policy ALLOW adds through the codec's DecodeAdd, where the chunk cannot tell
// which entries changed, and so takes the dense update: step by step both must leave the
// same weights, accumulator and pull residual, and answer the same bytes.
TEST_F(SyncChunkTest, ASparseUpdateLeavesWhatTheDenseOneLeaves) {
  struct Run {
    std::vector<std::string> answers;
    std::vector<ChunkSnapshot> snapshots;
  };
  const auto run = [&](config::Validation::NonfinitePolicy policy, config::Server::Mode mode,
                       float momentum) {
    Init(TestConfig([&](config::RunConfig& config) {
      config.mutable_server()->set_mode(mode);
      config.mutable_optimizer()->set_momentum(momentum);
      config::ChunkCompression* compression =
          config.mutable_compression()->mutable_default_compression();
      compression->mutable_push()->set_name("topk");
      compression->mutable_push()->set_ratio(0.05);
      compression->mutable_pull()->set_name("topk");
      compression->mutable_pull()->set_ratio(0.25);
      compression->mutable_pull_feedback()->set_kind(config::ErrorFeedback::RESIDUAL);
      config.mutable_validation()->set_nonfinite_policy(policy);
    }));
    Run result;
    for (uint64_t step = 0; step < 4; ++step) {
      Answer a0, a1;
      Push(0, step, &a0);
      Push(1, step, &a1);
      EXPECT_TRUE(a1.status.ok()) << a1.status;
      result.answers.push_back(a0.update);
      result.snapshots.push_back(chunk_->Snapshot());
    }
    return result;
  };
  // Momentum moves every weight: the mean alone is taken over the pushed entries.
  for (const auto& [mode, momentum] : {std::pair(config::Server::OPTIMIZER, 0.0f),
                                       std::pair(config::Server::OPTIMIZER, 0.9f),
                                       std::pair(config::Server::AGGREGATE, 0.0f)}) {
    SCOPED_TRACE(absl::StrCat(config::Server::Mode_Name(mode), " momentum ", momentum));
    const Run sparse = run(config::Validation::SKIP, mode, momentum);
    const Run dense = run(config::Validation::ALLOW, mode, momentum);
    for (size_t step = 0; step < sparse.answers.size(); ++step) {
      EXPECT_EQ(sparse.answers[step], dense.answers[step]) << "step " << step;
      const ChunkSnapshot& s = sparse.snapshots[step];
      const ChunkSnapshot& d = dense.snapshots[step];
      ASSERT_EQ(s.weights.size(), n_);
      EXPECT_EQ(std::memcmp(s.weights.data(), d.weights.data(), n_ * sizeof(float)), 0) << step;
      EXPECT_EQ(
          std::memcmp(s.pull_residual.data(), d.pull_residual.data(), n_ * sizeof(float)), 0)
          << "step " << step;
      EXPECT_EQ(s.accumulator, std::vector<float>(n_, 0.0f)) << "step " << step;
      EXPECT_EQ(d.accumulator, s.accumulator) << "step " << step;
    }
    if (mode == config::Server::OPTIMIZER) {
      EXPECT_NE(sparse.snapshots[0].weights, sparse.snapshots[3].weights) << "the weights moved";
    }
  }
}

}  // namespace
}  // namespace tamp
