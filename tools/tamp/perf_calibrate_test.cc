#include "tools/tamp/perf_calibrate.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "compress/registry.h"
#include "gtest/gtest.h"
#include "job/config.h"

namespace tamp::perf {
namespace {

// MLP 784-64-10, 2 workers, 2 shards; the weights of fc1 (50176 values) split into four
// chunks of 12544 values (16 rows of 784), which share a length and are measured once.
config::RunConfig SmallConfig(const std::string& push) {
  absl::StatusOr<config::RunConfig> config = ParseConfig(
      absl::StrCat(R"(version: 1
        cluster { num_servers: 2 num_workers: 2 }
        model { kind: MLP hidden: [64] }
        data { batch_size: 16 }
        optimizer { name: "sgd" learning_rate: 0.1 momentum: 0.9 }
        compression {
          partition_bytes: 65536
          min_compress_bytes: 1024
          default_compression { push { )",
                   push, R"( } push_feedback { kind: RESIDUAL } pull { name: "none" } }
        })"),
      "small.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status();
  ApplyDefaults(&*config);
  EXPECT_TRUE(ValidateConfig(*config).ok());
  return *config;
}

TEST(MeasureComputeTest, ReportsBackwardOrderAndARealGradient) {
  const config::RunConfig config = SmallConfig("name: \"topk\" ratio: 0.01");
  absl::StatusOr<JobLayout> layout = BuildJobLayout(config);
  ASSERT_TRUE(layout.ok()) << layout.status();
  absl::StatusOr<ComputeProfile> profile = MeasureCompute(config, *layout, 2, 3);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_GT(profile->step_ms, 0);
  ASSERT_EQ(profile->tensor_ready_ms.size(), layout->tensors.size());
  for (double ready : profile->tensor_ready_ms) {
    EXPECT_GE(ready, 0);
    EXPECT_LE(ready, profile->step_ms);
  }
  // Backward finishes the last layer (fc2.weight, tensor 2) before the first (fc1.weight).
  EXPECT_LT(profile->tensor_ready_ms[2], profile->tensor_ready_ms[0]);
  ASSERT_EQ(profile->gradient.size(), layout->total_elements);
  EXPECT_TRUE(std::any_of(profile->gradient.begin(), profile->gradient.end(),
                          [](float g) { return g != 0; }));

  EXPECT_EQ(MeasureCompute(config, *layout, 0, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MeasureChunkCostsTest, PayloadBytesAreTheCodecsExactSizes) {
  const config::RunConfig config = SmallConfig("name: \"topk\" ratio: 0.01");
  absl::StatusOr<JobLayout> layout = BuildJobLayout(config);
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<float> gradient(layout->total_elements);
  for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = 1e-3f * ((i * 7919) % 101 - 50);
  absl::StatusOr<std::vector<ChunkCost>> costs = MeasureChunkCosts(config, *layout, gradient, 2);
  ASSERT_TRUE(costs.ok()) << costs.status();
  ASSERT_EQ(costs->size(), layout->chunks.size());
  for (size_t c = 0; c < costs->size(); ++c) {
    const ChunkCost& cost = (*costs)[c];
    const ChunkPlan& plan = layout->chunks[c];
    EXPECT_EQ(cost.tensor, plan.chunk.tensor);
    EXPECT_EQ(cost.shard, plan.chunk.shard);
    ASSERT_EQ(cost.rounds.size(), 1u);
    auto push = compress::CreateCodec(plan.compression.push(), plan.chunk.length);
    auto pull = compress::CreateCodec(plan.compression.pull(), plan.chunk.length);
    ASSERT_TRUE(push.ok() && pull.ok());
    EXPECT_EQ(cost.rounds[0].push_bytes, (*push)->MaxPayloadBytes()) << "chunk " << c;
    EXPECT_EQ(cost.pull_bytes, (*pull)->MaxPayloadBytes()) << "chunk " << c;
    EXPECT_GE(cost.rounds[0].encode_ms, 0);
    EXPECT_GE(cost.server_update_ms, 0);
  }
  // fc1.weight is compressed (top-k), its bias travels raw.
  EXPECT_LT((*costs)[0].rounds[0].push_bytes, layout->chunks[0].chunk.length * 4 / 10);

  gradient.pop_back();
  EXPECT_EQ(MeasureChunkCosts(config, *layout, gradient, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MeasureChunkCostsTest, MultiRoundCodecReportsEachRound) {
  const config::RunConfig config = SmallConfig("name: \"powersgd\" rank: 2");
  absl::StatusOr<JobLayout> layout = BuildJobLayout(config);
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<float> gradient(layout->total_elements, 1e-3f);
  absl::StatusOr<std::vector<ChunkCost>> costs = MeasureChunkCosts(config, *layout, gradient, 2);
  ASSERT_TRUE(costs.ok()) << costs.status();
  // Chunk 0 holds 16 rows of fc1.weight [64, 784], so M is [16, 784]: round 0 carries
  // P [16, 2], round 1 Q [784, 2] (the registry's formula).
  const ChunkCost& chunk = (*costs)[0];
  ASSERT_EQ(chunk.rounds.size(), 2u);
  EXPECT_EQ(chunk.rounds[0].push_bytes, 16u + 4 * 16 * 2);
  EXPECT_EQ(chunk.rounds[0].answer_bytes, 16u + 4 * 16 * 2);
  EXPECT_EQ(chunk.rounds[1].push_bytes, 16u + 4 * 784 * 2);
  EXPECT_EQ(chunk.rounds[1].answer_bytes, 16u + 4 * 784 * 2);
}

}  // namespace
}  // namespace tamp::perf
