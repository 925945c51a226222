#include "common/config.h"

#include "common/job_layout.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

constexpr char kGoodConfig[] = R"pb(
  version: 1
  cluster { num_servers: 2 num_workers: 2 }
  model { kind: MLP hidden: [ 64, 32 ] }
  optimizer { learning_rate: 0.1 momentum: 0.9 }
  compression {
    partition_bytes: 65536
    min_compress_bytes: 1024
    default_compression {
      push { name: "topk" ratio: 0.01 }
      push_feedback { kind: RESIDUAL }
    }
    tensor_overrides {
      pattern: "fc3.*"
      compression { push { name: "none" } }
    }
  }
)pb";

// kGoodConfig with `changes` merged in (message fields merge, repeated fields append).
config::RunConfig Load(absl::string_view changes = "") {
  auto config = ParseConfig(kGoodConfig, "test.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(google::protobuf::TextFormat::MergeFromString(std::string(changes), &*config));
  ApplyDefaults(&*config);
  return *config;
}

TEST(ConfigTest, GoodConfigValidatesAndGetsDefaults) {
  config::RunConfig config = Load();
  ASSERT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config);
  EXPECT_EQ(config.cluster().host(), "127.0.0.1");
  EXPECT_EQ(config.data().dir(), kDefaultDataDir);
  EXPECT_EQ(config.data().batch_size(), 64u);
  EXPECT_EQ(config.default_instance().training().epochs(), 0u);
  EXPECT_EQ(config.training().epochs(), 1u);
  EXPECT_EQ(config.compression().default_compression().pull().name(), "none");
}

TEST(ConfigTest, TypoNamesFileLineAndField) {
  auto config = ParseConfig("version: 1\ntraining { epohcs: 3 }\n", "x.pbtxt");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("x.pbtxt:2:"), std::string::npos) << config.status();
  EXPECT_NE(config.status().message().find("epohcs"), std::string::npos) << config.status();
}

void ExpectInvalid(absl::string_view changes, absl::string_view needle) {
  config::RunConfig config = Load(changes);
  absl::Status status = ValidateConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(needle), std::string::npos)
      << "expected '" << needle << "' in: " << status;
}

TEST(ConfigTest, ErrorsNameTheField) {
  ExpectInvalid("version: 0", "version: missing");
  ExpectInvalid("version: 2", "version: this build reads version 1");
  ExpectInvalid("cluster { num_workers: 0 }", "cluster.num_workers");
  ExpectInvalid("cluster { server_addresses: 'a:1' }", "cluster.server_addresses");
  ExpectInvalid("cluster { server_addresses: ['a:1', 'b'] }", "cluster.server_addresses[1]");
  ExpectInvalid("model { hidden: 0 }", "model.hidden[2]");
  ExpectInvalid("model { kind: KIND_UNSPECIFIED }", "model.kind");
  ExpectInvalid("optimizer { learning_rate: -1 }", "optimizer.learning_rate");
  ExpectInvalid("optimizer { name: 'adamw' }", "optimizer.name");
  ExpectInvalid("compression { default_compression { push { name: 'topkk' } } }",
                "compression.default_compression.push.name: unknown codec 'topkk'");
  ExpectInvalid("compression { default_compression { pull { name: 'none' count: 3 } } }",
                "compression.default_compression.pull.count");
  ExpectInvalid("compression { shard_overrides { shards: 5 } }",
                "compression.shard_overrides[0].shards: shard 5 does not exist");
  ExpectInvalid("compression { tensor_overrides { pattern: 'conv1.*' } }",
                "compression.tensor_overrides[1].pattern: 'conv1.*' matches no tensor");
}

TEST(ConfigTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadConfigFile("/nonexistent/tamp.pbtxt").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(JobLayoutTest, ResolvesCompressionPerChunk) {
  config::RunConfig config = Load();
  ASSERT_TRUE(ValidateConfig(config).ok());
  auto layout = BuildJobLayout(config);
  ASSERT_TRUE(layout.ok()) << layout.status();
  // 784*64 floats = 200704 bytes -> 4 chunks of 64 KiB or less.
  EXPECT_EQ(layout->total_elements, 784u * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10);
  uint64_t covered = 0;
  for (const ChunkPlan& plan : layout->chunks) {
    const std::string& name = layout->tensor_of(plan).name;
    covered += plan.chunk.length;
    const std::string& push = plan.compression.push().name();
    if (name.rfind("fc3.", 0) == 0) {
      EXPECT_EQ(push, "none") << name;  // Tensor override.
    } else if (plan.chunk.length * 4 < 1024) {
      EXPECT_EQ(push, "none") << name;  // Below min_compress_bytes.
      EXPECT_EQ(plan.compression.push_feedback().kind(), config::ErrorFeedback::NONE);
    } else {
      EXPECT_EQ(push, "topk") << name;
      EXPECT_EQ(plan.compression.push_feedback().kind(), config::ErrorFeedback::RESIDUAL);
    }
  }
  EXPECT_EQ(covered, layout->total_elements);
  EXPECT_EQ(layout->flat_offset(layout->chunks.back()) + layout->chunks.back().chunk.length,
            layout->total_elements);
}

}  // namespace
}  // namespace tamp
