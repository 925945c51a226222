#include "tools/tamp/summary.h"

#include <cmath>
#include <string>

#include "base/proto_json.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace tamp::launcher {
namespace {

using ::testing::HasSubstr;

events::WorkerEvent Done(uint64_t pushed, uint64_t pulled, uint64_t raw, double median,
                         double accuracy) {
  events::WorkerEvent e;
  e.set_kind(events::WorkerEvent::DONE);
  e.set_bytes_pushed(pushed);
  e.set_bytes_pulled(pulled);
  e.set_raw_bytes_pushed(raw);
  e.set_step_ms_median(median);
  e.set_step(100);  // DONE: final step count.
  e.set_test_accuracy(accuracy);
  return e;
}

events::WorkerEvent StepLoss(float loss, uint32_t epoch = 0) {
  events::WorkerEvent e;
  e.set_kind(events::WorkerEvent::STEP);
  e.set_loss(loss);
  e.set_epoch(epoch);
  return e;
}

// Older workers printed protobuf's proto3 JSON: lowerCamelCase, 64-bit integers as strings.
TEST(ParseWorkerEventTest, ParsesProto3Json) {
  auto e = ParseWorkerEvent(
      R"({"kind":"STEP","worker":1,"step":"5","totalSteps":"10","loss":0.5,"stepMs":2.5,)"
      R"("bytesPushed":"1234","someFutureField":7})");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind(), events::WorkerEvent::STEP);
  EXPECT_EQ(e->step(), 5u);
  EXPECT_EQ(e->total_steps(), 10u);
  EXPECT_FLOAT_EQ(e->loss(), 0.5f);
  EXPECT_EQ(e->bytes_pushed(), 1234u);
}

TEST(ParseWorkerEventTest, RoundTripsWhatWorkersPrint) {
  events::WorkerEvent done = Done(1, 2, 3, 4.5, 0.75);
  done.add_step_shard_bytes_pushed(7);
  auto parsed = ParseWorkerEvent(ProtoToJson(done));  // worker_main.cc's WriteEvent.
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->SerializeAsString(), done.SerializeAsString());
}

TEST(ParseWorkerEventTest, RejectsNonEvents) {
  EXPECT_FALSE(ParseWorkerEvent("loading data from /usr/share/datasets").ok());
  EXPECT_FALSE(ParseWorkerEvent("").ok());
  EXPECT_FALSE(ParseWorkerEvent("{not json").ok());
  EXPECT_FALSE(ParseWorkerEvent(R"({"hello":1})").ok());  // No kind.
  EXPECT_FALSE(ParseWorkerEvent(R"({"kind":"STEP","step":"x"})").ok());
  // What a user's worker program may print besides its events.
  EXPECT_FALSE(ParseWorkerEvent(R"({"kind":"BOGUS"})").ok());
  EXPECT_FALSE(ParseWorkerEvent(R"({"kind":42})").ok());
  EXPECT_FALSE(ParseWorkerEvent(R"({"kind":"DONE"} trailing)").ok());
  EXPECT_FALSE(ParseWorkerEvent("\xff{\"kind\"").ok());
  EXPECT_FALSE(ParseWorkerEvent(std::string(100, '[')).ok());
  EXPECT_FALSE(ParseWorkerEvent("{\"a\":" + std::string(1000, '[')).ok());
}

// A run cut by training.max_steps inside its first epoch began 1 epoch, not the config's;
// without a STEP, the config's epochs stand.
TEST(SummaryBuilderTest, EpochsAreThoseWorkerZeroBegan) {
  SummaryBuilder builder(1);
  builder.Add(0, Done(100, 1000, 1000, 4.0, 0.875));
  auto summary = builder.Build("mlp", 3, 1);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->epochs(), 3u);
  builder.Add(0, StepLoss(0.5f, 0));
  summary = builder.Build("mlp", 3, 1);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->epochs(), 1u);
}

