// RunJob(): one local training job — servers, workers, progress, teardown, summary.
//
// Given a loaded config and resolved binaries it
//   1. starts cluster.num_servers `tamp_server`s (unless cluster.server_addresses names
//      servers started elsewhere) and waits for each one's port file;
//   2. starts cluster.num_workers `tamp_worker`s pointed at the servers, or as many copies
//      of RunOptions::command with their placement in the environment (TAMP_CONFIG,
//      TAMP_RANK, TAMP_NUM_WORKERS, TAMP_LOCAL_RANK, TAMP_SERVERS; job/placement.h; and
//      torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and
//      a free MASTER_PORT, for the script's torch.distributed process group),
//      reads their WorkerEvent lines and renders progress; other stdout lines go to the
//      console and the worker's log;
//   3. when every worker has exited 0 (a tamp_worker after reporting DONE): stops the
//      servers (SIGTERM, then SIGKILL after RunOptions::stop_grace), writes --summary_json
//      and prints a summary line (the wall time only when a COMMAND reported no DONE).
// A server that exits while workers run is started again on its port, up to
// RunOptions::restart_servers times in all; a worker that exits non-zero or by a signal is
// started again to rejoin the run (tamp_worker --resume, a COMMAND with TAMP_RESTART=<n>), up
// to RunOptions::restart_workers times; the summary counts both. On the first failure past
// those (a child exiting non-zero or by a signal, a server exiting while workers run, a
// server not coming up in time) it names the child, prints the tail of its log and tears
// everything down (SIGTERM, SIGKILL after RunOptions::failure_grace); so does a worker
// still running RunOptions::finish_timeout after another exited 0.
// SIGINT/SIGTERM/SIGHUP (and SIGPIPE, once) to the launcher tear down the same way; a second one SIGKILLs at
// once. No child outlives RunJob() in any path. A job that fails or is interrupted still
// writes --summary_json: what the workers reported, its outcome and why
// (SummaryBuilder::BuildEnded).
//
// At start it prints each shard's chunk count and bytes (from BuildJobLayout). With
// RunOptions::metrics_file it writes StepMetricsJson() of every STEP event and
// EvalMetricsJson() of every EVAL event, a line each.
//
// Files in the run dir: server-I.log, server-I.port, worker-J.log (children's stderr, and a
// worker's stdout lines that are not events); a restart's log is <role>-<rank>.restart-N.log.
//
// job.cc is one class over 700 lines: the job's life (start, watch, restarts, teardown, the
// summary) shares one state, and its parts that stand alone live beside it (files.h,
// process_group.h, summary.h, progress.h, interrupt.h).
#ifndef TAMP_TOOLS_TAMP_JOB_H_
#define TAMP_TOOLS_TAMP_JOB_H_

#include <ostream>

#include "proto/config.pb.h"
#include "tools/tamp/run_options.h"

namespace tamp::launcher {

// Exit codes of `tamp`.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;  // Bad command line or config; nothing started.
inline constexpr int kExitInterrupted = 130;

// Where RunJob() reports: progress, launcher messages, forwarded worker output.
struct Console {
  std::ostream* out = nullptr;
  // Redraw one status line in place (ANSI) instead of printing plain progress lines.
  bool ansi = false;
  int width = 80;
};

// RunJob()
//
// Runs the job `config` describes with options.server_binary and options.worker_binary or
// options.command (server_binary may be empty when config.cluster.server_addresses is set;
// worker_binary when a command is). A command that cannot be executed fails the run like a
// failing worker. Returns the exit code: kExitOk, kExitFailed, kExitUsage (run dir unusable) or
// kExitInterrupted. Blocks until everything it started has been reaped. Installs signal
// handlers for SIGINT, SIGTERM, SIGHUP and SIGPIPE while it runs; not reentrant.
int RunJob(const config::RunConfig& config, const RunOptions& options, const Console& console);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_JOB_H_
