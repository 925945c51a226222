#include "tools/tamp/job_calibration.h"

#include "gtest/gtest.h"

namespace tamp::launcher {
namespace {

CalibrationRun Measured(double measured_cpu_ms, double step_ms, double counted_cpu_ms, double bytes) {
  CalibrationRun run;
  run.measured.cpu_ms_per_step = measured_cpu_ms;
  run.measured.step_ms = step_ms;
  run.counted_cpu_ms = counted_cpu_ms;
  run.payload_bytes = bytes;
  return run;
}

// Two jobs that the model undercounts by 9 + 1.2e-6 x bytes ms: the fit finds both terms,
// and takes the busier job's cores (60.8 ms of CPU in a 33.2 ms step on 2 cores: 92%,
// against 89% for the other).
TEST(FitJobCpuTest, SplitsWhatTheModelMissesIntoPerStepAndPerByte) {
  const double small = 0.5e6, large = 29.8e6;
  const perf::JobCpuCalibration fit =
      FitJobCpu({Measured(18 + 9 + 1.2e-6 * small, 15.5, 18, small),
                 Measured(16 + 9 + 1.2e-6 * large, 33.2, 16, large)},
                /*usable_cores=*/2);
  EXPECT_NEAR(fit.ms_per_step, 9, 1e-9);
  EXPECT_NEAR(fit.ms_per_byte, 1.2e-6, 1e-15);
  EXPECT_NEAR(fit.core_utilization, (16 + 9 + 1.2e-6 * large) / (2 * 33.2), 1e-12);
  EXPECT_NEAR(fit.payload_bytes_per_ms, large / 33.2, 1e-6);
}

TEST(FitJobCpuTest, NeverSubtractsAndStaysWithinOneCorePerCore) {
  // Measured below counted, and more CPU per step than the cores can give: a, b = 0, u = 1.
  const perf::JobCpuCalibration fit =
      FitJobCpu({Measured(10, 4, 20, 1e6), Measured(30, 4, 40, 2e6)}, /*usable_cores=*/2);
  EXPECT_EQ(fit.ms_per_step, 0);
  EXPECT_EQ(fit.ms_per_byte, 0);
  EXPECT_EQ(fit.core_utilization, 1);
}

TEST(FitJobCpuTest, EqualBytesGiveAConstantAndNoRunsChangeNothing) {
  const perf::JobCpuCalibration constant =
      FitJobCpu({Measured(30, 20, 20, 1e6), Measured(34, 20, 20, 1e6)}, /*usable_cores=*/2);
  EXPECT_NEAR(constant.ms_per_step, 12, 1e-12);
  EXPECT_EQ(constant.ms_per_byte, 0);
  EXPECT_NEAR(constant.core_utilization, 34.0 / 40, 1e-12);
  const perf::JobCpuCalibration none = FitJobCpu({}, 2);
  EXPECT_EQ(none.ms_per_step, 0);
  EXPECT_EQ(none.ms_per_byte, 0);
  EXPECT_EQ(none.core_utilization, 1);
  EXPECT_EQ(none.payload_bytes_per_ms, 0);
}

}  // namespace
}  // namespace tamp::launcher
