// tamp: the launcher and command-line tool of Tamp.
//
//   tamp run CONFIG [--summary_json=PATH] [--metrics_file=PATH] [--run_dir=DIR]
//                   [--server_binary=PATH] [--worker_binary=PATH] [--restart_servers=N]
//                   [--restart_workers=N] [--finish_timeout=DURATION] [--kill_grace=DURATION]
//                   [-- COMMAND ARGS...]
//   tamp codecs
//   tamp summarize CONFIG EVENTS_0 ... [--summary_json=PATH] [--wall_seconds=S]
//   tamp model CONFIG --bandwidth RATE [--topology shared|hosts] [--codecs all|config] [--json]
//              [--calibration_job] [--cores N] (tamp help lists every flag)
//   tamp help
#include <stdlib.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "tools/tamp/codecs_command.h"
#include "tools/tamp/job.h"
#include "tools/tamp/model_command.h"
#include "tools/tamp/model_options.h"
#include "tools/tamp/run_command.h"
#include "tools/tamp/run_options.h"
#include "tools/tamp/summarize_command.h"
#include "worker/openblas_kernels.h"

namespace {

constexpr char kUsage[] = R"(usage: tamp <command> [args]

Commands:
  run CONFIG [flags] [-- COMMAND ARGS...]
                       Run a training job on this machine: start the parameter servers
                       and the workers CONFIG describes (only the workers when
                       cluster.server_addresses is set), show progress, stop everything
                       at the end, on a failure or on Ctrl-C. With a COMMAND, each worker
                       is a copy of it (e.g. /usr/bin/python3 train.py) that finds its place in
                       TAMP_CONFIG, TAMP_RANK, TAMP_NUM_WORKERS, TAMP_LOCAL_RANK and
                       TAMP_SERVERS; it reports progress as WorkerEvent JSON lines on
                       stdout, and its other output goes to its log.
      --summary_json=PATH    At the end, write a tamp.events.RunSummary as JSON (its
                             outcome: completed, failed or interrupted, and why).
      --metrics_file=PATH    Write one JSON object per worker step: bytes pushed and
                             pulled per shard, compression ratio, compute/encode/wire/
                             decode/apply ms and the share of communication hidden;
                             and one per test evaluation (test_accuracy). A run again
                             on the same --run_dir (a resume) first copies the earlier
                             run's file into run_dir/earlier-N, beside its logs.
      --run_dir=DIR          Directory for logs and port files (default: a fresh
                             $TMPDIR/tamp-run-XXXXXX).
      --server_binary=PATH   tamp_server to run (default: $TAMP_SERVER_BINARY, else the
                             one built next to tamp).
      --worker_binary=PATH   tamp_worker to run (default: $TAMP_WORKER_BINARY, else the
                             one built next to tamp).
      --restart_servers=N    Start a server that dies again, N times in all (it resumes
                             from its checkpoint: CONFIG needs a checkpoint block).
      --restart_workers=N    Start a worker that dies again, N times in all (it rejoins
                             the run at the other workers' step; SYNC only).
      --finish_timeout=D     Once a worker has exited 0, fail the job and stop the others
                             if they still run D later (90s, 10m, 1h; default 0: no
                             bound, the console names them). Leave rank 0 the time of
                             its work after training (a test evaluation, a save).
      --kill_grace=D         On Ctrl-C or a failure, SIGTERM goes to every process (a
                             worker's whole process group) and SIGKILL to what is left
                             D later (default 5s; 0: at once, so no server writes a
                             final checkpoint). Give a script that saves a checkpoint on
                             SIGTERM the time it needs.
  summarize CONFIG EVENTS_0 ... EVENTS_{W-1} [--summary_json=PATH] [--wall_seconds=S]
                       The run summary of a job a cluster engine started (Slurm,
                       Kubernetes), from each worker's saved stdout, in rank order
                       (a restarted worker: its processes' files, comma-separated).
  codecs               List the compression codecs, their parameters and wire sizes.
  model CONFIG --bandwidth RATE [flags]
                       Predict CONFIG's step time per codec on a link shared by all
                       processes, or a link per host (docs/perf_model.md): compute and
                       codec costs are measured here first (a few seconds), then one
                       step is simulated.
                       Prints step ms, its split, bytes per step and speedup over none.
      --bandwidth RATE       1gbit, 10gbit, 500mbit, ... or unshaped (required).
      --topology shared|hosts
                             shared: one link for every process (default); hosts: every
                             server and worker behind its own link of RATE each way.
      --codecs all|config    all: the push codec swapped for each codec's example spec;
                             config: the config's own compression (default).
      --json                 One JSON object, a tamp.events.ModelPrediction, instead of
                             the table.
      --compute_ms MS        Use this forward/backward time instead of the measured one.
      --latency_ms MS        Per-message latency (default 0.05, an estimate).
      --transport_gbit GBIT  gRPC's throughput ceiling (default 12, fitted on this machine).
      --cores N              The cores the job's processes share (default: this
                             machine's available cores).
      --calibration_job      First run the job and its uncompressed twin for a few
                             steps on loopback (~15 s for the example MLP) and add the
                             CPU they burn beyond the measured parts to the CPU bound.
      --job_cpu A,B,U,R      Reuse a calibration (--json prints it as job_cpu: ms per
                             step, ms per payload byte, core utilisation, payload
                             bytes per ms).
      --auto                 Plan compression.automatic (docs/auto.md) and print each
                             tensor's choice; --bandwidth and --topology default to the
                             block's own.
      --write_config PATH    With --auto: also write the resolved config (what tamp run
                             runs) for servers and workers a cluster engine starts.
  help                 Show this text.

Exit status: 0 success, 1 a process failed, 2 bad usage or config, 130 interrupted
(SIGINT, SIGTERM, SIGHUP, or SIGPIPE when its output, on stderr, is piped into a command that
ended: `tamp run ... 2>&1 | head`).
)";

// The whole usage without an error (tamp alone); with one, the error and where the usage is.
int Usage(const std::string& error) {
  if (error.empty()) {
    std::cerr << kUsage;
  } else {
    std::cerr << "tamp: " << error << "\n(tamp help lists the commands and their flags)\n";
  }
  return tamp::launcher::kExitUsage;
}

// The usage asked for (help, --help, -h): on stdout, and not a failure.
int Help() {
  std::cout << kUsage;
  return 0;
}

// Whether `args` ask for the usage (--help, -h), up to a "--" and the COMMAND after it.
bool AsksForHelp(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // `tamp model` runs the models' GEMMs, and every process `tamp run` starts inherits this
  // environment: give them OpenBLAS's fast kernels (worker/openblas_kernels.h).
  tamp::ReexecWithFasterOpenblasKernels(argv);
  // Under `bazel run`, relative paths (CONFIG, --summary_json, --metrics_file, --run_dir) mean the user's
  // directory, not the runfiles tree Bazel starts us in. Binaries are found from
  // /proc/self/exe, so they are unaffected.
  if (const char* dir = getenv("BUILD_WORKING_DIRECTORY"); dir != nullptr && *dir != '\0') {
    if (chdir(dir) != 0) {
      std::cerr << "tamp: cannot enter $BUILD_WORKING_DIRECTORY " << dir << "\n";
      return tamp::launcher::kExitUsage;
    }
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return Usage("");
  const std::string command = args[0];
  args.erase(args.begin());
  if (AsksForHelp(args)) return Help();
  if (command == "run") {
    absl::StatusOr<tamp::launcher::RunOptions> options = tamp::launcher::ParseRunArgs(args);
    if (!options.ok()) return Usage(std::string(options.status().message()));
    return tamp::launcher::RunCommand(*std::move(options));
  }
  if (command == "summarize") {
    return tamp::launcher::SummarizeCommand(args, &std::cout, &std::cerr);
  }
  if (command == "codecs") {
    if (!args.empty()) return Usage("codecs takes no arguments");
    return tamp::launcher::CodecsCommand(&std::cout);
  }
  if (command == "model") {
    absl::StatusOr<tamp::launcher::ModelOptions> options = tamp::launcher::ParseModelArgs(args);
    if (!options.ok()) return Usage(std::string(options.status().message()));
    return tamp::launcher::ModelCommand(*options, &std::cout, &std::cerr);
  }
  if (command == "help" || command == "--help" || command == "-h") return Help();
  return Usage("unknown command \"" + command + "\"");
}
