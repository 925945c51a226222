// `tamp summarize CONFIG EVENTS_0 ... EVENTS_{W-1} [--summary_json=PATH] [--wall_seconds=S]`:
// the run summary of a job that a cluster engine (Slurm, Kubernetes) started, from each
// worker's stdout saved to a file (file i holds worker i's lines; lines that are not worker
// events, such as logs, are skipped). The same figures `tamp run --summary_json` writes.
// Flags as tools/tamp/command_line.h reads them (--flag=VALUE or --flag VALUE).
#ifndef TAMP_TOOLS_TAMP_SUMMARIZE_COMMAND_H_
#define TAMP_TOOLS_TAMP_SUMMARIZE_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace tamp::launcher {

// Returns the process exit status: 0 done, 1 a worker's events are incomplete or a file
// cannot be read or written, 2 bad usage or config. Messages go to `out` / `err`.
int SummarizeCommand(const std::vector<std::string>& args, std::ostream* out, std::ostream* err);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_SUMMARIZE_COMMAND_H_
