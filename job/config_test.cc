#include "job/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/job_layout.h"

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
  EXPECT_EQ(config.cluster().fusion_bytes(), kDefaultFusionBytes);
  EXPECT_EQ(Load("cluster { fusion_bytes: 0 }").cluster().fusion_bytes(), 0u);  // Off.
  // A smaller message limit lowers the default to what it allows.
  const config::RunConfig small = Load("validation { max_message_bytes: 65536 }");
  EXPECT_TRUE(ValidateConfig(small).ok()) << ValidateConfig(small);
  EXPECT_EQ(small.cluster().fusion_bytes(), 16384u);
}

TEST(ConfigTest, ANameMayBeAnyUtf8Text) {
  const config::RunConfig config = Load("name: 'résumé ☃ 試し (lr 0.05)'");
  EXPECT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config);
  EXPECT_TRUE(ValidateConfig(Load("name: ''")).ok());
  // Overlong, surrogate, truncated: not UTF-8.
  for (const char* bad :
       {"name: 'a\\xc0\\x80'", "name: '\\xed\\xa0\\x80'", "name: 'x\\xe2\\x98'"}) {
    EXPECT_FALSE(ValidateConfig(Load(bad)).ok()) << bad;
  }
}

TEST(ConfigTest, TypoNamesFileLineAndField) {
  auto config = ParseConfig("version: 1\ntraining { epohcs: 3 }\n", "x.pbtxt");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("x.pbtxt:2:"), std::string::npos) << config.status();
  EXPECT_NE(config.status().message().find("epohcs"), std::string::npos) << config.status();
}

// A 0 the defaults would read as "not given" is refused where the file writes it, naming
// the default; left out, the default applies; any other value is taken.
TEST(ConfigTest, AZeroThatWouldSilentlyBeTheDefaultIsRefusedNamingFileAndLine) {
  const struct {
    const char* text;
    const char* message;
  } cases[] = {
      {"version: 1\ndata { batch_size: 0 }\n",
       "x.pbtxt:2:8: data.batch_size: must be at least 1, got 0 (leave it out for the default, "
       "64)"},
      {"version: 1\ntraining {\n  epochs: 0\n}\n",
       "x.pbtxt:3:3: training.epochs: must be at least 1, got 0 (leave it out for the default, 1)"},
      {"version: 1\ncompression { partition_bytes: 0 }\n",
       "compression.partition_bytes: must be at least 1, got 0"},
      {"version: 1\ncluster { rpc_timeout_ms: 0 }\n", "cluster.rpc_timeout_ms: must be at least 1"},
      {"version: 1\nvalidation { max_message_bytes: 0 }\n",
       "validation.max_message_bytes: must be at least 1"},
  };
  for (const auto& c : cases) {
    const absl::StatusOr<config::RunConfig> config = ParseConfig(c.text, "x.pbtxt");
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(config.status().message()), ::testing::HasSubstr(c.message)) << c.text;
  }
  absl::StatusOr<config::RunConfig> left_out = ParseConfig("version: 1\ndata { }\n", "x.pbtxt");
  ASSERT_TRUE(left_out.ok()) << left_out.status();
  ApplyDefaults(&*left_out);
  EXPECT_EQ(left_out->data().batch_size(), 64u);
  absl::StatusOr<config::RunConfig> given =
      ParseConfig("version: 1\ndata { batch_size: 32 }\ntraining { epochs: 2 }\n", "x.pbtxt");
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ(given->data().batch_size(), 32u);
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
  ExpectInvalid("cluster { server_addresses: ['a:1', 'a:1'] }", "'a:1' is given twice");
  ExpectInvalid("cluster { fusion_bytes: 67108865 }",
                "cluster.fusion_bytes: is 67108865; at most 67108864");
  ExpectInvalid("cluster { fusion_bytes: 4096 } validation { max_message_bytes: 8192 }",
                "cluster.fusion_bytes: is 4096; at most 2048 (64 MiB, and "
                "validation.max_message_bytes / 4: a batch of pushes travels in one message), "
                "or 0 for no fusion");
  ExpectInvalid("name: 'q\\xff'", "name: must be UTF-8 text");
  ExpectInvalid("name: 'a\\nb'", "name: must be UTF-8 text");
  ExpectInvalid("model { hidden: 0 }", "model.hidden[2]");
  ExpectInvalid("model { kind: KIND_UNSPECIFIED }", "model.kind");
  ExpectInvalid("optimizer { learning_rate: -1 }", "optimizer.learning_rate");
  ExpectInvalid("optimizer { name: 'adamw' }", "optimizer.name");
  ExpectInvalid("compression { default_compression { push { name: 'topkk' } } }",
                "compression.default_compression.push.name: unknown codec 'topkk'");
  ExpectInvalid("compression { default_compression { pull { name: 'none' count: 3 } } }",
                "compression.default_compression.pull.count");
  // 784-64-32-1024-10: 96362 values, one chunk each.
  ExpectInvalid("model { hidden: 1024 } compression { partition_bytes: 4 }",
                "compression.partition_bytes: 4 splits the model into 96362 chunks");
  ExpectInvalid("compression { shard_overrides { shards: 5 } }",
                "compression.shard_overrides[0].shards: shard 5 does not exist");
  ExpectInvalid("compression { tensor_overrides { pattern: 'conv1.*' } }",
                "compression.tensor_overrides[1].pattern: 'conv1.*' matches no tensor");
}

