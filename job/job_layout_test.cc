#include "job/job_layout.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/config.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

config::RunConfig MlpConfig() {
  absl::StatusOr<config::RunConfig> config = ParseConfig(R"(
    version: 1
    cluster { num_servers: 2 num_workers: 1 }
    model { kind: MLP hidden: [64] init_seed: 3 }
    data { batch_size: 32 }
    training { epochs: 1 }
    optimizer { learning_rate: 0.1 }
    compression { partition_bytes: 16384 seed: 7 }
  )", "test");
  EXPECT_TRUE(config.ok()) << config.status();
  ApplyDefaults(&*config);
  EXPECT_TRUE(ValidateConfig(*config).ok());
  return *config;
}

TensorSpec Tensor(std::string name, std::vector<int64_t> shape) {
  TensorSpec tensor;
  tensor.name = std::move(name);
  tensor.shape = std::move(shape);
  return tensor;
}

std::vector<TensorSpec> MlpTensors() {
  return {Tensor("fc1.weight", {64, 784}), Tensor("fc1.bias", {64}), Tensor("fc2.weight", {10, 64}),
          Tensor("fc2.bias", {10})};
}

// A built-in model's tensors, registered by a worker, must be exactly the config's.
TEST(JobLayoutTest, TheConfigsTensorsGiveItsLayout) {
  absl::StatusOr<JobLayout> layout = BuildJobLayout(MlpConfig(), MlpTensors());
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->tensors.size(), 4u);
  EXPECT_EQ(layout->tensors[2].name, "fc2.weight");
  EXPECT_EQ(layout->total_elements, 64u * 784 + 64 + 10 * 64 + 10);
}

TEST(JobLayoutTest, AnotherShapeIsRefusedByName) {
  std::vector<TensorSpec> tensors = MlpTensors();
  tensors[2].shape = {10, 32};
  const absl::Status status = BuildJobLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc2.weight\" [10, 32]"));
  EXPECT_THAT(status.message(), HasSubstr("[10, 64]"));
}

TEST(JobLayoutTest, AnotherOrderIsRefusedByName) {
  std::vector<TensorSpec> tensors = MlpTensors();
  std::swap(tensors[0], tensors[1]);
  const absl::Status status = BuildJobLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc1.bias\" [64]"));
}

TEST(JobLayoutTest, MissingAndExtraTensorsAreRefusedByName) {
  std::vector<TensorSpec> tensors = MlpTensors();
  tensors.pop_back();
  absl::Status status = BuildJobLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc2.bias\""));
  tensors = MlpTensors();
  tensors.push_back(Tensor("fc3.weight", {10, 10}));
  status = BuildJobLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc3.weight\""));
}

TEST(JobLayoutTest, MoreThanEightDimensionsAreRefusedByName) {
  config::RunConfig config = MlpConfig();
  config.mutable_model()->Clear();
  config.mutable_model()->set_kind(config::Model::REGISTERED);
  EXPECT_TRUE(BuildJobLayout(config, {Tensor("deep", {1, 2, 1, 2, 1, 1, 1, 2})}).ok());
  const absl::Status status =
      BuildJobLayout(config, {Tensor("w", {3}), Tensor("deep", {1, 2, 1, 2, 1, 1, 1, 1, 2})})
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor 1 \"deep\": shape [1, 2, 1, 2, 1, 1, 1, 1, 2] "
                                          "has 9 dimensions; at most 8"));
}