TEST(SummaryBuilderTest, AggregatesDoneEvents) {
  SummaryBuilder builder(3);
  builder.Add(0, StepLoss(0.9f));
  builder.Add(1, StepLoss(5.0f, 4));  // Only worker 0's loss and epoch count.
  builder.Add(0, StepLoss(0.25f, 2));
  EXPECT_FALSE(builder.done(0));
  builder.Add(0, Done(100, 1000, 1000, 4.0, 0.875));
  builder.Add(1, Done(200, 1000, 2000, 2.0, 0.0));
  builder.Add(2, Done(300, 1000, 3000, 9.0, 0.0));
  builder.Add(7, Done(1, 1, 1, 1, 1));  // Unknown rank: ignored.
  auto summary = builder.Build("mlp", 5, 12.5);  // Ran 3 of the config's 5 epochs.
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->name(), "mlp");
  EXPECT_DOUBLE_EQ(summary->test_accuracy(), 0.875);
  EXPECT_EQ(summary->steps(), 100u);
  EXPECT_EQ(summary->epochs(), 3u);
  EXPECT_DOUBLE_EQ(summary->wall_seconds(), 12.5);
  EXPECT_DOUBLE_EQ(summary->step_ms_median(), 4.0);
  EXPECT_EQ(summary->bytes_pushed(), 600u);
  EXPECT_EQ(summary->bytes_pulled(), 3000u);
  EXPECT_DOUBLE_EQ(summary->compression_ratio(), 10.0);
  EXPECT_FLOAT_EQ(summary->final_loss(), 0.25f);
  EXPECT_EQ(summary->outcome(), "completed");
  EXPECT_EQ(summary->failure(), "");
}

events::WorkerEvent Step(uint64_t step, double step_ms, uint64_t pushed, uint64_t raw) {
  events::WorkerEvent e = StepLoss(0.5f, 1);
  e.set_step(step);
  e.set_step_ms(step_ms);
  e.set_bytes_pushed(pushed);
  e.set_bytes_pulled(2 * pushed);
  e.set_raw_bytes_pushed(raw);
  return e;
}

// A job that failed or was interrupted: what the workers had reported by then.
TEST(SummaryBuilderTest, AnEndedJobSummarizesWhatWasReported) {
  SummaryBuilder builder(2);
  builder.Add(0, Step(1, 10.0, 100, 400));
  builder.Add(1, Step(1, 30.0, 50, 200));
  builder.Add(0, Step(2, 20.0, 200, 800));
  builder.Add(1, Step(2, 40.0, 100, 400));
  builder.Add(0, Step(3, 15.0, 300, 1200));  // Worker 1 stopped reporting after step 2.
  events::RunSummary summary =
      builder.BuildEnded("mlp", 5, 7.5, "failed", "worker 1 failed (exit status 1)");
  EXPECT_EQ(summary.outcome(), "failed");
  EXPECT_EQ(summary.failure(), "worker 1 failed (exit status 1)");
  EXPECT_EQ(summary.steps(), 3u);  // Worker 0's last completed step.
  EXPECT_FALSE(summary.has_test_accuracy());
  EXPECT_DOUBLE_EQ(summary.step_ms_median(), 20.0);  // Of 10, 30, 20, 40, 15.
  EXPECT_EQ(summary.bytes_pushed(), 400u);  // Each worker's last report: 300 + 100.
  EXPECT_EQ(summary.bytes_pulled(), 800u);
  EXPECT_DOUBLE_EQ(summary.compression_ratio(), 4.0);
  EXPECT_EQ(summary.epochs(), 2u);
  EXPECT_DOUBLE_EQ(summary.wall_seconds(), 7.5);
  EXPECT_EQ(summary.worker_steps_missed(), 0u);
  // Worker 0's DONE, where it sent one, gives its steps and accuracy.
  builder.Add(0, Done(300, 600, 1200, 14.0, 0.75));
  summary = builder.BuildEnded("mlp", 5, 8, "interrupted", "interrupted (SIGINT)");
  EXPECT_EQ(summary.steps(), 100u);
  EXPECT_DOUBLE_EQ(summary.test_accuracy(), 0.75);
  EXPECT_EQ(summary.outcome(), "interrupted");
  // Nothing reported (the servers never started): zeros, and why.
  events::RunSummary empty = SummaryBuilder(2).BuildEnded("mlp", 5, 0, "failed", "no server");
  EXPECT_EQ(empty.steps(), 0u);
  EXPECT_EQ(empty.epochs(), 0u);  // None begun.
  EXPECT_EQ(empty.bytes_pushed(), 0u);
  EXPECT_EQ(empty.failure(), "no server");
}