TEST(ConfigTest, RegisteredModelsAndAggregatingServers) {
  ExpectInvalid("model { kind: REGISTERED }",  // kGoodConfig's model has hidden layers.
                "model: kind REGISTERED takes its tensors from the workers");
  auto registered = [](absl::string_view text) {
    absl::StatusOr<config::RunConfig> config = ParseConfig(text, "registered.pbtxt");
    EXPECT_TRUE(config.ok()) << config.status();
    ApplyDefaults(&*config);
    return ValidateConfig(*config);
  };
  EXPECT_TRUE(registered("version: 1 cluster { num_servers: 1 num_workers: 2 } model { kind: REGISTERED } "
                         "optimizer { learning_rate: 0.1 } server { mode: AGGREGATE }").ok());
  // Checkpoints hold the registered tensors (server/checkpoint.h JobIdentity.tensors).
  EXPECT_TRUE(registered("version: 1 cluster { num_servers: 1 num_workers: 2 } model { kind: "
                         "REGISTERED } optimizer { learning_rate: 0.1 } checkpoint { dir: '/tmp/x' }")
                  .ok());
  // AGGREGATE servers run no optimizer: it may be left out (and stays out), but one given is
  // still checked; the servers' optimizer mode still needs one.
  absl::StatusOr<config::RunConfig> no_optimizer = ParseConfig(
      "version: 1 cluster { num_servers: 1 num_workers: 2 } model { kind: REGISTERED } "
      "server { mode: AGGREGATE }",
      "aggregate.pbtxt");
  ASSERT_TRUE(no_optimizer.ok()) << no_optimizer.status();
  ApplyDefaults(&*no_optimizer);
  EXPECT_FALSE(no_optimizer->has_optimizer());
  EXPECT_TRUE(ValidateConfig(*no_optimizer).ok()) << ValidateConfig(*no_optimizer);
  EXPECT_EQ(registered("version: 1 cluster { num_servers: 1 num_workers: 2 } "
                       "model { kind: REGISTERED } optimizer { learning_rate: -1 } "
                       "server { mode: AGGREGATE }")
                .message(),
            "optimizer.learning_rate: must be > 0 and finite, got -1");
  EXPECT_THAT(std::string(registered("version: 1 cluster { num_servers: 1 num_workers: 2 } "
                                      "model { kind: REGISTERED } server { mode: OPTIMIZER }")
                               .message()),
              ::testing::StartsWith("optimizer: missing: the servers run the config's optimizer"));
  ExpectInvalid("server { mode: AGGREGATE } consistency { mode: ASYNC }",
                "server.mode: AGGREGATE needs consistency.mode SYNC, not ASYNC");
  ExpectInvalid("server { mode: AGGREGATE } training { resync_steps: 10 }",
                "training.resync_steps: must be 0 with server.mode AGGREGATE");
  ExpectInvalid("server { mode: AGGREGATE } checkpoint { dir: '/tmp/x' }",
                "checkpoint: not supported with server.mode AGGREGATE");
}

TEST(ConfigTest, DeviceDefaultsToCpuAndCudaRunsOnlyTheBuiltInModels) {
  EXPECT_EQ(Load().device(), config::CPU);
  EXPECT_TRUE(ValidateConfig(Load("device: CUDA")).ok());
  absl::StatusOr<config::RunConfig> registered = ParseConfig(
      "version: 1 cluster { num_servers: 1 num_workers: 2 } model { kind: REGISTERED } "
      "optimizer { learning_rate: 0.1 } device: CUDA",
      "registered.pbtxt");
  ASSERT_TRUE(registered.ok()) << registered.status();
  ApplyDefaults(&*registered);
  const absl::Status refused = ValidateConfig(*registered);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "device: CUDA runs model.kind MLP or CNN, not REGISTERED");
  config::RunConfig unknown = Load();
  unknown.set_device(static_cast<config::Device>(7));
  EXPECT_EQ(ValidateConfig(unknown).message(), "device: unknown device 7");
}

