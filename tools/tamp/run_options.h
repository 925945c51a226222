// Options of `tamp run` and their command-line parsing.
#ifndef TAMP_TOOLS_TAMP_RUN_OPTIONS_H_
#define TAMP_TOOLS_TAMP_RUN_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tamp::launcher {

struct RunOptions {
  std::string config_path;
  // The worker program and its arguments (`tamp run CONFIG -- COMMAND ARGS...`), started
  // cluster.num_workers times with its placement in TAMP_* variables; empty: tamp_worker.
  std::vector<std::string> command;
  // Where to write the RunSummary JSON when the job ends (RunSummary.outcome says how);
  // empty: nowhere.
  std::string summary_json;
  // Where to write one JSON object per worker step (figures of its STEP event, one line
  // each, flushed as they come); empty: nowhere.
  std::string metrics_file;
  // Directory for logs and port files; empty: a fresh one under $TMPDIR.
  std::string run_dir;
  // Binaries; empty: found by FindBinary().
  std::string server_binary;
  std::string worker_binary;

  // How many times in all a server that exits while the workers run is started again
  // (same rank, flags and port; it resumes from its checkpoint, so CONFIG needs a
  // checkpoint block). 0: such an exit fails the run.
  int restart_servers = 0;
  // How many times in all a worker that dies (exits non-zero or by a signal) is started
  // again: same rank and placement, with --resume (tamp_worker) or TAMP_RESTART=<n> (a
  // COMMAND) added; it rejoins the run at the other workers' step (SYNC). 0: such an exit
  // fails the run.
  int restart_workers = 0;

  // Bound on the wait for every server's port file.
  absl::Duration server_start_timeout = absl::Seconds(30);
  // After the workers succeed: SIGTERM to servers, SIGKILL after this.
  absl::Duration stop_grace = absl::Seconds(10);
  // After a failure or an interrupt: SIGTERM to everything, SIGKILL after this
  // (--kill_grace; 0: SIGKILL at once).
  absl::Duration failure_grace = absl::Seconds(5);
  // Once a worker has finished, how long the others may run on before the console names
  // them (then again every 5 times as long): a worker the servers dropped (a SYNC barrier's
  // consistency.worker_timeout_ms) that hangs cannot rejoin a run that is over.
  absl::Duration straggler_notice = absl::Seconds(60);
  // Once a worker has exited 0, how long the others may run on before the job fails and
  // stops them (--finish_timeout); zero: no bound, the console names them only.
  absl::Duration finish_timeout = absl::ZeroDuration();
};

// ParseRunArgs()
//
// Parses the arguments after "run": one CONFIG and the flags --summary_json, --metrics_file,
// --run_dir, --server_binary, --worker_binary, --restart_servers and --restart_workers (counts
// >= 0), --finish_timeout and --kill_grace (durations with their unit, or 0), each as --flag=VALUE or --flag VALUE (tools/tamp/command_line.h), then optionally "--" and a COMMAND: everything after the
// first "--" is the COMMAND, which replaces tamp_worker (so it excludes --worker_binary).
// INVALID_ARGUMENT with a one-line reason otherwise.
absl::StatusOr<RunOptions> ParseRunArgs(const std::vector<std::string>& args);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_RUN_OPTIONS_H_
