#include "tools/tamp/progress.h"

#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

events::WorkerEvent Step(uint64_t step, uint64_t total, float loss) {
  events::WorkerEvent e;
  e.set_kind(events::WorkerEvent::STEP);
  e.set_step(step);
  e.set_total_steps(total);
  e.set_epoch(static_cast<uint32_t>((step - 1) / 50));  // 0-based, 50 steps an epoch.
  e.set_loss(loss);
  e.set_step_ms(3.25);
  e.set_bytes_pushed(step * 1000);
  e.set_raw_bytes_pushed(step * 10000);
  return e;
}

events::WorkerEvent Eval(uint32_t epoch, double accuracy) {
  events::WorkerEvent e;
  e.set_kind(events::WorkerEvent::EVAL);
  e.set_epoch(epoch);
  e.set_test_accuracy(accuracy);
  return e;
}

ProgressOptions Options(bool tty, int width = 80, uint32_t epochs = 2) {
  ProgressOptions options;
  options.name = "mlp";
  options.epochs = epochs;
  options.tty = tty;
  options.width = width;
  return options;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(ProgressPlainTest, PrintsFirstEveryTenPercentLastAndEvals) {
  std::ostringstream out;
  ProgressRenderer progress(Options(/*tty=*/false), &out);
  const absl::Time t0 = absl::UnixEpoch();
  for (uint64_t s = 1; s <= 100; ++s) {
    progress.OnEvent(0, Step(s, 100, 1.0f / s), t0 + absl::Milliseconds(10 * s));
    progress.OnEvent(1, Step(s, 100, 9.0f), t0 + absl::Milliseconds(10 * s));  // Ignored.
    if (s == 50) progress.OnEvent(0, Eval(0, 0.8421), t0 + absl::Milliseconds(10 * s));
  }
  progress.Finish();
  const std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 12u) << out.str();
  EXPECT_EQ(lines[0],
            "step 1/100 (1%) | epoch 1/2 | loss 1.0000 | 3.2 ms/step | pushed 1000 B (10.0x)");
  EXPECT_EQ(lines[1],
            "step 10/100 (10%) | epoch 1/2 | loss 0.1000 | 3.2 ms/step | pushed 9.77 KiB (10.0x)");
  EXPECT_EQ(lines[5],
            "step 50/100 (50%) | epoch 1/2 | loss 0.0200 | 3.2 ms/step | "
            "pushed 48.8 KiB (10.0x)");
  EXPECT_EQ(lines[6], "epoch 1/2: test accuracy 84.21%");
  EXPECT_EQ(lines[7],
            "step 60/100 (60%) | epoch 2/2 | loss 0.0167 | acc 84.21% | "
            "3.2 ms/step | pushed 58.6 KiB (10.0x)");
  EXPECT_THAT(lines[11], HasSubstr("step 100/100 (100%) | epoch 2/2"));
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
  EXPECT_EQ(out.str().find('\033'), std::string::npos);
}

TEST(ProgressPlainTest, ShowsTheStepsTimeSplitAndHiddenShare) {
  std::ostringstream out;
  ProgressRenderer progress(Options(/*tty=*/false), &out);
  events::WorkerEvent e = Step(1, 100, 0.5f);
  e.set_compute_ms(2.14);
  e.set_encode_ms(0.31);
  e.set_wire_ms(0.84);
  e.set_decode_ms(0.12);
  e.set_apply_ms(0.01);
  e.set_other_ms(0.38);
  e.set_comm_ms(9.5);
  e.set_comm_hidden_percent(61.4);
  progress.OnEvent(0, e, absl::UnixEpoch());
  EXPECT_EQ(out.str(),
            "step 1/100 (1%) | epoch 1/2 | loss 0.5000 | 3.2 ms/step | pushed 1000 B (10.0x) | "
            "c/e/w/d/a/o 2.1/0.3/0.8/0.1/0.0/0.4 ms | hidden 61%\n");
}