TEST(ConfigTest, AdamWithCosineScheduleAndWarmup) {
  // The syntax users write; momentum: 0 only undoes kGoodConfig's SGD momentum.
  config::RunConfig config = Load(R"pb(
    optimizer {
      name: "adam"
      learning_rate: 0.001
      momentum: 0
      weight_decay: 0.0001
      schedule { kind: COSINE min_lr: 0.00001 warmup_epochs: 0.5 }
    }
  )pb");
  ASSERT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config);
  const config::Optimizer& optimizer = config.optimizer();
  EXPECT_EQ(optimizer.schedule().kind(), config::Schedule::COSINE);
  EXPECT_EQ(optimizer.schedule().warmup_epochs(), 0.5);
  // Adam's defaults are filled in on load, so every process sees the same values.
  EXPECT_TRUE(optimizer.has_beta1());
  EXPECT_EQ(optimizer.beta1(), 0.9f);
  EXPECT_EQ(optimizer.beta2(), 0.999f);
  EXPECT_EQ(optimizer.epsilon(), 1e-8f);
  // ... and only for adam.
  EXPECT_FALSE(Load().optimizer().has_beta1());
}

TEST(ConfigTest, OptimizerAndScheduleErrorsNameTheField) {
  ExpectInvalid("optimizer { name: 'adam' beta2: 1 momentum: 0 }",
                "optimizer.beta2: must be in [0, 1), got 1");
  ExpectInvalid("optimizer { name: 'adam' }", "optimizer.momentum: not used by adam");
  ExpectInvalid("optimizer { beta1: 0.8 }", "optimizer.beta1: not used by sgd");
  ExpectInvalid("optimizer { schedule { kind: STEP decay_factor: 1.5 decay_epochs: 10 } }",
                "optimizer.schedule.decay_factor: must be in (0, 1], got 1.5");
  ExpectInvalid("optimizer { schedule { kind: STEP decay_factor: 0.1 } }",
                "optimizer.schedule.decay_epochs: required for kind STEP");
  ExpectInvalid("optimizer { schedule { kind: COSINE min_lr: 0.5 } }",
                "optimizer.schedule.min_lr: must be in [0, optimizer.learning_rate");
  ExpectInvalid("optimizer { schedule { warmup_epochs: -1 } }",
                "optimizer.schedule.warmup_epochs: must be >= 0");
}

TEST(ConfigTest, AFileThatCannotBeReadIsNamedWithTheReason) {
  EXPECT_THAT(std::string(LoadConfigFile("/nonexistent/job.pbtxt").status().message()),
              ::testing::HasSubstr("'/nonexistent/job.pbtxt' cannot be read: No such file"));
  EXPECT_THAT(std::string(LoadConfigFile(::testing::TempDir()).status().message()),
              ::testing::HasSubstr("cannot be read: Is a directory"));
}

TEST(ConfigTest, AMissingOptimizerIsNamedUnlessTheServersAggregate) {
  config::RunConfig config = Load();
  config.clear_optimizer();
  ApplyDefaults(&config);
  const absl::Status missing = ValidateConfig(config);
  EXPECT_TRUE(absl::IsInvalidArgument(missing)) << missing;
  EXPECT_NE(missing.message().find("optimizer: missing: the servers run the config's "
                                   "optimizer"),
            std::string::npos)
      << missing;
  config.mutable_server()->set_mode(config::Server::AGGREGATE);
  EXPECT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config);
}

TEST(ConfigTest, CnnGetsDefaultShapeAndErrorsNameTheField) {
  auto config = ParseConfig(R"pb(
                              version: 1
                              cluster { num_servers: 2 num_workers: 2 }
                              model { kind: CNN fc_hidden: 128 }
                              optimizer { learning_rate: 0.1 }
                            )pb",
                            "cnn.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status();
  ApplyDefaults(&*config);
  ASSERT_TRUE(ValidateConfig(*config).ok()) << ValidateConfig(*config);
  const config::Model& model = config->model();
  EXPECT_EQ(std::vector<uint32_t>(model.conv_channels().begin(), model.conv_channels().end()),
            (std::vector<uint32_t>{32, 64}));
  EXPECT_EQ(model.kernel_size(), 5u);
  EXPECT_EQ(model.fc_hidden_size(), 1);
  auto layout = BuildJobLayout(*config);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->total_elements,
            32u * 25 + 32 + 64 * 32 * 25 + 64 + 128 * 64 * 7 * 7 + 128 + 10 * 128 + 10);
  // An MLP gets no CNN defaults, and rejects CNN fields.
  EXPECT_EQ(Load().model().kernel_size(), 0u);
  ExpectInvalid("model { kernel_size: 3 }", "model.kernel_size: is for kind CNN");
  ExpectInvalid("model { kind: CNN kernel_size: 4 }", "model.hidden: is for kind MLP");
}

