#include "job/config_notes.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/config.h"

namespace tamp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The notes LoadConfigText() gives for a config of `compression` (and `extra` fields).
std::vector<std::string> NotesOf(const std::string& compression, const std::string& extra = "") {
  const std::string text = absl::StrCat(R"(version: 1
cluster { num_servers: 2 num_workers: 2 }
model { kind: MLP hidden: [64] }
optimizer { learning_rate: 0.1 }
)", extra, "\ncompression { ", compression, " }\n");
  std::vector<std::string> notes;
  const absl::StatusOr<config::RunConfig> config = LoadConfigText(text, "job.pbtxt", &notes);
  EXPECT_TRUE(config.ok()) << config.status();
  return notes;
}

constexpr char kDefault[] =
    "default_compression { push { name: 'topk' ratio: 0.01 } push_feedback { kind: RESIDUAL } "
    "pull { name: 'fp16' } } ";

TEST(ConfigNotesTest, AnOverrideThatLeavesOutWhatTheDefaultSetsIsNamed) {
  // Meant to change the pull only: its push went raw, without the residual.
  EXPECT_THAT(NotesOf(absl::StrCat(kDefault, "tensor_overrides { pattern: 'fc1.weight' "
                                             "compression { pull { name: 'bf16' } } }")),
              ElementsAre("job.pbtxt: compression.tensor_overrides[0] (pattern 'fc1.weight') "
                          "leaves out what default_compression sets (push topk, push_feedback "
                          "RESIDUAL): an override replaces default_compression whole, so for its "
                          "tensors those are none; repeat them in the override to keep them"));
  EXPECT_THAT(NotesOf(absl::StrCat(kDefault, "shard_overrides { shards: [1, 0] "
                                             "compression { push_feedback { kind: NONE } } }")),
              ElementsAre(HasSubstr("compression.shard_overrides[0] (shards 1, 0) leaves out what "
                                    "default_compression sets (push topk, pull fp16)")));
}

TEST(ConfigNotesTest, AnOverrideThatNamesEveryPartOrSetsACodecToNoneIsNot) {
  EXPECT_THAT(NotesOf(absl::StrCat(
                  kDefault, "tensor_overrides { pattern: 'fc1.*' compression { push { name: "
                            "'qsgd' levels: 15 } push_feedback { kind: NONE } pull { name: "
                            "'none' } } }")),
              IsEmpty());
  // push none: its residual would keep nothing, so leaving it out is no loss.
  EXPECT_THAT(NotesOf(absl::StrCat(kDefault, "tensor_overrides { pattern: 'fc2.*' compression { "
                                             "push { name: 'none' } pull { } } }")),
              IsEmpty());
  EXPECT_THAT(NotesOf("tensor_overrides { pattern: 'fc2.*' compression { push { name: 'topk' "
                      "ratio: 0.1 } } }"),
              IsEmpty())
      << "no default to leave out";
}

TEST(ConfigNotesTest, AResidualThatKeepsNothingOrIsNotUsedIsNamed) {
  EXPECT_THAT(NotesOf("default_compression { push_feedback { kind: RESIDUAL } }"),
              ElementsAre("job.pbtxt: compression.default_compression.push_feedback RESIDUAL "
                          "keeps nothing: push codec none sends the gradient whole"));
  EXPECT_THAT(NotesOf("default_compression { pull { name: 'none' } pull_feedback { kind: "
                      "RESIDUAL } }"),
              ElementsAre(HasSubstr("default_compression.pull_feedback RESIDUAL keeps nothing")));
  const std::string pull_residual =
      "default_compression { pull { name: 'topk' ratio: 0.1 } pull_feedback { kind: RESIDUAL } }";
  EXPECT_THAT(NotesOf(pull_residual), IsEmpty()) << "SYNC uses it";
  EXPECT_THAT(NotesOf(pull_residual, "consistency { mode: ASYNC }"),
              ElementsAre(HasSubstr("compression.default_compression.pull_feedback is not used "
                                    "with consistency.mode ASYNC: the servers keep each worker's "
                                    "view of the weights")));
  EXPECT_THAT(NotesOf(pull_residual, "consistency { mode: SSP staleness: 2 }"),
              ElementsAre(HasSubstr("not used with consistency.mode SSP")));
}

TEST(ConfigNotesTest, AWarmUpAsLongAsTheRunIsNamed) {
  const std::string warmup =
      "default_compression { push { name: 'topk' ratio: 0.01 ratio_warmup: [0.25, 0.06, 0.02] } "
      "push_feedback { kind: RESIDUAL } }";
  EXPECT_THAT(NotesOf(warmup, "training { epochs: 4 }"), IsEmpty());
  EXPECT_THAT(NotesOf(warmup, "training { epochs: 3 }"),
              ElementsAre("job.pbtxt: compression.default_compression.push.ratio_warmup has 3 "
                          "epochs of warm-up and training.epochs is 3: the run ends inside the "
                          "warm-up and the push codec's own ratio is never used"));
  EXPECT_THAT(NotesOf(warmup, "training { epochs: 1 }"),
              ElementsAre(HasSubstr("the run ends inside the warm-up (its last 2 never apply) "
                                    "and the push codec's own ratio is never used")));
}

TEST(ConfigNotesTest, AnInvalidConfigGivesItsErrorAndNoNotes) {
  std::vector<std::string> notes;
  const absl::StatusOr<config::RunConfig> config = LoadConfigText(
      "version: 1\ncluster { num_servers: 0 num_workers: 1 }\ncompression { default_compression "
      "{ push_feedback { kind: RESIDUAL } } }\n",
      "bad.pbtxt", &notes);
  EXPECT_FALSE(config.ok());
  EXPECT_THAT(notes, IsEmpty());
}

}  // namespace
}  // namespace tamp
