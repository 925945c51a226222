#include "base/program_usage.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace tamp {
namespace {

// The files whose flags --help lists (SetProgramUsage()).
std::vector<std::string>& FlagFiles() {
  static auto* files = new std::vector<std::string>();
  return *files;
}

bool InFlagFiles(absl::string_view path) {
  for (const std::string& file : FlagFiles()) {
    if (absl::EndsWith(path, file)) return true;
  }
  return false;
}

}  // namespace

void SetProgramUsage(absl::string_view usage, std::vector<std::string> flag_files) {
  FlagFiles() = std::move(flag_files);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = InFlagFiles;
  config.contains_helpshort_flags = InFlagFiles;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
}

void ExitIfHelpAsked(int argc, char** argv) {
  bool asked = false;
  for (int i = 1; i < argc && absl::string_view(argv[i]) != "--"; ++i) {
    const absl::string_view arg = argv[i];
    asked |= arg == "--help" || arg == "-help" || arg == "--helpshort" || arg == "-helpshort";
  }
  if (!asked) return;
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (InFlagFiles(flag->Filename())) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) {
              return a->Name() < b->Name();
            });
  std::cout << absl::ProgramUsageMessage() << "\n\nFlags:\n";
  for (const absl::CommandLineFlag* flag : flags) {
    std::cout << "    --" << flag->Name() << " (" << flag->Help() << "); default: "
              << flag->DefaultValue() << ";\n";
  }
  std::cout.flush();
  std::exit(0);
}

}  // namespace tamp