TEST(ConfigTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadConfigFile("/nonexistent/tamp.pbtxt").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ConfigTest, TextLoadsLikeAFileAndErrorsNameTheSource) {
  absl::StatusOr<config::RunConfig> loaded = LoadConfigText(kGoodConfig, "<text>");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->training().epochs(), 1u);  // Defaults filled in.
  const absl::StatusOr<config::RunConfig> bad =
      LoadConfigText("version: 1 cluster { num_servers: 1 num_workers: 0 }", "job.pbtxt");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "job.pbtxt: cluster.num_workers"))
      << bad.status();
}

TEST(ConfigTest, TotalStepsIsEpochsOfStepsCutAtMaxSteps) {
  config::Training training;
  training.set_epochs(3);
  EXPECT_EQ(TotalSteps(training, 100), 300u);
  training.set_max_steps(250);
  EXPECT_EQ(TotalSteps(training, 100), 250u);
  EXPECT_EQ(TotalSteps(training, 80), 240u);  // The cut only shortens a run.
  training.set_max_steps(0);
  EXPECT_EQ(TotalSteps(training, UINT64_MAX / 2), UINT64_MAX);  // Saturates, never wraps.
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

// DGC's momentum correction with a momentum optimizer applies momentum twice (the job
// diverged at step 73 with bench/configs/mlp_dgc1_ef.pbtxt so configured).
TEST(ConfigTest, DgcMomentumCorrectionRefusesAServerMomentum) {
  ExpectInvalid("compression { default_compression { push_feedback { kind: DGC_MOMENTUM } } }",
                "optimizer.momentum: is 0.9 but compression.default_compression.push_feedback "
                "is DGC_MOMENTUM");
  ExpectInvalid(
      "compression { tensor_overrides { pattern: \"fc1.*\" compression { push { name: \"dgc\" "
      "ratio: 0.01 } push_feedback { kind: DGC_MOMENTUM } } } }",
      "compression.tensor_overrides[1].compression.push_feedback is DGC_MOMENTUM");
  const config::RunConfig plain_sgd = Load(
      "optimizer { momentum: 0 } "
      "compression { default_compression { push_feedback { kind: DGC_MOMENTUM } } }");
  EXPECT_TRUE(ValidateConfig(plain_sgd).ok()) << ValidateConfig(plain_sgd);
  // Residual error feedback keeps no momentum: a server momentum is fine with it.
  const config::RunConfig residual =
      Load("compression { default_compression { push_feedback { kind: RESIDUAL } } }");
  EXPECT_TRUE(ValidateConfig(residual).ok()) << ValidateConfig(residual);
  // Adam's first moment is a momentum too.
  ExpectInvalid("optimizer { name: 'adam' momentum: 0 } "
                "compression { default_compression { push_feedback { kind: DGC_MOMENTUM } } }",
                "optimizer.name: is adam, whose first moment (beta1) is a momentum");
  // In AGGREGATE mode an optimizer section is the workers' own, held to the same rule (the
  // job diverged so configured); without one there is nothing to check.
  ExpectInvalid("server { mode: AGGREGATE } "
                "compression { default_compression { push_feedback { kind: DGC_MOMENTUM } } }",
                "optimizer.momentum: is 0.9 but compression.default_compression.push_feedback "
                "is DGC_MOMENTUM, whose momentum correction already applies momentum on the "
                "workers; applied twice by the workers' optimizer (AGGREGATE mode)");
  config::RunConfig no_optimizer = Load(
      "server { mode: AGGREGATE } "
      "compression { default_compression { push_feedback { kind: DGC_MOMENTUM } } }");
  no_optimizer.clear_optimizer();
  EXPECT_TRUE(ValidateConfig(no_optimizer).ok()) << ValidateConfig(no_optimizer);
}

// DGC's momentum factor masking clears the momentum of every entry sent: around a codec that
// sends every entry it keeps none, silently.
TEST(ConfigTest, DgcMomentumNeedsASparsifyingPushCodec) {
  const auto with_push = [](absl::string_view push) {
    return absl::StrCat("optimizer { momentum: 0 } compression { tensor_overrides { pattern: "
                        "'fc1.*' compression { push { ", push,
                        " } push_feedback { kind: DGC_MOMENTUM } } } }");
  };
  for (const char* dense : {"name: 'none'", "name: 'fp16'", "name: 'qsgd' levels: 16",
                            "name: 'powersgd' rank: 2"}) {
    ExpectInvalid(with_push(dense),
                  "compression.tensor_overrides[1].compression.push_feedback.kind: "
                  "DGC_MOMENTUM needs a sparsifying push codec (topk, dgc, threshold, randomk, "
                  "randomblock): its momentum factor masking clears the momentum of every entry "
                  "sent, and codec '");
  }
  for (const char* sparse : {"name: 'topk' ratio: 0.01", "name: 'dgc' ratio: 0.01",
                             "name: 'threshold' threshold: 0.01", "name: 'randomk' ratio: 0.01",
                             "name: 'randomblock' ratio: 0.01"}) {
    const config::RunConfig config = Load(with_push(sparse));
    EXPECT_TRUE(ValidateConfig(config).ok()) << sparse << ": " << ValidateConfig(config);
  }
}

// compression.automatic's plan may put any candidate on any tensor, so each candidate is held
// to the rules every other compression block is: DGC's momentum correction next to a server
// momentum, and multi-round push codecs outside SYNC, are refused naming the candidate.
// kGoodConfig without its own compression choices (automatic makes them), `changes` merged.
config::RunConfig LoadAutomatic(absl::string_view changes) {
  auto config = ParseConfig(kGoodConfig, "test.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status();
  config->mutable_compression()->clear_default_compression();
  config->mutable_compression()->clear_tensor_overrides();
  EXPECT_TRUE(google::protobuf::TextFormat::MergeFromString(std::string(changes), &*config));
  ApplyDefaults(&*config);
  return *config;
}

void ExpectAutomaticInvalid(absl::string_view changes, absl::string_view needle) {
  const absl::Status status = ValidateConfig(LoadAutomatic(changes));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(needle), std::string::npos)
      << "expected '" << needle << "' in: " << status;
}

TEST(ConfigTest, AutomaticCandidatesObeyTheRulesOfEveryCompressionBlock) {
  const std::string dgc =
      "candidates { push { name: 'none' } } candidates { push { name: 'dgc' ratio: 0.01 } "
      "push_feedback { kind: DGC_MOMENTUM } pull { name: 'topk' ratio: 0.01 } "
      "pull_feedback { kind: RESIDUAL } }";
  ExpectAutomaticInvalid(
      "compression { automatic { bandwidth: '1gbit' " + dgc + " } }",
      "optimizer.momentum: is 0.9 but compression.automatic.candidates[1].push_feedback "
      "is DGC_MOMENTUM");
  const config::RunConfig plain_sgd = LoadAutomatic(
      "optimizer { momentum: 0 } compression { automatic { bandwidth: '1gbit' " + dgc + " } }");
  EXPECT_TRUE(ValidateConfig(plain_sgd).ok()) << ValidateConfig(plain_sgd);
  ExpectAutomaticInvalid(
      "consistency { mode: ASYNC } compression { automatic { bandwidth: '1gbit' candidates { "
      "push { name: 'none' } } candidates { push { name: 'powersgd' rank: 2 } } } }",
      "compression.automatic.candidates[1].push.name: codec 'powersgd' takes 2 rounds per step");
  // Its own default beside it would be dropped by the plan: refused (an explicit none is no
  // choice, and stands).
  ExpectAutomaticInvalid(
      "optimizer { momentum: 0 } compression { default_compression { push { name: 'maxmin' "
      "bits: 2 } } automatic { bandwidth: '1gbit' " + dgc + " } }",
      "compression.default_compression: is set beside compression.automatic");
  EXPECT_TRUE(ValidateConfig(LoadAutomatic("optimizer { momentum: 0 } compression { "
                                           "default_compression { push { name: 'none' } } "
                                           "automatic { bandwidth: '1gbit' " + dgc + " } }"))
                  .ok());
}

TEST(ConfigTest, OverridesNeedTheirCompressionAndPatternsThatMatch) {
  ExpectInvalid("compression { tensor_overrides { pattern: 'fc2.weight' } }",
                "compression.tensor_overrides[1].compression: missing: an override names its "
                "codecs");
  ExpectInvalid("compression { shard_overrides { shards: 0 } }",
                "compression.shard_overrides[0].compression: missing");
  ExpectInvalid("compression { tensor_overrides { pattern: 'fc*.kernel' compression { push { "
                "name: 'none' } } } }",
                "compression.tensor_overrides[1].pattern: 'fc*.kernel' matches no tensor "
                "(tensors: fc1.weight");
  ExpectInvalid("compression { tensor_overrides { pattern: '' compression { push { name: "
                "'none' } } } }",
                "compression.tensor_overrides[1].pattern: ''");
}

TEST(ConfigTest, DgcClippingAndSparsityWarmupErrorsNameTheField) {
  const config::RunConfig good = Load(
      "optimizer { momentum: 0 } "
      "compression { clip_norm: 5 default_compression { push { ratio_warmup: [0.25, 0.0625] } "
      "push_feedback { kind: DGC_MOMENTUM momentum: 0.9 } } }");
  EXPECT_TRUE(ValidateConfig(good).ok()) << ValidateConfig(good);
  ExpectInvalid("compression { clip_norm: 0 }", "compression.clip_norm: must be > 0 and finite, got 0");
  ExpectInvalid("compression { clip_norm: -1 }", "compression.clip_norm: must be > 0");
  ExpectInvalid("compression { clip_norm: inf }", "compression.clip_norm: must be > 0");
  ExpectInvalid("compression { default_compression { push { ratio_warmup: [0.5, 2] } } }",
                "compression.default_compression.push.ratio_warmup[1]: must be in (0, 1], got 2");
  ExpectInvalid(
      "compression { default_compression { pull { name: 'topk' ratio: 0.1 ratio_warmup: 0.5 } } }",
      "compression.default_compression.pull.ratio_warmup: sparsity warm-up applies to push "
      "codecs only");
  ExpectInvalid(
      "compression { tensor_overrides { pattern: 'fc1.*' compression { push { name: 'qsgd' "
      "levels: 3 ratio_warmup: 0.5 } } } }",
      "compression.tensor_overrides[1].compression.push.ratio_warmup: codec 'qsgd' takes no "
      "parameter 'ratio_warmup'");
}

TEST(ConfigTest, CheckpointsInEveryModeAndWithMultiRoundCodecs) {
  const config::RunConfig good = Load("checkpoint { dir: 'ckpt' every_steps: 50 }");
  EXPECT_TRUE(ValidateConfig(good).ok()) << ValidateConfig(good);
  EXPECT_EQ(good.checkpoint().reconnect_timeout_ms(), 60000u);
  EXPECT_FALSE(Load().has_checkpoint());
  EXPECT_EQ(Load("checkpoint { reconnect_timeout_ms: 0 }").checkpoint().reconnect_timeout_ms(),
            0u);
  for (const char* mode : {"mode: ASYNC", "mode: SSP staleness: 2"}) {
    const config::RunConfig async =
        Load(absl::StrCat("checkpoint { every_steps: 5 } consistency { ", mode, " }"));
    EXPECT_TRUE(ValidateConfig(async).ok()) << mode << ": " << ValidateConfig(async);
  }
  const config::RunConfig powersgd = Load(
      "checkpoint { every_steps: 5 } compression { tensor_overrides { pattern: 'fc1.*' "
      "compression { push { name: 'powersgd' rank: 2 } } } }");
  EXPECT_TRUE(ValidateConfig(powersgd).ok()) << ValidateConfig(powersgd);
}

// The pull carries the servers' update, which workers add as decoded: a sign codec's +-1 per
// element moved every weight by +-1 a step (the loss went from 2.97 to 3680 in one step).
TEST(ConfigTest, SignCodecsCannotCarryThePull) {
  ExpectInvalid("compression { default_compression { pull { name: 'signsgd' } } }",
                "compression.default_compression.pull.name: codec 'signsgd' cannot carry the "
                "pull (the servers' update, or in AGGREGATE mode the mean gradient): its decode "
                "is +-1 per element");
  ExpectInvalid("compression { default_compression { pull { name: 'signum' momentum: 0.9 } } }",
                "compression.default_compression.pull.name: codec 'signum' cannot carry the "
                "pull");
  ExpectInvalid("compression { shard_overrides { shards: 1 compression { pull { name: 'signsgd' "
                "} } } }",
                "compression.shard_overrides[0].compression.pull.name: codec 'signsgd' cannot "
                "carry");
  ExpectInvalid("compression { tensor_overrides { pattern: 'fc1.*' compression { pull { name: "
                "'signum' } } } }",
                "compression.tensor_overrides[1].compression.pull.name: codec 'signum' cannot "
                "carry");
  // The refusal names the codecs that can.
  ExpectInvalid("compression { default_compression { pull { name: 'signsgd' } } }",
                "e.g. topk with pull_feedback RESIDUAL (all: none, topk, fp16");
  // On the push they are what they are for (a majority vote); scaled signs can pull. (An
  // override: kGoodConfig's default push sets a ratio, which sign codecs do not take.)
  for (const char* ok : {"push { name: 'signsgd' } push_feedback { kind: NONE }",
                         "push { name: 'signum' } push_feedback { kind: NONE }",
                         "pull { name: 'efsign' } pull_feedback { kind: RESIDUAL }",
                         "pull { name: 'qsgd' levels: 127 } pull_feedback { kind: RESIDUAL }"}) {
    const config::RunConfig config =
        Load(absl::StrCat("compression { tensor_overrides { pattern: 'fc1.*' compression { ", ok,
                          " } } }"));
    EXPECT_TRUE(ValidateConfig(config).ok()) << ok << ": " << ValidateConfig(config);
  }
}

// DGC_MOMENTUM on the pull would apply momentum a second time to an update that holds the
// servers' optimizer momentum already.
TEST(ConfigTest, PullFeedbackCannotBeDgcMomentum) {
  ExpectInvalid("optimizer { momentum: 0 } compression { default_compression { pull { name: "
                "'topk' ratio: 0.01 } pull_feedback { kind: DGC_MOMENTUM } } }",
                "compression.default_compression.pull_feedback.kind: DGC_MOMENTUM cannot wrap "
                "the pull");
  ExpectInvalid("optimizer { momentum: 0 } compression { tensor_overrides { pattern: 'fc2.*' "
                "compression { pull_feedback { kind: DGC_MOMENTUM } } } }",
                "compression.tensor_overrides[1].compression.pull_feedback.kind: DGC_MOMENTUM");
}

// Error feedback parameters are checked at load, with the field's path, not when a server
// first builds a chunk.
TEST(ConfigTest, ErrorFeedbackSpecsAreCheckedAtLoad) {
  ExpectInvalid("compression { default_compression { push_feedback { scale: 2 } } }",
                "compression.default_compression.push_feedback.scale: must be in (0, 1], got 2");
  ExpectInvalid("compression { shard_overrides { shards: 0 compression { pull_feedback { kind: "
                "RESIDUAL momentum: 0.5 } } } }",
                "compression.shard_overrides[0].compression.pull_feedback.momentum");
}

// Every config the repository ships (examples/, bench/configs/ and its recommended/ settings
// per codec) loads: a validation rule must not refuse what users start from.
TEST(ConfigTest, EveryShippedConfigLoads) {
  std::vector<std::string> paths;
  for (const char* dir : {"examples", "bench/configs"}) {
    ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " is not in the runfiles";
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             dir, std::filesystem::directory_options::follow_directory_symlink)) {
      if (entry.path().extension() == ".pbtxt") paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  // 4 examples, the PyTorch examples' 2 and the C++ client example's, the 15 bench configs
  // and one recommended config per codec.
  EXPECT_GE(paths.size(), 4u + 2u + 1u + 15u + 16u);
  for (const std::string& path : paths) {
    auto config = LoadConfigFile(path);
    EXPECT_TRUE(config.ok()) << config.status();
  }
}

}  // namespace
}  // namespace tamp