// What a worker missed: the steps its events say a barrier dropped it from, and a restarted
// worker's steps between its predecessor's last STEP and where its successor began. Gaps
// between one process's STEP events (a script that reports some steps only) are none; a
// resumed run's first STEP (after none) misses nothing.
TEST(SummaryBuilderTest, StepsAWorkerTookNoPartInAreCounted) {
  SummaryBuilder builder(2);
  auto missing = [](events::WorkerEvent event, uint64_t steps_missed) {
    event.set_steps_missed(steps_missed);
    return event;
  };
  auto began_at = [](events::WorkerEvent event, uint64_t start_step) {
    event.set_start_step(start_step);
    return event;
  };
  EXPECT_EQ(builder.Add(0, Step(41, 1, 1, 1)).count, 0u);  // Resumed at step 40.
  builder.Add(1, Step(41, 1, 1, 1));
  EXPECT_EQ(builder.Add(1, Step(45, 1, 1, 1)).count, 0u);  // Reported 45 after 41: no gap.
  EXPECT_EQ(builder.last_step(1), 45u);
  const MissedSteps dropped = builder.Add(1, missing(Step(50, 1, 1, 1), 4));  // 46-49 dropped.
  EXPECT_EQ(dropped.count, 4u);
  EXPECT_EQ(dropped.first, 0u);
  EXPECT_EQ(builder.Add(1, missing(Step(51, 1, 1, 1), 4)).count, 0u);  // Told once.
  builder.WorkerRestarted(1);
  // Its predecessor's last STEP said 51 steps done (0-50); its successor began at step 54
  // (0-based) and first reports 55 done: 51-53 missed, named.
  const MissedSteps restarted = builder.Add(1, began_at(Step(55, 1, 1, 1), 54));
  EXPECT_EQ(restarted.count, 3u);
  EXPECT_EQ(restarted.first, 51u);
  EXPECT_EQ(builder.Add(1, began_at(Step(60, 1, 1, 1), 54)).count, 0u);
  EXPECT_EQ(builder.BuildEnded("mlp", 1, 1, "failed", "").worker_steps_missed(), 7u);
  EXPECT_EQ(builder.last_step(0), 41u);
}

events::WorkerEvent Started(events::WorkerEvent event, uint64_t start_step) {
  event.set_start_step(start_step);
  return event;
}

// A `tamp run` again on the same checkpoints: its workers began at step 194, their bytes
// count from there.
TEST(SummaryBuilderTest, StartStepIsWhereTheRunResumed) {
  SummaryBuilder builder(2);
  builder.Add(0, Started(StepLoss(0.5f), 194));
  builder.Add(1, Started(StepLoss(0.5f), 194));
  builder.Add(0, Started(Done(1, 1, 1, 1, 0.8), 194));
  builder.Add(1, Started(Done(1, 1, 1, 1, 0.8), 194));
  auto summary = builder.Build("mlp", 1, 5);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->start_step(), 194u);
  EXPECT_EQ(summary->steps(), 100u);
}

// A worker replaced mid-run starts later; the run, and the bytes its predecessor banked, from
// the first step. Events without start_step (an older worker's, a step not begun) count none.
TEST(SummaryBuilderTest, AReplacedWorkerDoesNotMoveTheStartStep) {
  SummaryBuilder builder(2);
  builder.Add(0, StepLoss(0.5f));
  builder.Add(1, Started(StepLoss(0.5f), 0));
  builder.WorkerRestarted(1);
  builder.Add(1, Started(StepLoss(0.5f), 150));
  builder.Add(0, Done(1, 1, 1, 1, 0.8));
  builder.Add(1, Started(Done(1, 1, 1, 1, 0.8), 150));
  auto summary = builder.Build("mlp", 1, 5);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->start_step(), 0u);
}