// Under DGC momentum the servers run momentum 0: a chunk that travels raw keeps the workers'
// momentum (codec none, DGC_MOMENTUM), or it would train by plain SGD; other memories go.
TEST(JobLayoutTest, RawChunksKeepDgcMomentumOnly) {
  for (const config::ErrorFeedback::Kind kind :
       {config::ErrorFeedback::DGC_MOMENTUM, config::ErrorFeedback::RESIDUAL}) {
    config::RunConfig config = MlpConfig();
    config.mutable_optimizer()->clear_momentum();
    config::ChunkCompression& chunk =
        *config.mutable_compression()->mutable_default_compression();
    chunk.mutable_push()->set_name("topk");
    chunk.mutable_push()->set_ratio(0.01f);
    chunk.mutable_push_feedback()->set_kind(kind);
    if (kind == config::ErrorFeedback::DGC_MOMENTUM) {
      chunk.mutable_push_feedback()->set_momentum(0.8f);
    }
    config.mutable_compression()->set_min_compress_bytes(4096);
    absl::StatusOr<JobLayout> layout = BuildJobLayout(config, MlpTensors());
    ASSERT_TRUE(layout.ok()) << layout.status();
    for (const ChunkPlan& plan : layout->chunks) {
      const bool raw = plan.chunk.length * sizeof(float) < 4096;
      const std::string& name = layout->tensor_of(plan).name;
      EXPECT_EQ(plan.compression.push().name(), raw ? "none" : "topk") << name;
      EXPECT_EQ(plan.compression.push_feedback().kind(),
                raw && kind != config::ErrorFeedback::DGC_MOMENTUM ? config::ErrorFeedback::NONE
                                                                   : kind)
          << name;
      if (kind == config::ErrorFeedback::DGC_MOMENTUM) {
        EXPECT_EQ(plan.compression.push_feedback().momentum(), 0.8f) << name;
      }
    }
  }
}

// An override whose tensors all travel raw (below min_compress_bytes) is named: a user's
// fp16 for a 6 KB positional embedding changed nothing, and nothing said so.
TEST(JobLayoutTest, OverridesOfOnlyRawTensorsAreNamed) {
  config::RunConfig config = MlpConfig();
  config::Compression& compression = *config.mutable_compression();
  compression.set_min_compress_bytes(4096);
  auto add = [&](const std::string& pattern, const std::string& push) {
    config::TensorOverride* override = compression.add_tensor_overrides();
    override->set_pattern(pattern);
    override->mutable_compression()->mutable_push()->set_name(push);
  };
  add("fc2.*", "fp16");       // fc2.weight 2560 B, fc2.bias 40 B: raw.
  add("fc1.*", "fp16");       // fc1.weight's chunks are 16 KiB: compressed.
  add("fc2.weight", "none");  // Raw, as it says.
  auto notes = [&config] {
    absl::StatusOr<JobLayout> layout = BuildJobLayout(config, MlpTensors());
    EXPECT_TRUE(layout.ok()) << layout.status();
    return LayoutNotes(config, *layout);
  };
  EXPECT_THAT(notes(),
              ::testing::ElementsAre(
                  "compression.tensor_overrides[0] (pattern 'fc2.*') changes nothing: every "
                  "tensor it matches is below compression.min_compress_bytes (4096 B) and "
                  "travels raw (\"fc2.weight\" [10, 64] 2560 B, \"fc2.bias\" [10] 40 B); lower "
                  "min_compress_bytes to compress them"));
  compression.set_partition_bytes(2048);  // Every chunk of fc1.weight is raw too.
  EXPECT_EQ(notes().size(), 2u);
}

// The layout's notes for `config` (MlpTensors()).
std::vector<std::string> NotesOf(const config::RunConfig& config) {
  absl::StatusOr<JobLayout> layout = BuildJobLayout(config, MlpTensors());
  EXPECT_TRUE(layout.ok()) << layout.status();
  return LayoutNotes(config, *layout);
}

TEST(JobLayoutTest, AnOverrideEveryTensorOfWhichALaterOneSetsIsNamed) {
  config::RunConfig config = MlpConfig();
  config::Compression& compression = *config.mutable_compression();
  auto add = [&](const std::string& pattern) {
    config::TensorOverride* override = compression.add_tensor_overrides();
    override->set_pattern(pattern);
    override->mutable_compression()->mutable_push()->set_name("fp16");
  };
  add("fc1.weight");
  add("fc1.*");  // Wins fc1.weight too.
  add("fc2.*");
  add("fc2.bias");  // fc2.* still wins fc2.weight.
  EXPECT_THAT(NotesOf(config),
              ::testing::ElementsAre("compression.tensor_overrides[0] (pattern 'fc1.weight') "
                                     "changes nothing: later overrides, which win, match every "
                                     "tensor it matches (compression.tensor_overrides[1], "
                                     "pattern 'fc1.*')"));
}