namespace tamp {
namespace {

// model.kind LAYOUT: files relative to the config's directory, their errors named, and the
// run's length a step count.
class LayoutConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) / "layout_config";
    std::filesystem::create_directories(dir_ / "m");
    Write("m/t.layout", "tamp-layout 1\nw 8 4\nb 8\n");
    Write("m/t.profile", "tamp-profile 1\nscale 1\nlayer 1 2 w b\n");
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  absl::StatusOr<config::RunConfig> LoadWith(const std::string& model_and_training) {
    Write("job.pbtxt", "version: 1 cluster { num_servers: 1 num_workers: 2 } "
                       "optimizer { learning_rate: 0.1 } " +
                           model_and_training);
    return LoadConfigFile((dir_ / "job.pbtxt").string());
  }
  std::filesystem::path dir_;
};

TEST_F(LayoutConfigTest, RelativeFilesAreTheConfigsDirectorys) {
  absl::StatusOr<config::RunConfig> config = LoadWith(
      "model { kind: LAYOUT layout_file: 'm/t.layout' profile_file: 'm/t.profile' } "
      "training { max_steps: 5 }");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model().layout_file(), (dir_ / "m/t.layout").string());
  EXPECT_EQ(config->model().profile_file(), (dir_ / "m/t.profile").string());
  absl::StatusOr<JobLayout> layout = BuildJobLayout(*config);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->total_elements, 40u);
}

