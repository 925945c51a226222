#include "tools/tamp/run_command.h"

#include <malloc.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/cpu_time.h"
#include "base/status_macros.h"
#include "job/builtin_trainer_config.h"
#include "job/chunk_codecs.h"
#include "job/config.h"
#include "tools/tamp/auto_command.h"
#include "tools/tamp/binaries.h"
#include "tools/tamp/files.h"
#include "tools/tamp/job.h"
#include "tools/tamp/perf_model.h"
#include "tools/tamp/progress.h"

namespace tamp::launcher {
namespace {

// compression.automatic planned on this machine for the block's link, the plan printed, and
// the resolved config written to <run_dir>/auto.pbtxt, which options now name.
absl::StatusOr<config::RunConfig> ResolveAutoForRun(const config::RunConfig& config,
                                                    RunOptions* options) {
  const config::AutoCompression& automatic = config.compression().automatic();
  TAMP_ASSIGN_OR_RETURN(const perf::Link link, AutoLink(automatic));
  TAMP_ASSIGN_OR_RETURN(const perf::Topology topology, AutoTopology(automatic));
  TAMP_ASSIGN_OR_RETURN(const AutoResult result,
                        ResolveAutomatic(config, link, topology, AvailableCores()));
  // The measurements (the model's copies, their gradients, the candidates' payloads) are
  // freed; hand their pages back before the job starts next to this process.
  malloc_trim(0);
  std::cerr << FormatPlan(config, result, link);
  TAMP_ASSIGN_OR_RETURN(const std::string run_dir, MakeRunDir(options->run_dir));
  const std::string path = run_dir + "/auto.pbtxt";
  TAMP_RETURN_IF_ERROR(WriteResolvedConfig(
      result, path, absl::StrCat("tamp run on ", link.name, ", ", perf::DescribeTopology(topology))));
  std::cerr << "tamp: auto: the resolved config is " << path << "\n";
  options->run_dir = run_dir;
  options->config_path = path;
  return result.resolved;
}

}  // namespace

int RunCommand(RunOptions options) {
  std::vector<std::string> notes;
  absl::StatusOr<config::RunConfig> config = LoadConfigFile(options.config_path, &notes);
  if (!config.ok()) {
    std::cerr << "tamp: " << config.status().message() << "\n";
    return kExitUsage;
  }
  for (const std::string& note : notes) std::cerr << "tamp: warning: " << note << "\n";
  if (options.restart_servers > 0 && !config->has_checkpoint()) {
    std::cerr << "tamp: --restart_servers needs a checkpoint block in " << options.config_path
              << " (a restarted server resumes from its checkpoint)\n";
    return kExitUsage;
  }
  if (options.restart_workers > 0 &&
      (config->consistency().mode() != config::Consistency::SYNC ||
       config->server().mode() == config::Server::AGGREGATE)) {
    std::cerr << "tamp: --restart_workers needs consistency.mode SYNC and server.mode OPTIMIZER"
              << " in " << options.config_path
              << " (a restarted worker rejoins with the weights the servers hold)\n";
    return kExitUsage;
  }
  if (config->cluster().server_addresses().empty()) {
    absl::StatusOr<std::string> server = FindBinary(ProcessBinaryLookup(
        "--server_binary", options.server_binary, "TAMP_SERVER_BINARY", "server/tamp_server"));
    if (!server.ok()) {
      std::cerr << "tamp: " << server.status().message() << "\n";
      return kExitUsage;
    }
    options.server_binary = *server;
  }
  if (options.command.empty()) {
    absl::StatusOr<std::string> worker = FindBinary(ProcessBinaryLookup(
        "--worker_binary", options.worker_binary, "TAMP_WORKER_BINARY", "worker/tamp_worker"));
    if (!worker.ok()) {
      std::cerr << "tamp: " << worker.status().message() << "\n";
      return kExitUsage;
    }
    options.worker_binary = *worker;
  }

  if (config->compression().has_automatic()) {
    // Resolved here, once, into a config every process reads (docs/auto.md).
    absl::StatusOr<config::RunConfig> resolved = ResolveAutoForRun(*config, &options);
    if (!resolved.ok()) {
      std::cerr << "tamp: " << resolved.status().message() << "\n";
      return kExitUsage;
    }
    config = *std::move(resolved);
  }
  // A chunk its codec cannot take (powersgd's rank on a bias) is refused as a config, before
  // any process starts, rather than by a server already launched.
  if (absl::Status codecs = CheckChunkCodecs(*config); !codecs.ok()) {
    std::cerr << "tamp: " << options.config_path << ": " << codecs.message() << "\n";
    return kExitUsage;
  }
  if (options.command.empty()) {  // The built-in trainer.
    if (absl::Status trainer = CheckBuiltInTrainerConfig(*config); !trainer.ok()) {
      std::cerr << "tamp: " << options.config_path << ": " << trainer.message() << "\n";
      return kExitUsage;
    }
  }

  Console console;
  console.out = &std::cerr;
  console.ansi = IsAnsiTerminal(STDERR_FILENO);
  console.width = TerminalWidth(STDERR_FILENO, 80);
  return RunJob(*config, options, console);
}

}  // namespace tamp::launcher