TEST(SummaryBuilderTest, SyntheticIsWorkerZerosWord) {
  SummaryBuilder builder(2);
  events::WorkerEvent done = Done(10, 1, 1, 3.0, 0.0);
  done.set_synthetic(true);
  builder.Add(0, done);
  builder.Add(1, Done(10, 1, 1, 3.0, 0.0));
  auto summary = builder.Build("resnet50", 1, 1);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_TRUE(summary->synthetic());
}

// A process restarted at the run's end ran no step: its DONE's median (0) is no worker's.
TEST(SummaryBuilderTest, AWorkerProcessThatRanNoStepLeavesTheMedianAlone) {
  SummaryBuilder builder(3);
  builder.Add(0, Done(1, 1, 1, 3.0, 0.5));
  builder.Add(1, Done(1, 1, 1, 0.0, 0.5));
  builder.Add(2, Done(1, 1, 1, 5.0, 0.5));
  auto summary = builder.Build("x", 1, 1);
  ASSERT_TRUE(summary.ok());
  EXPECT_DOUBLE_EQ(summary->step_ms_median(), 4.0);
}

TEST(SummaryBuilderTest, NothingPushedMeansRatioZeroAndEvenMedianAverages) {
  SummaryBuilder builder(2);
  builder.Add(0, Done(0, 0, 0, 3.0, 0.5));
  builder.Add(1, Done(0, 0, 0, 5.0, 0.5));
  auto summary = builder.Build("x", 1, 1);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->compression_ratio(), 0.0);
  EXPECT_DOUBLE_EQ(summary->step_ms_median(), 4.0);
}

events::WorkerEvent StepTimes(double compute, double encode, double wire, double decode,
                              double apply, double hidden) {
  events::WorkerEvent e = StepLoss(1.0f);
  e.set_compute_ms(compute);
  e.set_encode_ms(encode);
  e.set_wire_ms(wire);
  e.set_decode_ms(decode);
  e.set_apply_ms(apply);
  e.set_comm_hidden_percent(hidden);
  return e;
}

TEST(SummaryBuilderTest, MediansOfTheTimeSplitOverEveryWorkersSteps) {
  SummaryBuilder builder(2);
  events::WorkerEvent other = StepTimes(1, 10, 100, 1000, 5, 50);
  other.set_other_ms(0.5);
  builder.Add(0, other);
  other = StepTimes(3, 30, 300, 3000, 6, 70);
  other.set_other_ms(0.25);
  builder.Add(1, other);
  builder.Add(0, StepTimes(2, 20, 200, 2000, 7, 60));  // other_ms 0.
  builder.Add(0, Done(1, 1, 1, 1, 1));
  builder.Add(1, Done(1, 1, 1, 1, 1));
  auto summary = builder.Build("x", 1, 1);
  ASSERT_TRUE(summary.ok());
  EXPECT_DOUBLE_EQ(summary->compute_ms_median(), 2);
  EXPECT_DOUBLE_EQ(summary->encode_ms_median(), 20);
  EXPECT_DOUBLE_EQ(summary->wire_ms_median(), 200);
  EXPECT_DOUBLE_EQ(summary->decode_ms_median(), 2000);
  EXPECT_DOUBLE_EQ(summary->apply_ms_median(), 6);
  EXPECT_DOUBLE_EQ(summary->other_ms_median(), 0.25);
  EXPECT_DOUBLE_EQ(summary->comm_hidden_percent_median(), 60);
  // Existing fields are unchanged by STEP figures.
  EXPECT_DOUBLE_EQ(summary->step_ms_median(), 1);
  EXPECT_DOUBLE_EQ(summary->compression_ratio(), 1);
}

