#include "tools/tamp/model_options.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "tools/tamp/command_line.h"

namespace tamp::launcher {
namespace {

// The values of `tamp model`'s flags (ParseModelArgs()); each error names the flag and
// the value.
absl::StatusOr<double> PositiveNumber(absl::string_view flag, const std::string& value) {
  double number = 0;
  if (!absl::SimpleAtod(value, &number) || !(number > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " must be a positive number, got \"", value, "\""));
  }
  return number;
}

absl::StatusOr<double> LatencyMs(const std::string& value) {
  double latency = 0;
  if (!absl::SimpleAtod(value, &latency) || !(latency >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--latency_ms must be a number >= 0, got \"", value, "\""));
  }
  return latency;
}

absl::StatusOr<int> Cores(const std::string& value) {
  int cores = 0;
  if (!absl::SimpleAtoi(value, &cores) || cores < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cores must be a whole number >= 1, got \"", value, "\""));
  }
  return cores;
}

// --codecs: true for "all".
absl::StatusOr<bool> AllCodecs(const std::string& value) {
  if (value != "all" && value != "config") {
    return absl::InvalidArgumentError(
        absl::StrCat("--codecs must be \"all\" or \"config\", got \"", value, "\""));
  }
  return value == "all";
}

absl::StatusOr<perf::JobCpuCalibration> JobCpu(const std::string& value) {
  const std::vector<std::string> parts = absl::StrSplit(value, ',');
  perf::JobCpuCalibration job;
  if (parts.size() != 4 || !absl::SimpleAtod(parts[0], &job.ms_per_step) ||
      !absl::SimpleAtod(parts[1], &job.ms_per_byte) ||
      !absl::SimpleAtod(parts[2], &job.core_utilization) ||
      !absl::SimpleAtod(parts[3], &job.payload_bytes_per_ms) || !(job.ms_per_step >= 0) ||
      !(job.ms_per_byte >= 0) || !(job.core_utilization > 0 && job.core_utilization <= 1) ||
      !(job.payload_bytes_per_ms >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--job_cpu must be MS_PER_STEP,MS_PER_BYTE,CORE_UTILIZATION,PAYLOAD_BYTES_PER_MS "
        "(>= 0, >= 0, in (0, 1], >= 0), got \"", value, "\""));
  }
  return job;
}

}  // namespace

absl::StatusOr<ModelOptions> ParseModelArgs(const std::vector<std::string>& args) {
  ModelOptions options;
  CommandLine flags;
  flags.Switch("json", &options.json)
      .Switch("calibration_job", &options.calibration_job)
      .Switch("auto", &options.auto_plan)
      .Flag("write_config", &options.write_config)
      .Flag("bandwidth", &options.link, perf::ParseBandwidth)
      .Flag("topology",
            [&](const std::string& value) -> absl::Status {
              TAMP_ASSIGN_OR_RETURN(options.topology, perf::ParseTopology(value));
              options.topology_given = true;
              return absl::OkStatus();
            })
      .Flag("codecs", &options.all_codecs, AllCodecs)
      .Flag("compute_ms", &options.compute_ms,
            [](const std::string& value) { return PositiveNumber("compute_ms", value); })
      .Flag("transport_gbit", &options.transport_gbit,
            [](const std::string& value) { return PositiveNumber("transport_gbit", value); })
      .Flag("latency_ms", &options.latency_ms, LatencyMs)
      .Flag("cores", &options.cores, Cores)
      .Flag("job_cpu", &options.job_cpu, JobCpu);
  TAMP_ASSIGN_OR_RETURN(const std::vector<std::string> positional, flags.Parse(args));
  if (positional.empty()) return absl::InvalidArgumentError("missing CONFIG");
  if (positional.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected one CONFIG, got also \"", positional[1], "\""));
  }
  // A link ParseBandwidth() accepted is named by the text given.
  if (options.link.name.empty() && !options.auto_plan) {
    return absl::InvalidArgumentError("missing --bandwidth (e.g. 1gbit, 10gbit, unshaped)");
  }
  if (!options.write_config.empty() && !options.auto_plan) {
    return absl::InvalidArgumentError(
        "--write_config writes the config compression.automatic resolves to: add --auto");
  }
  // The plan measures what it needs itself and prints its table: these would change nothing.
  if (options.auto_plan) {
    std::vector<std::string> unused;
    if (options.json) unused.push_back("--json");
    if (options.calibration_job) unused.push_back("--calibration_job");
    if (options.all_codecs) unused.push_back("--codecs all");
    if (options.compute_ms.has_value()) unused.push_back("--compute_ms");
    if (options.transport_gbit.has_value()) unused.push_back("--transport_gbit");
    if (options.latency_ms.has_value()) unused.push_back("--latency_ms");
    if (options.job_cpu.has_value()) unused.push_back("--job_cpu");
    if (!unused.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          absl::StrJoin(unused, ", "), unused.size() == 1 ? " has" : " have",
          " no effect with --auto (it plans from its own measurements and prints the plan; "
          "--bandwidth, --topology, --cores and --write_config apply)"));
    }
  }
  if (options.calibration_job && options.job_cpu.has_value()) {
    return absl::InvalidArgumentError("--job_cpu gives the calibration --calibration_job measures: pass one");
  }
  options.config_path = positional[0];
  return options;
}

}  // namespace tamp::launcher