// REGISTERED with the files: the workers' tensors described ahead (for tamp model and
// compression.automatic); the workers must register exactly these.
TEST_F(LayoutConfigTest, RegisteredTensorsDescribedAheadAreTheOnlyOnesTaken) {
  absl::StatusOr<config::RunConfig> config = LoadWith(
      "model { kind: REGISTERED layout_file: 'm/t.layout' profile_file: 'm/t.profile' }");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<JobLayout> described = BuildJobLayout(*config);
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->total_elements, 40u);
  std::vector<TensorSpec> registered = {{"w", {8, 4}}, {"b", {8}}};
  absl::StatusOr<JobLayout> same = BuildJobLayout(*config, registered);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->chunks.size(), described->chunks.size());
  registered[0].shape = {4, 8};
  absl::StatusOr<JobLayout> other = BuildJobLayout(*config, registered);
  EXPECT_TRUE(absl::IsInvalidArgument(other.status())) << other.status();
  EXPECT_NE(other.status().message().find("the registered tensors are not model.layout_file's: "
                                          "tensor 0: registered \"w\" [4, 8] vs "
                                          "model.layout_file \"w\" [8, 4]"),
            std::string::npos)
      << other.status();
  // Without the files: no layout before the workers register (an error that says how).
  absl::StatusOr<config::RunConfig> bare = LoadWith("model { kind: REGISTERED }");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_NE(BuildJobLayout(*bare).status().message().find("model.layout_file with a "
                                                          "profile_file describes them ahead"),
            std::string::npos);
  absl::StatusOr<config::RunConfig> half =
      LoadWith("model { kind: REGISTERED layout_file: 'm/t.layout' }");
  EXPECT_NE(half.status().message().find(
                "model.profile_file: required with model.layout_file (kind REGISTERED)"),
            std::string::npos)
      << half.status();
}

