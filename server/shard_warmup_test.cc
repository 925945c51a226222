// Sparsity warm-up on the shard (compress/ratio_warmup.h): during epoch e < len(ratio_warmup)
// a chunk's push codec decodes only payloads of k = ratio_warmup[e] * n entries, afterwards
// only those of the configured ratio, the epoch being step / steps_per_epoch from the
// handshake; before the handshake no push is taken.
#include <memory>
#include <string>
#include <vector>

#include "compress/ratio_warmup.h"
#include "compress/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/keys.h"
#include "server/shard.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::Answer;
using ::tamp::testing::Record;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;
using ::tamp::testing::TestLayout;
using ::testing::HasSubstr;

constexpr uint64_t kStepsPerEpoch = 2;

// The test job with push topk ratio 0.001 (k = 1 of 784) and 2 epochs of warm-up at 0.25
// and 0.0625, run for 3 epochs.
config::RunConfig WarmupConfig() {
  return TestConfig([](config::RunConfig& c) {
    c.mutable_training()->set_epochs(3);
    config::Codec* push = c.mutable_compression()->mutable_default_compression()->mutable_push();
    push->set_name("topk");
    push->set_ratio(0.001);
    push->add_ratio_warmup(0.25);
    push->add_ratio_warmup(0.0625);
  });
}

// `gradient` encoded as a worker would in epoch `epoch` (WarmupSpec: the warm-up ratio while
// epoch < 2, the configured one after).
std::string EncodeFor(const config::RunConfig& config, const JobLayout& layout, uint64_t epoch,
                      uint64_t step, uint32_t chunk, uint32_t worker,
                      const std::vector<float>& gradient) {
  auto codec = compress::CreateCodec(
      compress::WarmupSpec(layout.chunks[chunk].compression.push(), epoch), gradient.size());
  CHECK(codec.ok()) << codec.status();
  std::string payload;
  CHECK((*codec)->Encode(gradient, PushKey(config, step, chunk, worker), &payload).ok());
  return payload;
}

class ShardWarmupTest : public ::testing::Test {
 protected:
  ShardWarmupTest() : config_(WarmupConfig()), layout_(TestLayout(config_)) {
    absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config_, layout_, 0);
    CHECK(shard.ok()) << shard.status();
    shard_ = *std::move(shard);
    // The largest chunk of shard 0 (784 values of fc1.weight).
    for (uint32_t id : shard_->chunk_ids()) {
      if (layout_.chunks[id].chunk.length > n_) {
        chunk_ = id;
        n_ = layout_.chunks[id].chunk.length;
      }
    }
  }

  // Pushes worker `worker`'s gradient of `step`, encoded for epoch `epoch`.
  Answer Push(uint32_t worker, uint64_t step, uint64_t epoch) {
    Answer answer;
    shard_->PushPullRound(worker, step, 0, chunk_,
                          EncodeFor(config_, layout_, epoch, step, chunk_, worker,
                                    TestGradient(n_, step, worker)),
                          Record(&answer));
    return answer;
  }

  // Expects the push of `step` encoded for `wrong_epoch` to be rejected as a bad payload with
  // the chunk left alone, then completes `step` with payloads encoded for `epoch`.
  void ExpectStepTakesOnly(uint64_t step, uint64_t epoch, uint64_t wrong_epoch) {
    absl::StatusOr<Shard::ChunkSnapshot> before = shard_->Snapshot(chunk_);
    ASSERT_TRUE(before.ok());
    const Answer wrong = Push(0, step, wrong_epoch);
    EXPECT_EQ(wrong.calls, 1);
    EXPECT_EQ(wrong.status.code(), absl::StatusCode::kInvalidArgument)
        << "step " << step << ": " << wrong.status;
    absl::StatusOr<Shard::ChunkSnapshot> after = shard_->Snapshot(chunk_);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->arrived, before->arrived);
    EXPECT_EQ(after->accumulator, before->accumulator);

    const Answer a0 = Push(0, step, epoch);
    EXPECT_EQ(a0.calls, 0) << "parked until worker 1 pushes: " << a0.status;
    const Answer a1 = Push(1, step, epoch);
    EXPECT_EQ(a1.calls, 1);
    EXPECT_TRUE(a1.status.ok()) << "step " << step << ": " << a1.status;
    EXPECT_EQ(a1.step, step + 1);
  }

  const config::RunConfig config_;
  const JobLayout layout_;
  std::unique_ptr<Shard> shard_;
  uint32_t chunk_ = 0;
  size_t n_ = 0;
};

TEST_F(ShardWarmupTest, TheChunksAreBigEnoughForDistinctSizes) {
  ASSERT_EQ(n_, 784u);
  // k = 196, 49, then 1: three payload sizes.
  EXPECT_NE(EncodeFor(config_, layout_, 0, 0, chunk_, 0, TestGradient(n_, 0, 0)).size(),
            EncodeFor(config_, layout_, 2, 0, chunk_, 0, TestGradient(n_, 0, 0)).size());
}

TEST_F(ShardWarmupTest, NoPushBeforeTheHandshakeFixesStepsPerEpoch) {
  const Answer answer = Push(0, 0, 0);
  EXPECT_EQ(answer.calls, 1);
  EXPECT_EQ(answer.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(answer.status.message()), HasSubstr("ratio_warmup needs steps_per_epoch"));
}

TEST_F(ShardWarmupTest, EachEpochTakesOnlyItsOwnK) {
  ASSERT_TRUE(shard_->Join(0, kStepsPerEpoch, 6, 0).ok());
  // Epoch 0 (steps 0, 1): ratio 0.25; the final size (epoch 2) is refused, and epoch 1's.
  ExpectStepTakesOnly(0, 0, 2);
  ExpectStepTakesOnly(1, 0, 1);
  // Epoch 1 (steps 2, 3): ratio 0.0625.
  ExpectStepTakesOnly(2, 1, 0);
  ExpectStepTakesOnly(3, 1, 2);
  // Epoch 2 on: the configured ratio 0.001.
  ExpectStepTakesOnly(4, 2, 1);
  ExpectStepTakesOnly(5, 2, 0);
}

}  // namespace
}  // namespace tamp
