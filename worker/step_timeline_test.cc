#include "worker/step_timeline.h"

#include "gtest/gtest.h"

namespace tamp {
namespace {

using Clock = StepTimeline::Clock;
using std::chrono::milliseconds;

Clock::time_point At(int ms) { return Clock::time_point(milliseconds(ms)); }

TEST(StepTimelineTest, NothingRecorded) {
  StepTimeline timeline;
  const StepTimeline::Figures f = timeline.Summarize();
  EXPECT_EQ(f.compute_ms, 0);
  EXPECT_EQ(f.comm_ms, 0);
  EXPECT_EQ(f.hidden_percent, 0);
  EXPECT_EQ(f.wire_ms, 0);
}

// Compute [0,10) and [12,20) (a callback at 10..12 encoded 1.5 ms and sent two pushes);
// RPC A 11..15 is hidden for 3 of 4 ms, RPC B 12..26 for 8 of 14 ms.
TEST(StepTimelineTest, OverlapAndWire) {
  StepTimeline timeline;
  timeline.ComputeBegin(At(0));
  timeline.ComputeEnd(At(10));
  timeline.AddEncode(std::chrono::microseconds(1500));
  timeline.ComputeBegin(At(12));
  timeline.ComputeEnd(At(20));
  timeline.AddRpc(At(11), At(15));
  timeline.AddRpc(At(12), At(26));
  const StepTimeline::Figures f = timeline.Summarize();
  EXPECT_DOUBLE_EQ(f.compute_ms, 18);
  EXPECT_DOUBLE_EQ(f.encode_ms, 1.5);
  EXPECT_DOUBLE_EQ(f.comm_ms, 18);
  EXPECT_DOUBLE_EQ(f.hidden_ms, 11);
  EXPECT_DOUBLE_EQ(f.hidden_percent, 100.0 * 11 / 18);
  // Last push at 12, last answer at 26; compute covers 12..20.
  EXPECT_DOUBLE_EQ(f.wire_ms, 6);
}

// Many compute intervals (one per push), RPCs over all sorts of spans: the hidden time and the
// wire time as a scan of every interval computes them.
TEST(StepTimelineTest, ManyIntervalsAsAScanComputesThem) {
  StepTimeline timeline;
  std::vector<std::pair<int, int>> compute;  // [begin, end) in microseconds.
  for (int k = 0; k < 200; ++k) compute.push_back({10 * k, 10 * k + 3 + k % 5});
  for (const auto& [begin, end] : compute) {
    timeline.ComputeBegin(Clock::time_point(std::chrono::microseconds(begin)));
    timeline.ComputeEnd(Clock::time_point(std::chrono::microseconds(end)));
  }
  auto covered = [&](int begin, int end) {
    int64_t sum = 0;
    for (const auto& [b, e] : compute) sum += std::max(0, std::min(end, e) - std::max(begin, b));
    return sum;
  };
  int64_t hidden = 0, comm = 0;
  for (int k = 0; k < 300; ++k) {
    const int sent = (k * 37) % 2100 - 50, answered = sent + (k * 53) % 700;
    timeline.AddRpc(Clock::time_point(std::chrono::microseconds(sent)),
                    Clock::time_point(std::chrono::microseconds(answered)));
    hidden += covered(sent, answered);
    comm += answered - sent;
  }
  const StepTimeline::Figures f = timeline.Summarize();
  EXPECT_DOUBLE_EQ(f.hidden_ms, hidden / 1000.0);
  EXPECT_DOUBLE_EQ(f.comm_ms, comm / 1000.0);
  int64_t compute_us = 0;
  for (const auto& [begin, end] : compute) compute_us += end - begin;
  EXPECT_DOUBLE_EQ(f.compute_ms, compute_us / 1000.0);
}

TEST(StepTimelineTest, ResetForgetsTheStep) {
  StepTimeline timeline;
  timeline.ComputeBegin(At(0));
  timeline.ComputeEnd(At(5));
  timeline.AddRpc(At(5), At(9));
  timeline.Reset();
  timeline.AddRpc(At(20), At(22));
  const StepTimeline::Figures f = timeline.Summarize();
  EXPECT_EQ(f.compute_ms, 0);
  EXPECT_DOUBLE_EQ(f.comm_ms, 2);
  EXPECT_DOUBLE_EQ(f.wire_ms, 2);
  EXPECT_EQ(f.hidden_percent, 0);
}

}  // namespace
}  // namespace tamp
