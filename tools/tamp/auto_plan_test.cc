#include "tools/tamp/auto_plan.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "job/config.h"

namespace tamp::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Two workers, one shard, two tensors: a big one (4 MB raw) and a small one (4 KB raw),
// ready at the end of `compute_ms`. Candidate 0 is raw; candidate 1 sends 1% of the bytes
// for an encode of 0.5 ms per MB raw plus a fixed 0.2 ms (and the same decode on the shard).
perf::StepInputs Base(double compute_ms, double bits_per_second) {
  perf::StepInputs base;
  base.num_workers = 2;
  base.num_shards = 1;
  base.compute_ms = compute_ms;
  base.tensor_ready_ms = {compute_ms, compute_ms};
  base.link = {"test", bits_per_second};
  return base;
}

perf::ChunkCost Chunk(uint32_t tensor, uint64_t raw_bytes, bool compressed) {
  perf::ChunkCost cost;
  cost.tensor = tensor;
  perf::RoundCost round;
  round.push_bytes = compressed ? raw_bytes / 100 : raw_bytes;
  round.encode_ms = compressed ? 0.2 + 0.5 * raw_bytes / 1e6 : 0;
  round.server_decode_ms = round.encode_ms;
  cost.rounds = {round};
  cost.pull_bytes = raw_bytes;
  return cost;
}

std::vector<std::vector<perf::ChunkCost>> Costs() {
  return {{Chunk(0, 4000000, false), Chunk(1, 4000, false)},
          {Chunk(0, 4000000, true), Chunk(1, 4000, true)}};
}

TEST(PlanCompressionTest, LinkBoundCompressesTheBigTensorAndKeepsTheSmallOneRaw) {
  // 1 Gbit/s: 4 MB is 32 ms per push; the small tensor's 4 KB is 0.03 ms, less than its
  // fixed encode.
  absl::StatusOr<CompressionPlan> plan = PlanCompression(Base(10, 1e9), Costs(), 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->tensor_candidate, ElementsAre(1, 0));
  ASSERT_EQ(plan->uniform_ms.size(), 2u);
  EXPECT_LT(plan->uniform_ms[1], plan->uniform_ms[0]);
  EXPECT_LE(plan->prediction.step_ms, plan->uniform_ms[1]);  // No worse than all-compressed.
  EXPECT_LT(plan->predictions, 10);
}

TEST(PlanCompressionTest, UnshapedKeepsNoneWhereCompressionDoesNotPay) {
  absl::StatusOr<CompressionPlan> plan = PlanCompression(Base(10, 0), Costs(), 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->tensor_candidate, ElementsAre(0, 0));
  EXPECT_DOUBLE_EQ(plan->prediction.step_ms, plan->uniform_ms[0]);
}

TEST(PlanCompressionTest, OnlyTheListedCandidatesAndConsistentCosts) {
  // One candidate: every tensor on it, whatever it costs.
  absl::StatusOr<CompressionPlan> plan = PlanCompression(Base(10, 0), {Costs()[1]}, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->tensor_candidate, ElementsAre(0, 0));
  EXPECT_FALSE(PlanCompression(Base(10, 0), {}, 0).ok());
  EXPECT_FALSE(PlanCompression(Base(10, 0), {Costs()[0], {Chunk(0, 4, false)}}, 0).ok());
}

