#include "tools/tamp/binaries.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tamp::launcher {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string Dirname(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::StatusOr<std::string> FindBinary(const BinaryLookup& lookup) {
  if (!lookup.flag_value.empty()) {
    if (IsExecutableFile(lookup.flag_value)) return lookup.flag_value;
    return absl::NotFoundError(
        absl::StrCat(lookup.flag_name, "=", lookup.flag_value, ": not an executable file"));
  }
  if (!lookup.env_value.empty()) {
    if (IsExecutableFile(lookup.env_value)) return lookup.env_value;
    return absl::NotFoundError(
        absl::StrCat("$", lookup.env_name, "=", lookup.env_value, ": not an executable file"));
  }
  std::vector<std::string> candidates;
  if (!lookup.exe_path.empty()) {
    candidates.push_back(absl::StrCat(lookup.exe_path, ".runfiles/tamp/", lookup.workspace_path));
  }
  if (!lookup.runfiles_dir.empty()) {
    candidates.push_back(absl::StrCat(lookup.runfiles_dir, "/tamp/", lookup.workspace_path));
  }
  if (!lookup.exe_path.empty()) {
    candidates.push_back(absl::StrCat(Dirname(lookup.exe_path), "/../../", lookup.workspace_path));
  }
  for (const std::string& candidate : candidates) {
    if (IsExecutableFile(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat("cannot find ", lookup.workspace_path, "; pass ",
                                          lookup.flag_name, "=PATH or set $", lookup.env_name,
                                          " (tried: ", absl::StrJoin(candidates, ", "), ")"));
}

BinaryLookup ProcessBinaryLookup(const std::string& flag_name, const std::string& flag_value,
                                 const std::string& env_name, const std::string& workspace_path) {
  BinaryLookup lookup;
  lookup.flag_name = flag_name;
  lookup.flag_value = flag_value;
  lookup.env_name = env_name;
  if (const char* env = getenv(env_name.c_str())) lookup.env_value = env;
  if (const char* runfiles = getenv("RUNFILES_DIR")) lookup.runfiles_dir = runfiles;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) lookup.exe_path.assign(exe, n);
  lookup.workspace_path = workspace_path;
  return lookup;
}

}  // namespace tamp::launcher
