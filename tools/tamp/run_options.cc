#include "tools/tamp/run_options.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tools/tamp/command_line.h"

namespace tamp::launcher {
namespace {

// --restart_servers, --restart_workers.
CommandLine::ValueParser Count(absl::string_view flag, int* count) {
  return [flag = std::string(flag), count](const std::string& value) {
    if (!absl::SimpleAtoi(value, count) || *count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": expected a count >= 0, got \"", value, "\""));
    }
    return absl::OkStatus();
  };
}

// --finish_timeout, --kill_grace: a duration with its unit ("90s", "10m", "1h"), or 0.
CommandLine::ValueParser NonNegativeDuration(absl::string_view flag, absl::Duration* duration) {
  return [flag = std::string(flag), duration](const std::string& value) {
    if (value == "0") {
      *duration = absl::ZeroDuration();
      return absl::OkStatus();
    }
    if (!absl::ParseDuration(value, duration) || *duration < absl::ZeroDuration() ||
        *duration == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, ": expected a duration with its unit (90s, 10m, 1h) or 0, got \"", value,
          "\""));
    }
    return absl::OkStatus();
  };
}

}  // namespace

absl::StatusOr<RunOptions> ParseRunArgs(const std::vector<std::string>& args) {
  RunOptions options;
  CommandLine flags;
  flags.Flag("restart_servers", Count("restart_servers", &options.restart_servers))
      .Flag("restart_workers", Count("restart_workers", &options.restart_workers))
      .Flag("finish_timeout", NonNegativeDuration("finish_timeout", &options.finish_timeout))
      .Flag("kill_grace", NonNegativeDuration("kill_grace", &options.failure_grace))
      .Flag("summary_json", &options.summary_json)
      .Flag("metrics_file", &options.metrics_file)
      .Flag("run_dir", &options.run_dir)
      .Flag("server_binary", &options.server_binary)
      .Flag("worker_binary", &options.worker_binary)
      .Command(&options.command, "a COMMAND to run as each worker");
  absl::StatusOr<std::vector<std::string>> positional = flags.Parse(args);
  if (!positional.ok()) return positional.status();
  if (positional->empty()) return absl::InvalidArgumentError("missing CONFIG");
  if (positional->size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected one CONFIG, got also \"", (*positional)[1], "\""));
  }
  options.config_path = (*positional)[0];
  if (!options.command.empty() && !options.worker_binary.empty()) {
    return absl::InvalidArgumentError(
        "--worker_binary and a COMMAND after \"--\" exclude each other: the COMMAND is the "
        "worker");
  }
  return options;
}

}  // namespace tamp::launcher
