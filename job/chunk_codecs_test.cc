#include "job/chunk_codecs.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/config.h"
#include "job/job_layout.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

absl::Status CheckConfig(const std::string& compression) {
  const absl::StatusOr<config::RunConfig> config = LoadConfigText(
      absl::StrCat("version: 1 cluster { num_servers: 2 num_workers: 2 } "
                   "model { kind: MLP hidden: [64] } optimizer { learning_rate: 0.1 } "
                   "compression { ",
                   compression, " }"),
      "job.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status();  // Valid codec by codec.
  const absl::StatusOr<JobLayout> layout = BuildJobLayout(*config);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return CheckChunkCodecs(*layout);
}

TEST(CheckChunkCodecsTest, AChunkTooSmallForItsCodecIsNamed) {
  // powersgd rank 4 on the biases (64 and 10 values, viewed near-square as 8 x 8 and 3 x 4).
  const absl::Status refused =
      CheckConfig("default_compression { push { name: 'powersgd' rank: 4 } }");
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("(fc2.bias): push: codec 'powersgd': rank 4 needs a "
                                           "matrix of at least 4 x 4"));
}

TEST(CheckChunkCodecsTest, AConfigsBuiltInLayoutIsChecked) {
  const char* text =
      "version: 1 cluster { num_servers: 2 num_workers: 2 } model { kind: %s } "
      "optimizer { learning_rate: 0.1 } compression { default_compression { push { name: "
      "'powersgd' rank: 4 } } }";
  const absl::StatusOr<config::RunConfig> mlp =
      LoadConfigText(absl::StrFormat(text, "MLP hidden: [64]"), "job.pbtxt");
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_THAT(CheckChunkCodecs(*mlp).message(), HasSubstr("(fc2.bias): push: codec 'powersgd'"));
  // The workers' tensors make a REGISTERED model's layout: nothing to check here...
  const absl::StatusOr<config::RunConfig> registered =
      LoadConfigText(absl::StrFormat(text, "REGISTERED"), "job.pbtxt");
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_TRUE(CheckChunkCodecs(*registered).ok());
  // ... unless model.layout_file describes them ahead: then they are checked at load.
  const std::string dir = testing::TempDir();
  std::ofstream(dir + "/one_row.layout") << "tamp-layout 1\nhead.weight 10 4096\nrow.weight 1 2000\n";
  std::ofstream(dir + "/one_row.profile")
      << "tamp-profile 1\nscale 1\nlayer 1 2 head.weight\nlayer 1 2 row.weight\n";
  const absl::StatusOr<config::RunConfig> described = LoadConfigText(
      absl::StrFormat(text, absl::StrCat("REGISTERED layout_file: '", dir,
                                         "/one_row.layout' profile_file: '", dir,
                                         "/one_row.profile'")),
      "job.pbtxt");
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_THAT(std::string(CheckChunkCodecs(*described).message()),
              HasSubstr("(row.weight): push: codec 'powersgd': rank 4 needs a matrix of at "
                        "least 4 x 4, but"));
}

TEST(CheckChunkCodecsTest, ChunksThatFitTheirCodecsPass) {
  EXPECT_TRUE(CheckConfig("default_compression { push { name: 'powersgd' rank: 2 } }").ok());
  // The biases travel raw below min_compress_bytes.
  EXPECT_TRUE(CheckConfig("min_compress_bytes: 1024 default_compression { push { name: "
                          "'powersgd' rank: 4 } }")
                  .ok());
  EXPECT_TRUE(CheckConfig("default_compression { push { name: 'topk' ratio: 0.1 } push_feedback "
                          "{ kind: RESIDUAL } pull { name: 'fp16' } pull_feedback { kind: "
                          "RESIDUAL } }")
                  .ok());
}

}  // namespace
}  // namespace tamp
