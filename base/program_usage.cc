#include "base/program_usage.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace tamp {

void SetProgramUsage(absl::string_view usage, std::vector<std::string> flag_files) {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [files = std::move(flag_files)](absl::string_view path) {
    for (const std::string& file : files) {
      if (absl::EndsWith(path, file)) return true;
    }
    return false;
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
}

}  // namespace tamp