// Two later overrides that between them win every tensor it matches: both are named.
TEST(JobLayoutTest, EveryLaterOverrideThatTakesItsTensorsIsNamed) {
  config::RunConfig config = MlpConfig();
  config::Compression& compression = *config.mutable_compression();
  for (const char* pattern : {"fc*", "fc1.*", "fc2.*"}) {
    config::TensorOverride* override = compression.add_tensor_overrides();
    override->set_pattern(pattern);
    override->mutable_compression()->mutable_push()->set_name("fp16");
  }
  EXPECT_THAT(NotesOf(config),
              ::testing::ElementsAre("compression.tensor_overrides[0] (pattern 'fc*') changes "
                                     "nothing: later overrides, which win, match every tensor "
                                     "it matches (compression.tensor_overrides[1], pattern "
                                     "'fc1.*'; compression.tensor_overrides[2], pattern "
                                     "'fc2.*')"));
}

// Both at once: a later override takes fc2.weight, and fc2.bias (40 B) travels raw.
TEST(JobLayoutTest, AnOverrideShadowedForSomeTensorsAndRawForTheOthersIsNamed) {
  config::RunConfig config = MlpConfig();
  config::Compression& compression = *config.mutable_compression();
  compression.set_min_compress_bytes(1024);
  for (const char* pattern : {"fc2.*", "fc2.weight"}) {
    config::TensorOverride* override = compression.add_tensor_overrides();
    override->set_pattern(pattern);
    override->mutable_compression()->mutable_push()->set_name("fp16");
  }
  EXPECT_THAT(NotesOf(config),
              ::testing::ElementsAre(
                  "compression.tensor_overrides[0] (pattern 'fc2.*') changes nothing: later "
                  "overrides, which win, take some of the tensors it matches "
                  "(compression.tensor_overrides[1], pattern 'fc2.weight'), and the others are "
                  "below compression.min_compress_bytes (1024 B) and travel raw"));
  compression.set_min_compress_bytes(16);  // fc2.bias compressed by fc2.*: it decides one.
  EXPECT_THAT(NotesOf(config), ::testing::IsEmpty());
}

TEST(JobLayoutTest, AShardOverrideThatDecidesNoChunkAndIdleServersAreNamed) {
  config::RunConfig config = MlpConfig();
  config::Compression& compression = *config.mutable_compression();
  auto add = [&](uint32_t shard) {
    config::ShardOverride* override = compression.add_shard_overrides();
    override->add_shards(shard);
    override->mutable_compression()->mutable_push()->set_name("fp16");
  };
  add(1);
  EXPECT_THAT(NotesOf(config), ::testing::IsEmpty());
  add(1);  // Later, for the same shard: the first decides nothing now.
  EXPECT_THAT(NotesOf(config), ::testing::ElementsAre(::testing::HasSubstr(
                                   "compression.shard_overrides[0] (shards 1) changes nothing: "
                                   "its shards hold no chunk it decides")));
  // Every tensor set by a tensor override: no shard override decides anything.
  config::TensorOverride* all = compression.add_tensor_overrides();
  all->set_pattern("fc*");
  all->mutable_compression()->mutable_push()->set_name("bf16");
  EXPECT_EQ(NotesOf(config).size(), 2u);

  config = MlpConfig();  // 4 tensors in 16 chunks of at most 16 KiB, over 20 servers.
  config.mutable_cluster()->set_num_servers(20);
  EXPECT_THAT(NotesOf(config),
              ::testing::ElementsAre(::testing::AllOf(
                  ::testing::HasSubstr("4 of 20 servers hold no chunk (shards "),
                  ::testing::HasSubstr("): the job has 16 chunks; lower cluster.num_servers"))));
}

}  // namespace
}  // namespace tamp
