#include "tools/tamp/command_line.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tamp::launcher {

CommandLine& CommandLine::Flag(absl::string_view name, ValueParser parse) {
  flags_[std::string(name)] = Spec{std::move(parse), nullptr};
  return *this;
}

CommandLine& CommandLine::Flag(absl::string_view name, std::string* value) {
  return Flag(name, [name = std::string(name), value](const std::string& text) {
    if (text.empty()) return absl::InvalidArgumentError(absl::StrCat("--", name, " is empty"));
    *value = text;
    return absl::OkStatus();
  });
}

CommandLine& CommandLine::Switch(absl::string_view name, bool* on) {
  flags_[std::string(name)] = Spec{nullptr, on};
  return *this;
}

CommandLine& CommandLine::Command(std::vector<std::string>* command, absl::string_view what) {
  command_ = command;
  command_what_ = std::string(what);
  return *this;
}

absl::StatusOr<std::vector<std::string>> CommandLine::Parse(
    const std::vector<std::string>& args) const {
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" && command_ != nullptr) {
      command_->assign(args.begin() + i + 1, args.end());
      if (command_->empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("\"--\" must be followed by ", command_what_));
      }
      break;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    std::string value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const auto flag = flags_.find(name);
    if (flag == flags_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    const Spec& spec = flag->second;
    if (spec.on != nullptr) {
      if (inline_value) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
      *spec.on = true;
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    if (absl::Status parsed = spec.parse(value); !parsed.ok()) return parsed;
  }
  return positional;
}

}  // namespace tamp::launcher
