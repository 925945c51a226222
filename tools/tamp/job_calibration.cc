#include "tools/tamp/job_calibration.h"

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/cpu_time.h"
#include "base/median.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "tools/tamp/files.h"
#include "tools/tamp/job.h"
#include "tools/tamp/run_options.h"
#include "tools/tamp/summary.h"

namespace tamp::launcher {
namespace {

// Steps of the longer run left out of its median step (connection set-up, first GEMMs).
constexpr int kWarmupSteps = 10;
// Test images of the one evaluation at the end of each run (it cancels; keep it short).
constexpr uint32_t kTestLimit = 100;

// The config, cut to `steps` steps with no evaluation along the way and no checkpoints.
config::RunConfig ShortRun(const config::RunConfig& config, int steps) {
  config::RunConfig run = config;
  config::Training* training = run.mutable_training();
  training->set_max_steps(static_cast<uint64_t>(steps));
  training->set_eval_every_epoch(false);
  training->set_eval_every_steps(0);
  run.mutable_data()->set_test_limit(kTestLimit);
  run.clear_checkpoint();
  return run;
}

// Median "step_ms" of the metrics file's step lines (StepMetricsJson) after the warm-up.
absl::StatusOr<double> MedianStepMs(const std::string& metrics_path) {
  std::ifstream metrics(metrics_path);
  std::vector<double> step_ms;
  std::string line;
  for (int line_number = 1; std::getline(metrics, line); ++line_number) {
    google::protobuf::Struct fields;
    if (!google::protobuf::util::JsonStringToMessage(line, &fields).ok()) {
      return absl::InternalError(absl::StrCat("calibration job: ", metrics_path, " line ",
                                              line_number, " is not a JSON object"));
    }
    const auto step = fields.fields().find("step");
    const auto ms = fields.fields().find("step_ms");
    if (step == fields.fields().end() || ms == fields.fields().end()) continue;  // EVAL lines.
    if (step->second.number_value() > kWarmupSteps) step_ms.push_back(ms->second.number_value());
  }
  if (step_ms.empty()) {
    return absl::InternalError(absl::StrCat("calibration job: no step figures in ", metrics_path));
  }
  return Median(std::move(step_ms));
}

}  // namespace

absl::StatusOr<JobCpuSample> MeasureJobCpu(const config::RunConfig& config,
                                           const std::string& server_binary,
                                           const std::string& worker_binary, int short_steps,
                                           int long_steps) {
  if (!config.cluster().server_addresses().empty()) {
    return absl::InvalidArgumentError(
        "the calibration job starts its servers here: cluster.server_addresses must be empty");
  }
  if (short_steps < 1 || long_steps <= short_steps + kWarmupSteps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "calibration job: ", long_steps, " steps must exceed ", short_steps, " + ",
        kWarmupSteps, " warm-up steps"));
  }
  JobCpuSample sample;
  double cpu_ms[2] = {0, 0};
  const int steps[2] = {short_steps, long_steps};
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::string> run_dir = MakeRunDir("");
    if (!run_dir.ok()) return run_dir.status();
    // The children read the config from a file: the cut one, written into the run dir.
    const config::RunConfig run = ShortRun(config, steps[i]);
    std::string text;
    google::protobuf::TextFormat::PrintToString(run, &text);
    RunOptions options;
    options.config_path = *run_dir + "/calibration.pbtxt";
    if (absl::Status written = WriteFileAtomically(options.config_path, text); !written.ok()) {
      return written;
    }
    options.server_binary = server_binary;
    options.worker_binary = worker_binary;
    options.run_dir = *run_dir;
    options.metrics_file = *run_dir + "/metrics.jsonl";
    std::ostringstream progress;  // Not shown: the model prints its own report.
    Console console;
    console.out = &progress;
    const double before = CpuMs(RUSAGE_CHILDREN);
    const int exit_code = RunJob(run, options, console);
    cpu_ms[i] = CpuMs(RUSAGE_CHILDREN) - before;
    if (exit_code != kExitOk) {
      return absl::InternalError(absl::StrCat("calibration job of ", steps[i],
                                              " steps failed (exit ", exit_code, "); logs are in ",
                                              *run_dir));
    }
    if (i == 1) {
      absl::StatusOr<double> median = MedianStepMs(options.metrics_file);
      if (!median.ok()) return median.status();
      sample.step_ms = *median;
    }
    std::error_code ignored;
    std::filesystem::remove_all(*run_dir, ignored);
  }
  sample.cpu_ms_per_step = std::max(0.0, cpu_ms[1] - cpu_ms[0]) / (long_steps - short_steps);
  return sample;
}

perf::JobCpuCalibration FitJobCpu(const std::vector<CalibrationRun>& runs, int usable_cores) {
  perf::JobCpuCalibration fit;
  if (runs.empty()) return fit;
  auto missed = [](const CalibrationRun& run) {
    return run.measured.cpu_ms_per_step - run.counted_cpu_ms;
  };
  if (runs.size() >= 2 && runs[0].payload_bytes != runs[1].payload_bytes) {
    fit.ms_per_byte = std::max(0.0, (missed(runs[0]) - missed(runs[1])) /
                                        (runs[0].payload_bytes - runs[1].payload_bytes));
  }
  double constant = 0;
  for (const CalibrationRun& run : runs) constant += missed(run) - fit.ms_per_byte * run.payload_bytes;
  fit.ms_per_step = std::max(0.0, constant / runs.size());
  double busiest = 0;
  for (const CalibrationRun& run : runs) {
    if (run.measured.step_ms > 0 && usable_cores > 0) {
      busiest = std::max(busiest, run.measured.cpu_ms_per_step / (usable_cores * run.measured.step_ms));
    }
    if (run.measured.step_ms > 0) {
      fit.payload_bytes_per_ms =
          std::max(fit.payload_bytes_per_ms, run.payload_bytes / run.measured.step_ms);
    }
  }
  fit.core_utilization = busiest > 0 ? std::clamp(busiest, 0.05, 1.0) : 1.0;
  return fit;
}

}  // namespace tamp::launcher
