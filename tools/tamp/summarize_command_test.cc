#include "tools/tamp/summarize_command.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace tamp::launcher {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return std::string(::testing::TempDir()) + "/" + name;
}

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

std::string Read(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

constexpr char kConfig[] = R"(version: 1
name: "summarized"
cluster { num_servers: 1 num_workers: 2 }
model { kind: MLP hidden: [8] }
training { epochs: 2 }
optimizer { name: "sgd" learning_rate: 0.1 }
)";

// A worker's stdout as a cluster engine saves it: log lines between the JSON events (fields
// cut to those the summary reads).
std::string WorkerOutput(int worker, int pushed, double accuracy) {
  return absl::StrCat(
      "I1123 12:00:00.000 worker started\n",
      R"({"kind":"STEP","worker":)", worker, R"(,"step":1,"loss":0.9,"step_ms":3,"compute_ms":2})",
      "\n", R"({"kind":"DONE","worker":)", worker, R"(,"step":40,"bytes_pushed":)", pushed,
      R"(,"bytes_pulled":1000,"raw_bytes_pushed":)", pushed * 10,
      R"(,"step_ms_median":4,"test_accuracy":)", accuracy, "}\n");
}

TEST(SummarizeCommandTest, SummarizesEveryWorkersEventsIntoTheRunSummary) {
  const std::string config = Write("job.pbtxt", kConfig);
  const std::string w0 = Write("w0.out", WorkerOutput(0, 100, 0.75));
  const std::string w1 = Write("w1.out", WorkerOutput(1, 300, 0.5));
  // As tamp run's: directories that do not exist yet are made.
  const std::string json = TempPath("new/dirs/summary.json");
  std::ostringstream out, err;
  ASSERT_EQ(SummarizeCommand({config, w0, w1, "--summary_json=" + json, "--wall_seconds=12"},
                             &out, &err),
            0)
      << err.str();
  const std::string summary = Read(json);
  EXPECT_THAT(summary, HasSubstr(R"("name":"summarized")"));
  EXPECT_THAT(summary, HasSubstr(R"("test_accuracy":0.75)"));  // worker 0's
  EXPECT_THAT(summary, HasSubstr(R"("bytes_pushed":400,)"));  // both workers'
  EXPECT_THAT(summary, HasSubstr(R"("compression_ratio":10)"));
  EXPECT_THAT(summary, HasSubstr(R"("wall_seconds":12)"));
  EXPECT_FALSE(out.str().empty());
}

TEST(SummarizeCommandTest, ErrorsNameWhatIsWrong) {
  const std::string config = Write("job2.pbtxt", kConfig);
  const std::string w0 = Write("a0.out", WorkerOutput(0, 100, 0.75));
  const std::string w1 = Write("a1-done.out", WorkerOutput(1, 300, 0.5));
  const std::string unfinished = Write("a1.out", "I1123 worker started\n");
  std::ostringstream out, err;
  EXPECT_EQ(SummarizeCommand({config, w0}, &out, &err), 2);
  EXPECT_THAT(err.str(), HasSubstr("cluster.num_workers 2 but 1 event files"));
  err.str("");
  EXPECT_EQ(SummarizeCommand({config, w0, unfinished}, &out, &err), 1);
  EXPECT_THAT(err.str(), HasSubstr("worker 1 reported no DONE event in " + unfinished +
                                   " (a process that did not finish"));
  // With --summary_json, still the summary of what ran, as tamp run writes for a failed job.
  const std::string failed = TempPath("failed.json");
  EXPECT_EQ(SummarizeCommand({config, w0, unfinished, "--summary_json=" + failed}, &out, &err),
            1);
  EXPECT_THAT(Read(failed), HasSubstr(R"("outcome":"failed","failure":"worker 1 reported no )"
                                      R"(DONE event")"));
  EXPECT_THAT(Read(failed), HasSubstr(R"("test_accuracy":0.75)"));  // Worker 0's DONE.
  err.str("");
  EXPECT_EQ(SummarizeCommand({config, w0, TempPath("missing.out")}, &out, &err), 1);
  EXPECT_THAT(err.str(), HasSubstr("cannot read"));
  err.str("");
  EXPECT_EQ(SummarizeCommand({config, w0, w0, "--wall_seconds=x"}, &out, &err), 2);
  EXPECT_THAT(err.str(), HasSubstr("--wall_seconds"));
  err.str("");
  EXPECT_EQ(SummarizeCommand({Write("bad.pbtxt", "version: 1\nepohcs: 3\n"), w0, w0}, &out, &err), 2);
  EXPECT_THAT(err.str(), HasSubstr("epohcs"));
  err.str("");
  // In the wrong order, worker 1's accuracy would pass for worker 0's.
  EXPECT_EQ(SummarizeCommand({config, w1, w0}, &out, &err), 2);
  EXPECT_THAT(err.str(), HasSubstr(w1 + " holds worker 1's events but was given as worker 0's "
                                   "(one file per worker, in rank order)"));
  EXPECT_EQ(SummarizeCommand({config, w0, w1}, &out, &err), 0) << err.str();
}

// A worker's events from another run, or a restarted worker's later file alone, would make
// a summary of steps nobody trained together.
TEST(SummarizeCommandTest, EveryWorkerMustSpanTheSameSteps) {
  const std::string config = Write("job3.pbtxt", kConfig);
  const std::string w0 = Write("b0.out", WorkerOutput(0, 100, 0.75));
  std::string other_run = WorkerOutput(1, 300, 0.5);
  other_run.replace(other_run.find(R"("step":40,)"), 10, R"("step":64,)");
  const std::string w1_other = Write("b1-other.out", other_run);
  std::ostringstream out, err;
  EXPECT_EQ(SummarizeCommand({config, w0, w1_other}, &out, &err), 1);
  EXPECT_THAT(err.str(), HasSubstr("worker 1's events end at step 64 but worker 0's at step 40 ("
                                   + w1_other + ", " + w0 + "): files of different runs?"));
  const std::string async_config = Write(
      "job3-async.pbtxt", absl::StrCat(kConfig, "consistency { mode: ASYNC }\n"));
  EXPECT_EQ(SummarizeCommand({async_config, w0, w1_other}, &out, &err), 0)
      << "ASYNC workers may take different numbers of steps";

  // Worker 1 restarted at step 25: its second process's file says start_step 25.
  auto with_start = [](std::string output, int start) {
    output.replace(output.find(R"("step":1,)"), 9,
                   absl::StrCat(R"("step":)", start + 1, R"(,"start_step":)", start, ","));
    return output;
  };
  const std::string w0_started = Write("c0.out", with_start(WorkerOutput(0, 100, 0.75), 0));
  const std::string w1_first = Write("c1.out", with_start(WorkerOutput(1, 300, 0.5), 0));
  const std::string w1_restart = Write("c1.restart-1.out", with_start(WorkerOutput(1, 50, 0.5), 25));
  err.str("");
  EXPECT_EQ(SummarizeCommand({config, w0_started, w1_restart}, &out, &err), 1);
  EXPECT_THAT(err.str(), HasSubstr("worker 1's first file begins at step 25 but worker 0's at "
                                   "step 0"));
  EXPECT_THAT(err.str(), HasSubstr("its first process's first, comma-separated"));
  err.str("");
  EXPECT_EQ(SummarizeCommand({config, w0_started, w1_first + "," + w1_restart}, &out, &err), 0)
      << err.str();
}

}  // namespace
}  // namespace tamp::launcher