TEST(StepMetricsJsonTest, OneObjectWithPerShardBytesAndTheirSums) {
  events::WorkerEvent e = StepTimes(2.5, 0.25, 1, 0.125, 0.0625, 61.5);
  e.set_step(40);
  e.set_loss(0.5f);
  e.set_step_ms(4);
  e.add_step_shard_bytes_pushed(2560);
  e.add_step_shard_bytes_pushed(1000);
  e.add_step_shard_bytes_pulled(4500);
  e.add_step_shard_bytes_pulled(4000);
  e.set_step_raw_bytes_pushed(14240);
  e.set_step_compression_ratio(4);
  e.set_comm_ms(9.5);
  e.set_thread_cpu_ms(3.5);
  e.set_other_ms(0.0625);
  e.set_bytes_pushed(999999);  // Cumulative: not what the metrics line reports.
  EXPECT_EQ(StepMetricsJson(1, e),
            R"({"format_version":2,"worker":1,"step":40,"loss":0.5,"step_ms":4,)"
            R"("bytes_pushed":3560,"bytes_pulled":8500,"shard_bytes_pushed":[2560,1000],)"
            R"("shard_bytes_pulled":[4500,4000],"raw_bytes_pushed":14240,)"
            R"("compression_ratio":4,"compute_ms":2.5,"encode_ms":0.25,"wire_ms":1,)"
            R"("decode_ms":0.125,"apply_ms":0.0625,"comm_ms":9.5,"comm_hidden_percent":61.5,)"
            R"("thread_cpu_ms":3.5,"other_ms":0.0625})");
  e.set_loss(std::nanf(""));
  EXPECT_THAT(StepMetricsJson(0, e), HasSubstr(R"("loss":"NaN",)"));
}

TEST(EvalMetricsJsonTest, StepEpochAndAccuracy) {
  events::WorkerEvent e;
  e.set_kind(events::WorkerEvent::EVAL);
  e.set_step(400);
  e.set_epoch(1);
  e.set_test_accuracy(0.8512);
  EXPECT_EQ(EvalMetricsJson(0, e),
            R"({"format_version":2,"worker":0,"step":400,"epoch":1,"test_accuracy":0.8512})");
}

TEST(SummaryBuilderTest, UnreportedAccuracyAndLossStayUnset) {
  SummaryBuilder builder(1);
  events::WorkerEvent step = StepLoss(0);
  step.clear_loss();
  builder.Add(0, step);
  events::WorkerEvent done = Done(10, 20, 200, 3, 0);
  done.clear_test_accuracy();
  builder.Add(0, done);
  absl::StatusOr<events::RunSummary> summary = builder.Build("x", 1, 1);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_FALSE(summary->has_test_accuracy());
  EXPECT_FALSE(summary->has_final_loss());
  EXPECT_EQ(summary->compression_ratio(), 20);
  EXPECT_EQ(SummaryToJson(*summary).find("test_accuracy"), std::string::npos);
  EXPECT_EQ(StepMetricsJson(0, step).find("loss"), std::string::npos);
}

TEST(SummaryBuilderTest, MissingDoneIsAnError) {
  SummaryBuilder builder(2);
  builder.Add(0, Done(1, 1, 1, 1, 1));
  auto summary = builder.Build("x", 1, 1);
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(summary.status().message()), HasSubstr("worker 1"));
}

// One style with the metrics file: snake_case names, integers as numbers, every field, the
// format version first.
TEST(SummaryToJsonTest, EveryFieldSnakeCaseWithNumbersAndTheFormatVersion) {
  events::RunSummary summary;
  summary.set_name("mlp");
  summary.set_steps(1404);
  summary.set_bytes_pushed(350064936);
  summary.set_test_accuracy(0.8823);
  summary.set_step_ms_median(30.72);
  summary.set_final_loss(0);
  const std::string json = SummaryToJson(summary);
  EXPECT_EQ(json,
            R"({"format_version":2,"name":"mlp","test_accuracy":0.8823,"steps":1404,)"
            R"("epochs":0,"wall_seconds":0,"step_ms_median":30.72,"bytes_pushed":350064936,)"
            R"("bytes_pulled":0,"compression_ratio":0,"final_loss":0,"compute_ms_median":0,)"
            R"("encode_ms_median":0,"wire_ms_median":0,"decode_ms_median":0,)"
            R"("apply_ms_median":0,"comm_hidden_percent_median":0,"server_restarts":0,)"
            R"("worker_restarts":0,"synthetic":false,"start_step":0,"wall_time_only":false,)"
            R"("outcome":"","failure":"","worker_steps_missed":0,"other_ms_median":0})");
  events::RunSummary parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok());
  summary.set_format_version(kJsonFormatVersion);
  EXPECT_EQ(parsed.SerializeAsString(), summary.SerializeAsString());
}

}  // namespace
}  // namespace tamp::launcher
