// AsyncChunk alone, without a Shard: ASYNC applies and answers each push at once, relative to
// the pushing worker's view; SSP parks an answer until the slowest worker is within tau steps;
// a pull resets the worker's view.
#include "server/async_chunk.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::Answer;
using ::tamp::testing::DecodePull;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;

class AsyncChunkTest : public ::tamp::testing::ChunkTest<AsyncChunk> {
 protected:
  // The first chunk of shard 0 of the test job in `mode` (staleness `tau` for SSP).
  void Init(config::Consistency::Mode mode, uint32_t tau = 0) {
    InitChunk(TestConfig([&](config::RunConfig& config) {
      config.mutable_consistency()->set_mode(mode);
      if (tau != 0) config.mutable_consistency()->set_staleness(tau);
    }));
  }
};

TEST_F(AsyncChunkTest, AsyncAppliesAndAnswersEachPushAtOnce) {
  Init(config::Consistency::ASYNC);
  const std::vector<float> w0 = chunk_->Snapshot().weights;
  Answer a0;
  Push(0, 0, &a0);
  ASSERT_EQ(a0.calls, 1);
  ASSERT_TRUE(a0.status.ok()) << a0.status;
  EXPECT_EQ(a0.step, 1u);
  EXPECT_EQ(a0.slowest_pushes, 0u) << "worker 1 has pushed nothing";
  // Plain SGD at lr 0.5 over the gradient scaled by 1 / 2 workers: exact.
  const std::vector<float> g = TestGradient(n_, 0, 0);
  const ChunkSnapshot after = chunk_->Snapshot();
  const std::vector<float> update = DecodePull(config_, layout_, 0, id_, a0.update);
  for (size_t i = 0; i < n_; ++i) {
    ASSERT_EQ(after.weights[i], w0[i] - 0.5f * (g[i] * 0.5f)) << i;
    ASSERT_EQ(update[i], after.weights[i] - w0[i]) << i;
  }
  EXPECT_EQ(after.worker_steps, (std::vector<uint64_t>{1, 0}));
  EXPECT_EQ(after.views[0], after.weights) << "worker 0 holds the new weights";
  EXPECT_EQ(after.views[1], w0) << "worker 1 still holds the start";

  Answer again, ahead;
  Push(0, 0, &again);
  EXPECT_EQ(again.status.code(), absl::StatusCode::kAlreadyExists) << again.status;
  Push(1, 1, &ahead);
  EXPECT_EQ(ahead.status.code(), absl::StatusCode::kFailedPrecondition) << ahead.status;
  EXPECT_EQ(chunk_->Snapshot().weights, after.weights) << "refusals change nothing";
}

TEST_F(AsyncChunkTest, SspParksAnAnswerUntilTheSlowestCatchesUp) {
  Init(config::Consistency::SSP, /*tau=*/1);
  Answer a00, a01, a10;
  Push(0, 0, &a00);
  EXPECT_EQ(a00.calls, 1) << "step 0 < 0 pushes of worker 1 + tau 1";
  Push(0, 1, &a01);
  EXPECT_EQ(a01.calls, 0) << "step 1 waits for worker 1's step 0";
  EXPECT_EQ(chunk_->step(), 2u) << "applied on arrival all the same";
  Push(1, 0, &a10);
  ASSERT_EQ(a10.calls, 1);
  ASSERT_EQ(a01.calls, 1) << "released by worker 1's push";
  EXPECT_TRUE(a01.status.ok()) << a01.status;
  EXPECT_EQ(a01.step, 2u);
  EXPECT_EQ(a01.slowest_pushes, 1u);
}

TEST_F(AsyncChunkTest, APullResetsTheWorkersViewAndReportsItsStep) {
  Init(config::Consistency::ASYNC);
  Answer a0, a1;
  Push(0, 0, &a0);
  Push(0, 1, &a1);
  std::string values;
  EXPECT_EQ(chunk_->Pull(1, PullKind::kReplica, &values), 0u) << "worker 1's own step";
  const ChunkSnapshot after = chunk_->Snapshot();
  EXPECT_EQ(values, std::string(reinterpret_cast<const char*>(after.weights.data()),
                                n_ * sizeof(float)));
  EXPECT_EQ(after.views[1], after.weights);
  EXPECT_EQ(chunk_->Pull(0, PullKind::kExact, &values), 2u);
}

}  // namespace
}  // namespace tamp
