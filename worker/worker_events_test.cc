#include "worker/worker_events.h"

#include "gtest/gtest.h"

namespace tamp {
namespace {

StepReport Report(double compute, double encode, double wire, double decode, double apply) {
  StepReport report;
  report.shard_bytes_pushed = {300, 100};
  report.shard_bytes_pulled = {50, 70};
  report.raw_bytes_pushed = 4000;
  report.timeline.compute_ms = compute;
  report.timeline.encode_ms = encode;
  report.timeline.wire_ms = wire;
  report.decode_ms = decode;
  report.apply_ms = apply;
  return report;
}

TEST(StepEventTest, OtherIsWhatTheFivePartsLeaveOfTheStep) {
  const ClientTotals totals;
  const StepReport report = Report(6.0, 1.5, 2.0, 0.25, 0.25);
  const events::WorkerEvent event =
      StepEvent({1, totals, report}, 7, 100, 0, 0.5f, /*step_ms=*/12.5, /*thread_cpu_ms=*/9.0);
  EXPECT_EQ(event.kind(), events::WorkerEvent::STEP);
  EXPECT_EQ(event.worker(), 1u);
  EXPECT_EQ(event.step(), 7u);
  EXPECT_DOUBLE_EQ(event.other_ms(), 2.5);
  EXPECT_DOUBLE_EQ(event.compute_ms() + event.encode_ms() + event.wire_ms() + event.decode_ms() +
                       event.apply_ms() + event.other_ms(),
                   event.step_ms());
  EXPECT_DOUBLE_EQ(event.step_compression_ratio(), 10.0);  // 4000 raw / 400 pushed.
}

// A script's own step_ms may start after the client's step began (its loop's clock): the
// parts then exceed it, and other is 0, never negative.
TEST(StepEventTest, OtherIsZeroWhereThePartsExceedTheStep) {
  const ClientTotals totals;
  const StepReport report = Report(20.0, 1.0, 1.0, 0.0, 0.0);
  const events::WorkerEvent event =
      StepEvent({0, totals, report}, 1, 100, 0, std::nullopt, /*step_ms=*/15.0, 0.0);
  EXPECT_DOUBLE_EQ(event.other_ms(), 0.0);
  EXPECT_FALSE(event.has_loss());
}

}  // namespace
}  // namespace tamp