TEST(ProgressPlainTest, PrintsAfterTheIntervalBetweenMarks) {
  std::ostringstream out;
  ProgressRenderer progress(Options(/*tty=*/false), &out);
  const absl::Time t0 = absl::UnixEpoch();
  progress.OnEvent(0, Step(1, 1000, 1), t0);
  progress.OnEvent(0, Step(2, 1000, 1), t0 + absl::Seconds(1));    // Too soon.
  progress.OnEvent(0, Step(3, 1000, 1), t0 + absl::Seconds(2.5));  // Interval passed.
  progress.OnEvent(0, Step(4, 1000, 1), t0 + absl::Seconds(3));    // Too soon again.
  const std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 2u) << out.str();
  EXPECT_THAT(lines[0], HasSubstr("step 1/1000 (0%)"));
  EXPECT_THAT(lines[1], HasSubstr("step 3/1000 (0%)"));
}

TEST(ProgressPlainTest, UnknownTotalsAndWorkerOutput) {
  std::ostringstream out;
  ProgressRenderer progress(Options(/*tty=*/false, 80, /*epochs=*/0), &out);
  events::WorkerEvent e = Step(7, 0, 0.5);
  e.set_bytes_pushed(0);
  progress.OnEvent(0, e, absl::UnixEpoch());
  progress.PrintLine("[worker 1] hello");
  EXPECT_EQ(out.str(), "step 7 | epoch 1 | loss 0.5000 | 3.2 ms/step\n[worker 1] hello\n");
}

TEST(ProgressTtyTest, RedrawsOneLineInPlace) {
  std::ostringstream out;
  ProgressRenderer progress(Options(/*tty=*/true, /*width=*/200), &out);
  const absl::Time t0 = absl::UnixEpoch();
  progress.OnEvent(0, Step(40, 100, 0.25), t0);
  EXPECT_EQ(out.str(),
            "\r\033[2Kmlp [########------------]  40% step 40/100 | epoch 1/2 | loss 0.2500 | "
            "3.2 ms/step | pushed 39.1 KiB (10.0x)");
  out.str("");
  progress.OnEvent(0, Step(41, 100, 0.25), t0 + absl::Milliseconds(10));  // Throttled.
  EXPECT_EQ(out.str(), "");
  progress.OnEvent(0, Eval(0, 0.5), t0 + absl::Milliseconds(20));
  // The EVAL line goes above, then the status line comes back with the accuracy.
  EXPECT_THAT(out.str(), HasSubstr("\r\033[2Kepoch 1/2: test accuracy 50.00%\n\r\033[2Kmlp ["));
  EXPECT_THAT(out.str(), HasSubstr("step 41/100"));
  EXPECT_THAT(out.str(), HasSubstr("| loss 0.2500 | acc 50.00% | 3.2 ms/step"));
  out.str("");
  progress.Finish();
  EXPECT_EQ(out.str().back(), '\n');
}

TEST(ProgressTtyTest, CutsToTheTerminalWidthAtWholeFields) {
  std::ostringstream out;
  ProgressRenderer progress(Options(/*tty=*/true, /*width=*/30), &out);
  progress.OnEvent(0, Step(100, 100, 0.25), absl::UnixEpoch());
  EXPECT_EQ(out.str(), "\r\033[2Kmlp [##########] 100%");
  std::ostringstream tiny;
  ProgressRenderer cramped(Options(/*tty=*/true, /*width=*/12), &tiny);
  cramped.OnEvent(0, Step(100, 100, 0.25), absl::UnixEpoch());
  EXPECT_EQ(tiny.str(), "\r\033[2Kmlp [######");
  // 80 columns: a shorter bar, and the step time still fits; nothing is cut mid-field.
  std::ostringstream narrow;
  ProgressRenderer eighty(Options(/*tty=*/true, /*width=*/80), &narrow);
  eighty.OnEvent(0, Step(40, 100, 0.25), absl::UnixEpoch());
  EXPECT_EQ(narrow.str(),
            "\r\033[2Kmlp [####------]  40% step 40/100 | epoch 1/2 | loss 0.2500 | "
            "3.2 ms/step");
}