TEST_F(LayoutConfigTest, RefusalsNameTheFieldAndTheFilesLine) {
  const std::string files = "layout_file: 'm/t.layout' profile_file: 'm/t.profile' ";
  auto message = [&](const std::string& text) {
    absl::StatusOr<config::RunConfig> config = LoadWith(text);
    EXPECT_FALSE(config.ok()) << text;
    return std::string(config.status().message());
  };
  EXPECT_NE(message("model { kind: LAYOUT " + files + "}")
                .find("training.max_steps: required (> 0) with model.kind LAYOUT"),
            std::string::npos);
  EXPECT_NE(message("model { kind: LAYOUT " + files + "} training { max_steps: 5 epochs: 2 }")
                .find("training.epochs: must be 1"),
            std::string::npos);
  EXPECT_NE(message("model { kind: LAYOUT layout_file: 'm/t.layout' } training { max_steps: 5 }")
                .find("model.profile_file: required with model.layout_file (kind LAYOUT)"),
            std::string::npos);
  EXPECT_NE(message("model { kind: MLP hidden: 4 layout_file: 'm/t.layout' }")
                .find("model.layout_file: is for kinds LAYOUT and REGISTERED"),
            std::string::npos);
  Write("m/bad.profile", "tamp-profile 1\nscale 1\nlayer 1 2 w\n");
  EXPECT_NE(message("model { kind: LAYOUT layout_file: 'm/t.layout' profile_file: "
                    "'m/bad.profile' } training { max_steps: 5 }")
                .find("model.profile_file: " + (dir_ / "m/bad.profile").string() +
                      ": tensor 'b' of the layout is in no layer"),
            std::string::npos);
  Write("m/bad.layout", "tamp-layout 1\nw 8 -4\n");
  EXPECT_NE(message("model { kind: LAYOUT layout_file: 'm/bad.layout' profile_file: "
                    "'m/t.profile' } training { max_steps: 5 }")
                .find("model.layout_file: " + (dir_ / "m/bad.layout").string() +
                      ":2: tensor 'w': dimension 2 '-4' is not an integer in [1, 2^40]"),
            std::string::npos);
}

}  // namespace
}  // namespace tamp
