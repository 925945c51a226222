// Locating the tamp_server and tamp_worker executables the launcher starts.
#ifndef TAMP_TOOLS_TAMP_BINARIES_H_
#define TAMP_TOOLS_TAMP_BINARIES_H_

#include <string>

#include "absl/status/statusor.h"

namespace tamp::launcher {

// Where to look for one binary, in this order:
//   1. `flag_value` (--server_binary / --worker_binary) if non-empty;
//   2. `env_value` (the value of $`env_name`) if non-empty;
//   3. Bazel runfiles of the launcher: `exe_path`.runfiles/tamp/`workspace_path`;
//   4. $RUNFILES_DIR/tamp/`workspace_path` (`runfiles_dir`, when the launcher itself runs
//      from another target's runfiles);
//   5. the bazel-bin layout: dirname(`exe_path`)/../../`workspace_path`.
// A flag or environment value that does not name an executable file is an error (it is
// not silently skipped).
struct BinaryLookup {
  std::string flag_name;  // "--server_binary"
  std::string flag_value;
  std::string env_name;  // "TAMP_SERVER_BINARY"
  std::string env_value;
  std::string exe_path;        // The launcher, e.g. from /proc/self/exe.
  std::string runfiles_dir;    // $RUNFILES_DIR, may be empty.
  std::string workspace_path;  // "server/tamp_server"
};

// FindBinary()
//
// NOT_FOUND (listing every place tried) when no candidate is an executable file.
absl::StatusOr<std::string> FindBinary(const BinaryLookup& lookup);

// Lookup for `workspace_path` filled from the process: /proc/self/exe, getenv(env_name),
// getenv("RUNFILES_DIR").
BinaryLookup ProcessBinaryLookup(const std::string& flag_name, const std::string& flag_value,
                                 const std::string& env_name, const std::string& workspace_path);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_BINARIES_H_
