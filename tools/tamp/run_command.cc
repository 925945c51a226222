#include "tools/tamp/run_command.h"

#include <unistd.h>

#include <iostream>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "tools/tamp/binaries.h"
#include "tools/tamp/job.h"
#include "tools/tamp/progress.h"

namespace tamp::launcher {

int RunCommand(RunOptions options) {
  absl::StatusOr<config::RunConfig> config = LoadConfigFile(options.config_path);
  if (!config.ok()) {
    std::cerr << config.status().message() << "\n";
    return kExitUsage;
  }
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

  Console console;
  console.out = &std::cerr;
  console.ansi = IsAnsiTerminal(STDERR_FILENO);
  console.width = TerminalWidth(STDERR_FILENO, 80);
  return RunJob(*config, options, console);
}

}  // namespace tamp::launcher
