#ifndef TAMP_BASE_PROGRAM_USAGE_H_
#define TAMP_BASE_PROGRAM_USAGE_H_

// A binary's --help: its usage message and its own flags.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace tamp {

// Sets `usage` as the program's usage message, and makes --help (and --helpshort) list the
// flags defined in the files whose paths end in one of `flag_files` (e.g.
// "worker/worker_main.cc"): Abseil's default lists those of a file named after the binary,
// which none of ours is, and --help said "No flags matched". Call before
// absl::ParseCommandLine(), once.
void SetProgramUsage(absl::string_view usage, std::vector<std::string> flag_files);

// When argv (before any "--") asks for help (--help, -help, --helpshort or -helpshort),
// prints the usage message and those flags, sorted, to stdout and exits 0: help asked for
// is no failure, and absl::ParseCommandLine() of Debian's Abseil exits 1 for it. Call after
// SetProgramUsage(), before absl::ParseCommandLine().
void ExitIfHelpAsked(int argc, char** argv);

// When argv (before any "--") names a flag the program does not define, or gives a flag a
// value it cannot take, prints "PROGRAM: unknown flag --porrt (--help lists the flags)" or
// "PROGRAM: --rank=-1: <why>" to stderr and exits 2, the usage error of every other bad
// flag or config: absl::ParseCommandLine() exits 1 for these, which launchers and cluster
// engines read as a run-time failure. Abseil's own flags (--flagfile, --fromenv, ...) are
// left to it. Call before absl::ParseCommandLine().
void ExitIfFlagsBad(int argc, char** argv);

}  // namespace tamp

#endif  // TAMP_BASE_PROGRAM_USAGE_H_
