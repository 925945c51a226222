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
#include "absl/strings/str_cat.h"

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

void ExitIfFlagsBad(int argc, char** argv) {
  const absl::string_view path = argv[0];
  const std::string program(path.substr(path.rfind('/') + 1));  // npos + 1 == 0.
  auto bad = [&](const std::string& message) {
    std::cerr << program << ": " << message << "\n";
    std::exit(2);
  };
  for (int i = 1; i < argc && absl::string_view(argv[i]) != "--"; ++i) {
    absl::string_view arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') continue;  // Positional: the program checks those.
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t equals = arg.find('=');
    const absl::string_view name = arg.substr(0, equals);
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no") && equals == absl::string_view::npos) {
      const absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>()) continue;  // --nocheck
    }
    if (flag == nullptr) {
      static const char* const kAbseils[] = {"flagfile", "fromenv", "tryfromenv", "undefok",
                                             "help", "helpfull", "helpshort", "helppackage",
                                             "helpmatch", "version", "only_check_args"};
      if (std::find(std::begin(kAbseils), std::end(kAbseils), name) != std::end(kAbseils)) {
        continue;
      }
      const absl::string_view written = absl::string_view(argv[i]).substr(
          0, absl::string_view(argv[i]).find('='));  // As typed, without a value.
      bad(absl::StrCat("unknown flag ", written, " (--help lists the flags)"));
    }
    std::string value;
    if (equals != absl::string_view::npos) {
      value = std::string(arg.substr(equals + 1));
    } else if (flag->IsOfType<bool>()) {
      continue;
    } else if (i + 1 < argc) {
      value = argv[++i];  // --rank 1
    } else {
      bad(absl::StrCat("--", name, " needs a value"));
    }
    // ParseFrom() sets the flag; ParseCommandLine() sets it again from the same text.
    std::string error;
    if (!flag->ParseFrom(value, &error)) bad(absl::StrCat("--", name, "=", value, ": ", error));
  }
}

}  // namespace tamp
