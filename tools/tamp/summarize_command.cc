#include "tools/tamp/summarize_command.h"

#include <fstream>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "job/config.h"
#include "tools/tamp/command_line.h"
#include "tools/tamp/files.h"
#include "tools/tamp/job.h"
#include "tools/tamp/progress.h"
#include "tools/tamp/summary.h"

namespace tamp::launcher {

int SummarizeCommand(const std::vector<std::string>& args, std::ostream* out, std::ostream* err) {
  std::string summary_json;
  double wall_seconds = 0;
  CommandLine flags;
  flags.Flag("summary_json", &summary_json)
      .Flag("wall_seconds", &wall_seconds, [](const std::string& value) -> absl::StatusOr<double> {
        double seconds = 0;
        if (!absl::SimpleAtod(value, &seconds) || !(seconds >= 0)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--wall_seconds needs a non-negative number, got '", value, "'"));
        }
        return seconds;
      });
  absl::StatusOr<std::vector<std::string>> parsed = flags.Parse(args);
  if (!parsed.ok()) {
    *err << "tamp summarize: " << parsed.status().message() << "\n";
    return kExitUsage;
  }
  const std::vector<std::string>& positional = *parsed;
  if (positional.empty()) {
    *err << "tamp summarize: usage: tamp summarize CONFIG EVENTS_0 ... [--summary_json=PATH]\n";
    return kExitUsage;
  }
  absl::StatusOr<config::RunConfig> config = LoadConfigFile(positional[0]);
  if (!config.ok()) {
    *err << "tamp summarize: " << config.status().message() << "\n";
    return kExitUsage;
  }
  const int num_workers = static_cast<int>(config->cluster().num_workers());
  if (static_cast<int>(positional.size()) - 1 != num_workers) {
    *err << "tamp summarize: " << positional[0] << " has cluster.num_workers " << num_workers
         << " but " << positional.size() - 1
         << " event files were given (one per worker, in rank order)\n";
    return kExitUsage;
  }
  // As `tamp run`: a path that cannot be written is refused before anything is read, and
  // missing directories above it are made.
  if (!summary_json.empty()) {
    if (absl::Status ready = PrepareOutputFile(summary_json); !ready.ok()) {
      *err << "tamp summarize: --summary_json: " << ready.message() << "\n";
      return kExitUsage;
    }
  }
  // --summary_json, when given; false, said, when it cannot be written.
  auto write_summary = [&](const events::RunSummary& summary) {
    if (summary_json.empty()) return true;
    const absl::Status written =
        WriteFileAtomically(summary_json, SummaryToJson(summary) + "\n");
    if (!written.ok()) {
      *err << "tamp summarize: cannot write the summary: " << written.message() << "\n";
    }
    return written.ok();
  };
  SummaryBuilder builder(num_workers);
  // By worker: the step its first process began (its first file's start_step), if it said.
  std::vector<std::optional<uint64_t>> first_step(num_workers);
  for (int worker = 0; worker < num_workers; ++worker) {
    // A worker restarted: its processes' files in order, comma-separated.
    const std::vector<std::string> paths = absl::StrSplit(positional[worker + 1], ',');
    for (size_t process = 0; process < paths.size(); ++process) {
      const std::string& path = paths[process];
      std::ifstream file(path);
      if (!file) {
        *err << "tamp summarize: cannot read " << path << "\n";
        return 1;
      }
      if (process > 0) builder.WorkerRestarted(worker);
      std::string line;
      while (std::getline(file, line)) {
        absl::StatusOr<events::WorkerEvent> event = ParseWorkerEvent(line);
        if (!event.ok()) continue;  // A log line.
        // Worker 0's file gives the accuracy and the loss: a misordered list must not.
        if (event->worker() != static_cast<uint32_t>(worker)) {
          *err << "tamp summarize: " << path << " holds worker " << event->worker()
               << "'s events but was given as worker " << worker
               << "'s (one file per worker, in rank order)\n";
          return kExitUsage;
        }
        if (process == 0 && !first_step[worker] && event->has_start_step()) {
          first_step[worker] = event->start_step();
        }
        builder.Add(worker, *event);
      }
    }
  }
  for (int worker = 0; worker < num_workers; ++worker) {
    if (builder.done(worker)) continue;
    *err << "tamp summarize: worker " << worker << " reported no DONE event in "
         << positional[worker + 1]
         << " (a process that did not finish, a file cut short, or a worker's files out of "
            "order: its first process's first, comma-separated)\n";
    // As `tamp run` does for a job that failed: what the workers reported, and why.
    if (!summary_json.empty() &&
        write_summary(builder.BuildEnded(config->name(), config->training().epochs(),
                                         wall_seconds, "failed",
                                         absl::StrCat("worker ", worker,
                                                      " reported no DONE event")))) {
      *err << "tamp summarize: summary of what ran: " << summary_json << "\n";
    }
    return 1;
  }
  // Every worker of one SYNC run ends at its last step (ASYNC / SSP workers may take
  // different numbers of steps), and every worker began where the run began (a restart file
  // given without its first process's file begins later).
  const bool sync = config->consistency().mode() == config::Consistency::SYNC;
  for (int worker = 1; worker < num_workers; ++worker) {
    const uint64_t end = builder.done_event(worker)->step();
    const uint64_t end_0 = builder.done_event(0)->step();
    if (sync && end != end_0) {
      *err << "tamp summarize: worker " << worker << "'s events end at step " << end
           << " but worker 0's at step " << end_0 << " (" << positional[worker + 1] << ", "
           << positional[1] << "): files of different runs?\n";
      return 1;
    }
    if (first_step[worker] && first_step[0] && *first_step[worker] != *first_step[0]) {
      *err << "tamp summarize: worker " << worker << "'s first file begins at step "
           << *first_step[worker] << " but worker 0's at step " << *first_step[0] << " ("
           << positional[worker + 1] << ", " << positional[1]
           << "): a restarted worker's files go in order, its first process's first, "
              "comma-separated; or files of different runs?\n";
      return 1;
    }
  }
  absl::StatusOr<events::RunSummary> summary =
      builder.Build(config->name(), config->training().epochs(), wall_seconds);
  if (!summary.ok()) {
    *err << "tamp summarize: " << summary.status().message() << "\n";
    return 1;
  }
  if (!write_summary(*summary)) return 1;
  *out << FormatSummaryLine(*summary) << "\n";
  return 0;
}

}  // namespace tamp::launcher