TEST(FormatTest, Bytes) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(1048575), "1.00 MiB");
  EXPECT_EQ(FormatBytes(123456789), "118 MiB");
  EXPECT_EQ(FormatBytes(uint64_t{5} << 30), "5.00 GiB");
}

TEST(FormatTest, SummaryLine) {
  events::RunSummary s;
  s.set_test_accuracy(0.8421);
  s.set_steps(938);
  s.set_wall_seconds(12.34);
  s.set_step_ms_median(4.1);
  s.set_bytes_pushed(uint64_t{3} << 20);
  s.set_bytes_pulled(uint64_t{6} << 20);
  s.set_compression_ratio(10);
  EXPECT_EQ(FormatSummaryLine(s),
            "done: test accuracy 84.21%, 938 steps in 12.3 s (median step 4.10 ms), pushed 3.00 MiB, "
            "pulled 6.00 MiB, compression 10.0x");
}

TEST(FormatTest, SummaryLineOfAResumedRunSaysHowManyStepsRanInIt) {
  events::RunSummary s;
  s.set_test_accuracy(0.8431);
  s.set_steps(400);
  s.set_start_step(194);
  s.set_wall_seconds(9.52);
  s.set_step_ms_median(30.5);
  EXPECT_EQ(FormatSummaryLine(s),
            "done: test accuracy 84.31%, 400 steps (resumed at step 194: 206 of them in this "
            "run) in 9.5 s (median step 30.50 ms), pushed 0 B, pulled 0 B");
  s.set_wall_seconds(0);  // tamp summarize without --wall_seconds: not "in 0.0 s".
  EXPECT_EQ(FormatSummaryLine(s),
            "done: test accuracy 84.31%, 400 steps (resumed at step 194: 206 of them in this "
            "run) (median step 30.50 ms), pushed 0 B, pulled 0 B");
}

// A script that reports neither (tamp.torch's automatic events): no accuracy, no loss.
TEST(FormatTest, UnreportedAccuracyAndLossAreNotShownAsZero) {
  events::RunSummary s;
  s.set_steps(30);
  s.set_wall_seconds(2);
  s.set_step_ms_median(10);
  s.set_bytes_pushed(1024);
  s.set_bytes_pulled(2048);
  s.set_compression_ratio(20);
  EXPECT_EQ(FormatSummaryLine(s),
            "done: no test accuracy reported, 30 steps in 2.0 s (median step 10.00 ms), pushed "
            "1.00 KiB, pulled 2.00 KiB, compression 20.0x");
  std::ostringstream out;
  ProgressRenderer progress(Options(/*tty=*/false), &out);
  events::WorkerEvent step = Step(1, 100, 0);
  step.clear_loss();
  progress.OnEvent(0, step, absl::UnixEpoch());
  EXPECT_EQ(out.str(), "step 1/100 (1%) | epoch 1/2 | 3.2 ms/step | pushed 1000 B (10.0x)\n");
}

TEST(FormatTest, SyntheticRunsHaveNoAccuracyAndNoLoss) {
  events::RunSummary s;
  s.set_synthetic(true);
  s.set_steps(20);
  s.set_wall_seconds(2);
  s.set_step_ms_median(100);
  EXPECT_EQ(FormatSummaryLine(s),
            "done: no test accuracy (model.kind LAYOUT: synthetic gradients), 20 steps in 2.0 s "
            "(median step 100.00 ms), pushed 0 B, pulled 0 B");
  std::ostringstream out;
  ProgressRenderer progress(Options(/*tty=*/false), &out);
  events::WorkerEvent step = Step(1, 100, 0);
  step.set_synthetic(true);
  progress.OnEvent(0, step, absl::UnixEpoch());
  EXPECT_EQ(out.str().find("loss"), std::string::npos) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("3.2 ms/step"));
}

}  // namespace
}  // namespace tamp::launcher
