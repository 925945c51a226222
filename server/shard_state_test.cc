// Export and restore of chunks, without a Shard: a restore reproduces the exported state
// byte for byte (optimizer and pull memory included) and marks the chunk resuming; a state
// that does not fit is refused naming what, with nothing changed.
#include "server/shard_state.h"

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/async_chunk.h"
#include "server/sync_chunk.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::Answer;
using ::tamp::testing::EncodePush;
using ::tamp::testing::Record;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;
using ::tamp::testing::TestLayout;

// Shard 0's chunks of the test job with SGD with momentum and a top-k pull with a residual,
// so every buffer a checkpoint holds is non-empty.
class ShardStateTest : public ::testing::Test {
 protected:
  void Init(config::Consistency::Mode mode) {
    config_ = TestConfig([&](config::RunConfig& config) {
      config.mutable_optimizer()->set_momentum(0.9f);
      config::ChunkCompression* compression =
          config.mutable_compression()->mutable_default_compression();
      compression->mutable_pull()->set_name("topk");
      compression->mutable_pull()->set_ratio(0.25);
      compression->mutable_pull_feedback()->set_kind(config::ErrorFeedback::RESIDUAL);
      config.mutable_consistency()->set_mode(mode);
    });
    layout_ = TestLayout(config_);
    membership_ = std::make_unique<Membership>(config_, 0);
    owned_.clear();
    chunks_.clear();
    for (uint32_t id : layout_.ChunksOfShard(0)) {
      absl::StatusOr<std::unique_ptr<ChunkCore>> core =
          ChunkCore::Create(config_, layout_, id, membership_->steps_per_epoch());
      CHECK(core.ok()) << core.status();
      if (mode == config::Consistency::SYNC) {
        owned_.push_back(std::make_unique<SyncChunk>(*std::move(core), config_, membership_.get()));
      } else {
        owned_.push_back(
            std::make_unique<AsyncChunk>(*std::move(core), config_, membership_.get()));
      }
      chunks_.push_back(owned_.back().get());
    }
  }

  // Every worker pushes step `step` of every chunk.
  void Step(uint64_t step) {
    for (ShardChunk* chunk : chunks_) {
      const size_t n = layout_.chunks[chunk->id()].chunk.length;
      for (uint32_t worker = 0; worker < 2; ++worker) {
        Answer answer;
        chunk->Push(worker, step, 0,
                    EncodePush(config_, layout_, step, chunk->id(), worker,
                               TestGradient(n, step, worker)),
                    Record(&answer));
        ASSERT_TRUE(answer.calls == 0 || answer.status.ok()) << answer.status;
      }
    }
  }

  config::RunConfig config_;
  JobLayout layout_;
  std::unique_ptr<Membership> membership_;
  std::vector<std::unique_ptr<ShardChunk>> owned_;
  std::vector<ShardChunk*> chunks_;
};

TEST_F(ShardStateTest, ARestoreReproducesTheExportedState) {
  Init(config::Consistency::SYNC);
  Step(0);
  Step(1);
  const checkpoint::ShardState saved = ExportShardState(chunks_);
  ASSERT_EQ(saved.chunks_size(), static_cast<int>(chunks_.size()));
  const checkpoint::ChunkState& first = saved.chunks(0);
  EXPECT_EQ(first.chunk_id(), chunks_[0]->id());
  EXPECT_EQ(first.step(), 2u);
  EXPECT_EQ(first.optimizer_state_size(), 1) << "momentum's velocity";
  EXPECT_GT(first.pull_feedback_state_size(), 0) << "the residual";
  EXPECT_EQ(first.worker_steps_size(), 0) << "SYNC keeps no counts by worker";
  const ChunkSnapshot before = chunks_[0]->Snapshot();

  Init(config::Consistency::SYNC);  // A new process.
  ASSERT_TRUE(RestoreShardState(saved, 0, chunks_).ok());
  EXPECT_EQ(ExportShardState(chunks_).SerializeAsString(), saved.SerializeAsString());
  const ChunkSnapshot after = chunks_[0]->Snapshot();
  EXPECT_EQ(after.step, 2u);
  EXPECT_EQ(after.weights, before.weights);
  EXPECT_EQ(after.pull_residual, before.pull_residual);
  // It follows the workers: a push of step 5 moves it there.
  Answer ahead;
  chunks_[0]->Push(0, 5, 0,
                   EncodePush(config_, layout_, 5, chunks_[0]->id(), 0,
                              TestGradient(layout_.chunks[chunks_[0]->id()].chunk.length, 5, 0)),
                   Record(&ahead));
  EXPECT_EQ(chunks_[0]->Snapshot().step, 5u);
}

TEST_F(ShardStateTest, AsyncSavesEachWorkersCount) {
  Init(config::Consistency::ASYNC);
  Step(0);
  const checkpoint::ShardState saved = ExportShardState(chunks_);
  ASSERT_EQ(saved.chunks(0).worker_steps_size(), 2);
  EXPECT_EQ(saved.chunks(0).worker_steps(0), 1u);
  Init(config::Consistency::ASYNC);
  ASSERT_TRUE(RestoreShardState(saved, 0, chunks_).ok());
  EXPECT_EQ(chunks_[0]->Snapshot().worker_steps, (std::vector<uint64_t>{1, 1}));
  EXPECT_EQ(chunks_[0]->Snapshot().views[1], chunks_[0]->Snapshot().weights);

  // A SYNC job cannot take it: one count per worker, none in SYNC.
  Init(config::Consistency::SYNC);
  const absl::Status refused = RestoreShardState(saved, 0, chunks_);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            absl::StrCat("chunk ", chunks_[0]->id(),
                         ": 2 worker step counts, this job has 0 (one per worker in ASYNC / SSP, "
                         "none in SYNC)"));
}

TEST_F(ShardStateTest, AStateThatDoesNotFitChangesNothing) {
  Init(config::Consistency::SYNC);
  Step(0);
  checkpoint::ShardState saved = ExportShardState(chunks_);
  Init(config::Consistency::SYNC);
  const std::string fresh = ExportShardState(chunks_).SerializeAsString();

  checkpoint::ShardState short_weights = saved;
  short_weights.mutable_chunks(1)->mutable_weights()->pop_back();
  const absl::Status refused = RestoreShardState(short_weights, 0, chunks_);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            absl::StrCat("chunk ", chunks_[1]->id(), ": weights has ",
                         saved.chunks(1).weights().size() - 1, " bytes, expected ",
                         saved.chunks(1).weights().size()));
  EXPECT_EQ(ExportShardState(chunks_).SerializeAsString(), fresh)
      << "chunk 0, which fits, is not restored either";

  checkpoint::ShardState swapped = saved;
  swapped.mutable_chunks()->SwapElements(0, 1);
  EXPECT_EQ(RestoreShardState(swapped, 0, chunks_).code(), absl::StatusCode::kInvalidArgument);
  checkpoint::ShardState fewer = saved;
  fewer.mutable_chunks()->RemoveLast();
  EXPECT_EQ(RestoreShardState(fewer, 0, chunks_),
            absl::InvalidArgumentError(absl::StrCat("the state has ", chunks_.size() - 1,
                                                    " chunks, shard 0 has ", chunks_.size())));
  checkpoint::ShardState no_velocity = saved;
  no_velocity.mutable_chunks(0)->clear_optimizer_state();
  EXPECT_EQ(RestoreShardState(no_velocity, 0, chunks_).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExportShardState(chunks_).SerializeAsString(), fresh);
}

}  // namespace
}  // namespace tamp