TEST(PlanCompressionTest, AGainBelowMinGainKeepsTheFirstCandidateEverywhere) {
  // 8 Gbit/s: raw, the big tensor's pushes and pulls take 4 ms each on the link;
  // compressed, its encode and decode add 4.4 ms to shorten the pushes: a gain of ~5%.
  absl::StatusOr<CompressionPlan> searched = PlanCompression(Base(10, 8e9), Costs(), 0);
  ASSERT_TRUE(searched.ok()) << searched.status();
  ASSERT_THAT(searched->tensor_candidate, ElementsAre(1, 0));
  const double gain = 1 - searched->prediction.step_ms / searched->uniform_ms[0];
  ASSERT_GT(gain, 0.02);
  ASSERT_LT(gain, 0.1);
  EXPECT_FALSE(searched->below_min_gain);

  // A min_gain above that gain: every tensor raw, predicted as all-raw.
  absl::StatusOr<CompressionPlan> kept = PlanCompression(Base(10, 8e9), Costs(), gain + 0.01);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_THAT(kept->tensor_candidate, ElementsAre(0, 0));
  EXPECT_TRUE(kept->below_min_gain);
  EXPECT_DOUBLE_EQ(kept->prediction.step_ms, kept->uniform_ms[0]);
  EXPECT_DOUBLE_EQ(kept->searched_ms, searched->prediction.step_ms);

  // Just below it: the search's plan stands.
  absl::StatusOr<CompressionPlan> taken = PlanCompression(Base(10, 8e9), Costs(), gain - 0.001);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_THAT(taken->tensor_candidate, ElementsAre(1, 0));
  EXPECT_FALSE(taken->below_min_gain);

  for (double bad : {-0.1, 1.0, std::nan("")}) {
    absl::StatusOr<CompressionPlan> refused = PlanCompression(Base(10, 8e9), Costs(), bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_THAT(refused.status().message(), HasSubstr("min_gain"));
  }
}

config::RunConfig Config(const std::string& candidates) {
  absl::StatusOr<config::RunConfig> config = ParseConfig(
      "version: 1 cluster { num_servers: 1 num_workers: 2 } model { kind: MLP hidden: 8 } "
      "optimizer { learning_rate: 0.1 } compression { automatic { bandwidth: '1gbit' " +
          candidates + " } }",
      "auto.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status();
  ApplyDefaults(&*config);
  EXPECT_TRUE(ValidateConfig(*config).ok()) << ValidateConfig(*config);
  return *config;
}

TEST(CheckCandidatesTest, TheConvergenceTablesOnePointRule) {
  // none, fp16, top-k 1% with memory, QSGD 127 levels with memory: measured within a point.
  EXPECT_TRUE(CheckCandidates(Config(
                                  "candidates { push { name: 'none' } } "
                                  "candidates { push { name: 'fp16' } } "
                                  "candidates { push { name: 'topk' ratio: 0.01 } "
                                  "push_feedback { kind: RESIDUAL } } "
                                  "candidates { push { name: 'qsgd' levels: 127 bucket_size: 512 }"
                                  " push_feedback { kind: RESIDUAL } }")
                                  .compression())
                  .ok());
  // Top-k without memory loses 1.74 points on the MLP (0.8699 against 0.8873).
  absl::Status lossy = CheckCandidates(
      Config("candidates { push { name: 'none' } } candidates { push { name: 'topk' ratio: 0.01 } }")
          .compression());
  EXPECT_EQ(lossy.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lossy.message(), HasSubstr("compression.automatic.candidates[1]"));
  EXPECT_THAT(lossy.message(), HasSubstr("loses 1.74 points"));
  EXPECT_THAT(lossy.message(), HasSubstr("mlp_topk1_noef"));
  // Settings nobody measured.
  absl::Status unmeasured = CheckCandidates(
      Config("candidates { push { name: 'topk' ratio: 0.02 } push_feedback { kind: RESIDUAL } }")
          .compression());
  EXPECT_THAT(unmeasured.message(), HasSubstr("not measured in bench/results/convergence.json"));
  // DGC's settings are measured, but only with the servers' momentum moved to the workers:
  // said so, not "not measured".
  absl::Status other_optimizer = CheckCandidates(
      Config("candidates { push { name: 'dgc' ratio: 0.01 sample_ratio: 0.01 } "
             "push_feedback { kind: DGC_MOMENTUM } }")
          .compression());
  EXPECT_EQ(other_optimizer.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other_optimizer.message(),
              HasSubstr("measured in bench/results/convergence.json only under another "
                        "optimizer than its model's uncompressed run (cnn_dgc1_ef, "));
  EXPECT_THAT(other_optimizer.message(), HasSubstr("mlp_dgc1_ef"));
}

TEST(CheckCandidatesTest, OverridesAndEmptyListsAreRefused) {
  config::RunConfig config = Config("candidates { push { name: 'none' } }");
  config.mutable_compression()->add_tensor_overrides()->set_pattern("fc1.*");
  EXPECT_THAT(CheckCandidates(config.compression()).message(),
              HasSubstr("remove shard_overrides and tensor_overrides"));
  absl::StatusOr<config::RunConfig> empty = ParseConfig(
      "version: 1 cluster { num_servers: 1 num_workers: 2 } model { kind: MLP hidden: 8 } "
      "optimizer { learning_rate: 0.1 } compression { automatic { bandwidth: '1gbit' } }",
      "auto.pbtxt");
  ASSERT_TRUE(empty.ok());
  ApplyDefaults(&*empty);
  EXPECT_THAT(ValidateConfig(*empty).message(),
              HasSubstr("compression.automatic.candidates: is empty"));
}

TEST(CheckCandidatesTest, MinGainDefaultsAndOutOfRangeIsRefused) {
  const std::string text =
      "version: 1 cluster { num_servers: 1 num_workers: 2 } model { kind: MLP hidden: 8 } "
      "optimizer { learning_rate: 0.1 } compression { automatic { bandwidth: '1gbit' "
      "candidates { push { name: 'none' } } ";
  absl::StatusOr<config::RunConfig> defaulted = ParseConfig(text + "} }", "auto.pbtxt");
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  ApplyDefaults(&*defaulted);
  EXPECT_DOUBLE_EQ(defaulted->compression().automatic().min_gain(), kDefaultAutoMinGain);
  EXPECT_TRUE(ValidateConfig(*defaulted).ok());

  absl::StatusOr<config::RunConfig> zero = ParseConfig(text + "min_gain: 0 } }", "auto.pbtxt");
  ASSERT_TRUE(zero.ok());
  ApplyDefaults(&*zero);
  EXPECT_EQ(zero->compression().automatic().min_gain(), 0);  // Set, so kept.
  EXPECT_TRUE(ValidateConfig(*zero).ok());

  for (const char* bad : {"-0.01", "1", "1.5"}) {
    absl::StatusOr<config::RunConfig> config =
        ParseConfig(text + "min_gain: " + bad + " } }", "auto.pbtxt");
    ASSERT_TRUE(config.ok());
    ApplyDefaults(&*config);
    EXPECT_THAT(ValidateConfig(*config).message(),
                HasSubstr("compression.automatic.min_gain: is ")) << bad;
  }
}

TEST(ApplyPlanTest, MostChosenIsTheDefaultTheRestOverridesAndProcessesRefuseAuto) {
  const config::RunConfig config =
      Config("candidates { push { name: 'bf16' } } candidates { push { name: 'fp16' } "
             "push_feedback { kind: RESIDUAL } pull { name: 'fp16' } }");
  EXPECT_EQ(BuildJobLayout(config).status().code(), absl::StatusCode::kFailedPrecondition);
  const JobLayout layout = *BuildJobLayout(CandidateConfig(config, 0));
  ASSERT_EQ(layout.tensors.size(), 4u);  // fc1.weight, fc1.bias, fc2.weight, fc2.bias
  CompressionPlan plan;
  plan.tensor_candidate = {1, 0, 1, 1};
  const config::RunConfig resolved = ApplyPlan(config, layout, plan);
  EXPECT_FALSE(resolved.compression().has_automatic());
  EXPECT_EQ(resolved.compression().default_compression().push().name(), "fp16");
  ASSERT_EQ(resolved.compression().tensor_overrides_size(), 1);
  EXPECT_EQ(resolved.compression().tensor_overrides(0).pattern(), "fc1.bias");
  EXPECT_EQ(resolved.compression().tensor_overrides(0).compression().push().name(), "bf16");
  absl::StatusOr<JobLayout> built = BuildJobLayout(resolved);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->chunks[1].compression.push().name(), "bf16");
  EXPECT_EQ(built->chunks[1].compression.push_feedback().kind(), config::ErrorFeedback::NONE);
  EXPECT_EQ(built->chunks[1].compression.pull().name(), "none");
  EXPECT_EQ(built->chunks[0].compression.push().name(), "fp16");
  // As written for every process: the override names every part, so loading the file notes
  // nothing left out of the default (fp16 both ways, RESIDUAL).
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(resolved, &text));
  std::vector<std::string> notes;
  ASSERT_TRUE(LoadConfigText(text, "auto.pbtxt", &notes).ok());
  EXPECT_THAT(notes, ::testing::IsEmpty());
}

}  // namespace
}  // namespace tamp::launcher
