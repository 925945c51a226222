#include "tools/tamp/run_options.h"

#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tamp::launcher {

absl::StatusOr<RunOptions> ParseRunArgs(const std::vector<std::string>& args) {
  RunOptions options;
  std::string restart_servers, restart_workers;
  const std::pair<const char*, std::string*> flags[] = {
      {"restart_servers", &restart_servers},
      {"restart_workers", &restart_workers},
      {"summary_json", &options.summary_json},
      {"metrics_file", &options.metrics_file},
      {"run_dir", &options.run_dir},
      {"server_binary", &options.server_binary},
      {"worker_binary", &options.worker_binary},
  };
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      options.command.assign(args.begin() + i + 1, args.end());
      if (options.command.empty()) {
        return absl::InvalidArgumentError(
            "\"--\" must be followed by a COMMAND to run as each worker");
      }
      break;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    std::string* target = nullptr;
    for (const auto& [flag, field] : flags) {
      if (name == flag) target = field;
    }
    if (target == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    if (value.empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, " is empty"));
    *target = value;
  }
  if (positional.empty()) return absl::InvalidArgumentError("missing CONFIG");
  if (positional.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected one CONFIG, got also \"", positional[1], "\""));
  }
  options.config_path = positional[0];
  if (!options.command.empty() && !options.worker_binary.empty()) {
    return absl::InvalidArgumentError(
        "--worker_binary and a COMMAND after \"--\" exclude each other: the COMMAND is the "
        "worker");
  }
  for (const auto& [flag, text, count] :
       {std::make_tuple("restart_servers", &restart_servers, &options.restart_servers),
        std::make_tuple("restart_workers", &restart_workers, &options.restart_workers)}) {
    if (!text->empty() && (!absl::SimpleAtoi(*text, count) || *count < 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": expected a count >= 0, got \"", *text, "\""));
    }
  }
  return options;
}

}  // namespace tamp::launcher
