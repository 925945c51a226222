#include "tools/tamp/job.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "job/job_layout.h"
#include "server/checkpoint.h"
#include "tools/tamp/files.h"
#include "tools/tamp/interrupt.h"
#include "tools/tamp/process_group.h"
#include "tools/tamp/progress.h"
#include "tools/tamp/summary.h"

namespace tamp::launcher {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kLogTailLines = 20;
// A server's first start: the system picks its port (a restart reuses it).
constexpr char kAnyPort[] = "--port=0";
// The launcher places its tamp_server and tamp_worker children itself: variables of an
// engine in its own environment (sbatch, a torchrun or Kubernetes pod) must not move them.
constexpr char kPlacedByFlags[] = "--placement=flags";

// "host:port", with IPv6 literals bracketed.
std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

std::string Seconds(absl::Duration d) { return absl::StrCat(absl::ToDoubleSeconds(d), " s"); }

// A TCP port on 127.0.0.1 that nothing listens on now (the system's pick of port 0), for
// the workers' torch.distributed rendezvous. Another process may take it before they do.
absl::StatusOr<int> UnusedLocalPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket() for a free port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool found =
      bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int error = errno;
  close(fd);
  if (!found) return absl::ErrnoToStatus(error, "binding 127.0.0.1:0 for a free port");
  return static_cast<int>(ntohs(address.sin_port));
}

class Job {
 public:
  Job(const config::RunConfig& config, const RunOptions& options, const Console& console)
      : config_(config),
        options_(options),
        console_(console),
        renderer_(
            ProgressOptions{config.name(), config.training().epochs(), console.ansi, console.width},
            console.out),
        summary_(std::max<int>(1, config.cluster().num_workers())) {}
  ~Job() {
    if (run_dir_lock_ >= 0) close(run_dir_lock_);
  }

  int Run();

 private:
  enum class Role { kServer, kWorker };
  struct ChildRole {
    Role role;
    int rank;
  };
  enum class Outcome { kOk, kFailed, kInterrupted };

  // Spawns `spec` (its argv, env, search_path) as one child and records its role; starts the
  // wall clock at the first spawn. Its log is <run_dir>/<role>-<rank><log_suffix>.log.
  absl::Status Start(Role role, int rank, ChildSpec spec, absl::string_view log_suffix = "");
  absl::Status StartServers();
  // Starts server child `child` again with its flags on its port (--restart_servers), or
  // returns false when no restart is left.
  bool RestartServer(int child, const ExitStatus& status);
  Outcome WaitForServers(std::vector<std::string>* addresses);
  absl::Status StartWorkers();
  // How worker `rank` is started: tamp_worker with flags, or the COMMAND with its placement
  // in the environment (TAMP_*, as job/placement.h reads it, and torchrun's RANK,
  // WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). `restart` > 0: the process
  // replaces a dead one and rejoins the run (tamp_worker --resume, TAMP_RESTART=<restart>).
  ChildSpec WorkerSpec(uint32_t rank, int restart) const;
  // Starts worker child `child`'s rank again (--restart_workers), or returns false when no
  // restart is left.
  bool RestartWorker(int child, const ExitStatus& status);
  Outcome WatchWorkers();
  // Worker `rank` reported its DONE at the run's last step: its results are in. (One that
  // fails before its DONE is restarted: the new process rejoins a finished run with its
  // final weights, and its script's post-training work, an evaluation, runs again.)
  bool FinishedTheRun(int rank) const {
    const std::optional<events::WorkerEvent>& done = summary_.done_event(rank);
    return done && done->total_steps() > 0 && done->step() >= done->total_steps();
  }
  // After every worker exited 0: kFailed, said, when their DONE events end at different steps
  // (one left its loop early while the others trained on).
  Outcome EndedTogether();

  // A worker's stdout line: an event, or output forwarded to the console.
  void HandleLine(int child, const std::string& line);
  // "shard 0: 4 chunks, 102 KiB (50.1%)" for each shard, if the config has a layout.
  void SayShardLoad();
  // Appends a worker's event line to its events file (opened at its first event).
  void KeepEvent(int child, const std::string& line);
  // Prints "tamp: <child name> <what>" and the tail of the child's log.
  void ReportChildFailure(int child, absl::string_view what);
  // Stops everything still running and returns the exit code for `outcome`; a job that did
  // not complete writes --summary_json with what the workers reported, and why it ended.
  int Finish(Outcome outcome);
  // Keeps the first reason the job failed, for its summary.
  void RecordFailure(absl::string_view reason) {
    if (failure_.empty()) failure_ = std::string(reason);
  }
  // RecordFailure(), and says it.
  void SayFailure(absl::string_view reason) {
    RecordFailure(reason);
    Say(reason);
  }
  // The worker children still running, and their names ("worker 0, worker 1").
  std::vector<int> RunningWorkers() const {
    std::vector<int> running;
    for (int child : workers_) {
      if (group_.running(child)) running.push_back(child);
    }
    return running;
  }
  std::string Names(const std::vector<int>& children) const {
    std::vector<std::string> names;
    for (int child : children) names.push_back(group_.name(child));
    return absl::StrJoin(names, ", ");
  }
  // Seconds since the first process started (0 before).
  double WallSeconds() const {
    return started_ ? std::chrono::duration<double>(Clock::now() - start_).count() : 0.0;
  }
  // Writes `summary` to --summary_json, if set; false, said, when it cannot.
  bool WriteSummary(const events::RunSummary& summary);
  // Shutdown() of the group, reporting children that had to be SIGKILLed and, if
  // `expect_clean`, those that did not exit 0 or by SIGTERM.
  void TearDown(absl::Duration grace, bool expect_clean);
  bool Interrupted() { return interrupts_->Consume() > 0; }
  void Say(absl::string_view message) { renderer_.PrintLine(absl::StrCat("tamp: ", message)); }

  const config::RunConfig& config_;
  const RunOptions& options_;
  const Console console_;
  std::string config_path_;  // Absolute, as passed to children.
  std::string run_dir_;
  int run_dir_lock_ = -1;  // LockRunDir()'s, held while the job runs.
  std::unique_ptr<InterruptWatcher> interrupts_;
  ProcessGroup group_;
  std::vector<ChildRole> roles_;  // By child index.
  std::vector<int> workers_;      // Child index by worker rank (the latest process).
  std::vector<std::vector<std::string>> server_argv_;  // By server rank.
  std::vector<int> server_ports_;                      // By server rank, once listening.
  int server_restarts_ = 0;                            // Done so far.
  std::vector<std::string> server_addresses_;          // host:port by shard.
  int worker_restarts_ = 0;                            // Done so far, all ranks.
  int rendezvous_port_ = 0;  // MASTER_PORT of a COMMAND's workers (torch.distributed).
  std::vector<int> restarts_by_worker_;                // By worker rank.
  ProgressRenderer renderer_;
  SummaryBuilder summary_;
  std::ofstream metrics_;  // --metrics_file, if set.
  // By child: its WorkerEvent lines, beside its log (worker-R.events, worker-R.restart-N.events),
  // for `tamp summarize` to read again.
  std::map<int, std::ofstream> event_files_;
  Clock::time_point start_;
  bool started_ = false;
  std::string failure_;  // RecordFailure()'s.
};

absl::Status Job::Start(Role role, int rank, ChildSpec spec, absl::string_view log_suffix) {
  const char* kind = role == Role::kServer ? "server" : "worker";
  spec.name = absl::StrCat(kind, " ", rank);
  spec.log_path = absl::StrCat(run_dir_, "/", kind, "-", rank, log_suffix, ".log");
  spec.capture_stdout = role == Role::kWorker;
  if (!started_) {
    start_ = Clock::now();
    started_ = true;
  }
  absl::StatusOr<int> child = group_.Spawn(spec);
  if (!child.ok()) return child.status();
  roles_.push_back({role, rank});
  if (role == Role::kWorker) workers_[rank] = *child;
  return absl::OkStatus();
}

absl::Status Job::StartServers() {
  for (uint32_t i = 0; i < config_.cluster().num_servers(); ++i) {
    const std::string port_file = absl::StrCat(run_dir_, "/server-", i, ".port");
    unlink(port_file.c_str());  // A reused run dir may hold a stale one.
    std::vector<std::string> argv = {
        options_.server_binary, absl::StrCat("--config=", config_path_),
        absl::StrCat("--rank=", i), absl::StrCat("--host=", config_.cluster().host()),
        kAnyPort, absl::StrCat("--port_file=", port_file), kPlacedByFlags};
    // Checkpoints go to the run directory unless the config names a place.
    if (config_.has_checkpoint() && config_.checkpoint().dir().empty()) {
      argv.push_back(absl::StrCat("--checkpoint_dir=", run_dir_, "/checkpoints"));
    }
    server_argv_.push_back(argv);
    ChildSpec spec;
    spec.argv = std::move(argv);
    absl::Status status = Start(Role::kServer, i, std::move(spec));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

Job::Outcome Job::WaitForServers(std::vector<std::string>* addresses) {
  const int num_servers = static_cast<int>(config_.cluster().num_servers());
  const Clock::time_point deadline =
      Clock::now() + absl::ToChronoNanoseconds(options_.server_start_timeout);
  std::vector<int> ports(num_servers, 0);
  while (true) {
    int ready = 0;
    for (int i = 0; i < num_servers; ++i) {
      if (ports[i] == 0) {
        absl::StatusOr<int> port = ReadPortFile(absl::StrCat(run_dir_, "/server-", i, ".port"));
        if (port.ok()) {
          ports[i] = *port;
        } else if (!absl::IsNotFound(port.status())) {
          // Servers are spawned first, so server i is child i.
          ReportChildFailure(i, absl::StrCat("wrote a bad port file: ", port.status().message()));
          return Outcome::kFailed;
        }
      }
      if (ports[i] != 0) ++ready;
    }
    if (ready == num_servers) break;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      const int late = static_cast<int>(std::find(ports.begin(), ports.end(), 0) - ports.begin());
      ReportChildFailure(late, absl::StrCat("did not start listening within ",
                                            Seconds(options_.server_start_timeout)));
      return Outcome::kFailed;
    }
    const absl::Duration left = absl::FromChrono(deadline - now);
    for (const ChildEvent& event :
         group_.Poll(std::min(left, absl::Milliseconds(50)), interrupts_->fd())) {
      if (event.type == ChildEvent::Type::kExited) {
        ReportChildFailure(event.child,
                           absl::StrCat("exited before listening (", event.status.ToString(), ")"));
        return Outcome::kFailed;
      }
    }
    if (Interrupted()) return Outcome::kInterrupted;
  }
  for (int i = 0; i < num_servers; ++i) {
    addresses->push_back(HostPort(config_.cluster().host(), ports[i]));
  }
  server_ports_ = ports;
  return Outcome::kOk;
}

absl::Status Job::StartWorkers() {
  const uint32_t num_workers = config_.cluster().num_workers();
  if (!options_.command.empty()) {
    absl::StatusOr<int> port = UnusedLocalPort();
    if (!port.ok()) return port.status();
    rendezvous_port_ = *port;
  }
  workers_.assign(num_workers, -1);
  restarts_by_worker_.assign(num_workers, 0);
  for (uint32_t j = 0; j < num_workers; ++j) {
    absl::Status status = Start(Role::kWorker, j, WorkerSpec(j, /*restart=*/0));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

ChildSpec Job::WorkerSpec(uint32_t rank, int restart) const {
  const std::string servers = absl::StrJoin(server_addresses_, ",");
  ChildSpec spec;
  if (options_.command.empty()) {
    spec.argv = {options_.worker_binary, absl::StrCat("--config=", config_path_),
                 absl::StrCat("--rank=", rank), absl::StrCat("--servers=", servers),
                 kPlacedByFlags};
    if (restart > 0) spec.argv.push_back("--resume");
    return spec;
  }
  spec.argv = options_.command;
  spec.search_path = true;
  const uint32_t num_workers = config_.cluster().num_workers();
  spec.env = {absl::StrCat("TAMP_CONFIG=", config_path_), absl::StrCat("TAMP_RANK=", rank),
              absl::StrCat("TAMP_NUM_WORKERS=", num_workers),
              absl::StrCat("TAMP_LOCAL_RANK=", rank),  // Every worker runs on this host.
              absl::StrCat("TAMP_SERVERS=", servers),
              // torchrun's, so that a script's torch.distributed.init_process_group() (env://,
              // e.g. for DDP and its comm hook) finds its group as under torchrun.
              absl::StrCat("RANK=", rank), absl::StrCat("WORLD_SIZE=", num_workers),
              absl::StrCat("LOCAL_RANK=", rank), absl::StrCat("LOCAL_WORLD_SIZE=", num_workers),
              "MASTER_ADDR=127.0.0.1", absl::StrCat("MASTER_PORT=", rendezvous_port_)};
  if (restart > 0) spec.env.push_back(absl::StrCat("TAMP_RESTART=", restart));
  return spec;
}

bool Job::RestartWorker(int child, const ExitStatus& status) {
  if (worker_restarts_ >= options_.restart_workers) return false;
  const int rank = roles_[child].rank;
  if (FinishedTheRun(rank)) {  // A new process would rejoin a run that is over for it.
    Say(absl::StrCat(group_.name(child), " is not restarted: it had reported its DONE at the "
                     "run's end before it failed"));
    return false;
  }
  ++worker_restarts_;
  const int restart = ++restarts_by_worker_[rank];
  Say(absl::StrCat(group_.name(child), " failed (", status.ToString(), "); restarting it (restart ",
                   worker_restarts_, " of ", options_.restart_workers,
                   "), it rejoins the run at the other workers' step"));
  summary_.WorkerRestarted(rank);
  const absl::Status started = Start(Role::kWorker, rank, WorkerSpec(rank, restart),
                                     absl::StrCat(".restart-", restart));
  if (!started.ok()) {
    Say(absl::StrCat("cannot restart ", group_.name(child), ": ", started.message()));
    return false;
  }
  return true;
}

Job::Outcome Job::WatchWorkers() {
  auto workers_running = [this] {
    return std::any_of(workers_.begin(), workers_.end(),
                       [this](int child) { return group_.running(child); });
  };
  std::optional<absl::Time> first_finished;  // When a worker first exited 0.
  std::string first_finished_note;  // What that worker's exit means for the others.
  std::string first_finished_note_short;  // "worker 0 finished the run", for the failure.
  absl::Duration next_notice = options_.straggler_notice;
  while (workers_running()) {
    const absl::Duration finish_timeout = options_.finish_timeout;
    if (first_finished && finish_timeout > absl::ZeroDuration() &&
        absl::Now() - *first_finished >= finish_timeout) {
      const std::vector<int> running = RunningWorkers();
      std::vector<std::string> last_steps;  // What each reported last: a dropped one's gap.
      for (int child : running) {
        last_steps.push_back(absl::StrCat(group_.name(child), " last reported step ",
                                          summary_.last_step(roles_[child].rank)));
      }
      renderer_.Finish();
      SayFailure(absl::StrCat(Names(running), running.size() == 1 ? " was" : " were",
                              " still running ", absl::FormatDuration(finish_timeout), " after ",
                              first_finished_note_short, " (--finish_timeout; ",
                              absl::StrJoin(last_steps, ", "), ")"));
      return Outcome::kFailed;
    }
    if (first_finished && absl::Now() - *first_finished >= next_notice) {
      const std::vector<int> running = RunningWorkers();
      Say(absl::StrCat(Names(running), running.size() == 1 ? " is" : " are",
                       " still running ", absl::FormatDuration(next_notice), " after ",
                       first_finished_note, ": Ctrl-C stops the job",
                       finish_timeout > absl::ZeroDuration()
                           ? absl::StrCat(", as --finish_timeout will at ",
                                          absl::FormatDuration(finish_timeout))
                           : " (--finish_timeout bounds this wait)"));
      next_notice *= 5;
    }
    for (const ChildEvent& event : group_.Poll(absl::Seconds(1), interrupts_->fd())) {
      if (event.type == ChildEvent::Type::kLine) {
        HandleLine(event.child, event.line);
        continue;
      }
      const ChildRole& role = roles_[event.child];
      if (role.role == Role::kServer) {
        if (RestartServer(event.child, event.status)) continue;
        ReportChildFailure(event.child, absl::StrCat("exited while workers were running (",
                                                     event.status.ToString(), ")"));
        return Outcome::kFailed;
      }
      if (!event.status.success()) {
        if (RestartWorker(event.child, event.status)) continue;
        ReportChildFailure(
            event.child,
            absl::StrCat("failed (", event.status.ToString(), ")",
                         FinishedTheRun(role.rank)
                             ? " after it reported its DONE at the run's end: its training "
                               "had completed"
                             : ""));
        return Outcome::kFailed;
      }
      // tamp_worker always ends with DONE; a COMMAND need not report anything.
      if (options_.command.empty() && !summary_.done(role.rank)) {
        ReportChildFailure(event.child, "exited (exit status 0) without reporting DONE");
        return Outcome::kFailed;
      }
      // Before the run's end: the script cut the run (every worker does, and the job ends
      // there), or left its loop early while the others train on (EndedTogether() fails the
      // job then). Said now, as the others may wait on it for a while.
      const std::optional<events::WorkerEvent>& done = summary_.done_event(role.rank);
      const bool left_early = done && done->step() < done->total_steps();
      if (left_early) {
        Say(absl::StrCat(group_.name(event.child), " exited (exit status 0) after step ",
                         done->step(), " of the run's ", done->total_steps(),
                         "; the others wait for it at their next barrier "
                         "(consistency.worker_timeout_ms) unless they end there too"));
      }
      if (!first_finished) {
        first_finished = absl::Now();
        const std::string& name = group_.name(event.child);
        first_finished_note_short =
            left_early ? absl::StrCat(name, " left the run after step ", done->step())
            : done     ? absl::StrCat(name, " finished the run")
                       : absl::StrCat(name, " exited (exit status 0)");
        first_finished_note = absl::StrCat(
            first_finished_note_short,
            left_early ? absl::StrCat(" of ", done->total_steps(),
                                      "; they wait for it at their barriers until "
                                      "consistency.worker_timeout_ms drops it, and the job then "
                                      "fails unless they end at that step too")
            : done     ? "; one the servers dropped (a SYNC barrier's "
                         "consistency.worker_timeout_ms) and that hangs cannot rejoin a finished "
                         "run"
                       : " without reporting its last step; if it left the run early, the "
                         "others wait for it at their barriers until "
                         "consistency.worker_timeout_ms drops it");
      }
    }
    if (Interrupted()) return Outcome::kInterrupted;
  }
  return EndedTogether();
}

Job::Outcome Job::EndedTogether() {
  std::set<uint64_t> last_steps;
  std::vector<std::string> ends;
  for (int child : workers_) {
    const std::optional<events::WorkerEvent>& done = summary_.done_event(roles_[child].rank);
    if (!done || done->total_steps() == 0) continue;  // Reported no run length.
    last_steps.insert(done->step());
    ends.push_back(absl::StrCat(group_.name(child), " after step ", done->step()));
  }
  if (last_steps.size() <= 1) return Outcome::kOk;
  renderer_.Finish();
  const std::string reason =
      absl::StrCat("the workers ended at different steps (", absl::StrJoin(ends, ", "), ")");
  RecordFailure(reason);
  Say(absl::StrCat(reason,
                   ": one left its training loop early, and the others trained on without it "
                   "(every worker trains to the run's end, the client's total_steps, or the "
                   "script cuts every worker alike)"));
  return Outcome::kFailed;
}

bool Job::RestartServer(int child, const ExitStatus& status) {
  if (server_restarts_ >= options_.restart_servers) return false;
  const int rank = roles_[child].rank;
  // Without its checkpoint the new process starts at step 0 and refuses the workers' next
  // pushes ("chunk 0 is at step 0, push was for step 374"): say why instead.
  const std::string checkpoint = CheckpointPath(
      config_.checkpoint().dir().empty() ? absl::StrCat(run_dir_, "/checkpoints")
                                         : config_.checkpoint().dir(),
      rank);
  if (std::error_code error; !std::filesystem::exists(checkpoint, error)) {
    Say(absl::StrCat(group_.name(child), " is not restarted: it has no checkpoint to resume "
                     "from (", checkpoint, ": none written yet, or every write failed; see its "
                     "log)"));
    return false;
  }
  ++server_restarts_;
  summary_.ServerRestarted();
  std::vector<std::string> argv = server_argv_[rank];
  // Same port: the workers know the server by its address.
  std::replace(argv.begin(), argv.end(), std::string(kAnyPort),
               absl::StrCat("--port=", server_ports_[rank]));
  Say(absl::StrCat(group_.name(child), " exited while workers were running (", status.ToString(),
                   "); restarting it on port ", server_ports_[rank], " (restart ",
                   server_restarts_, " of ", options_.restart_servers,
                   "), it resumes from its checkpoint"));
  ChildSpec spec;
  spec.argv = std::move(argv);
  const absl::Status started =
      Start(Role::kServer, rank, std::move(spec), absl::StrCat(".restart-", server_restarts_));
  if (!started.ok()) {
    Say(absl::StrCat("cannot restart ", group_.name(child), ": ", started.message()));
    return false;
  }
  return true;
}

void Job::HandleLine(int child, const std::string& line) {
  const ChildRole& role = roles_[child];
  if (role.role == Role::kWorker) {
    absl::StatusOr<events::WorkerEvent> event = ParseWorkerEvent(line);
    if (event.ok()) {
      KeepEvent(child, line);
      if (metrics_.is_open() && event->kind() == events::WorkerEvent::STEP) {
        metrics_ << StepMetricsJson(role.rank, *event) << "\n" << std::flush;
      }
      if (metrics_.is_open() && event->kind() == events::WorkerEvent::EVAL) {
        metrics_ << EvalMetricsJson(role.rank, *event) << "\n" << std::flush;
      }
      const MissedSteps missed = summary_.Add(role.rank, *event);
      if (missed.count > 0 && missed.first > 0) {
        Say(absl::StrCat(group_.name(child), " rejoined the run at step ",
                         missed.first + missed.count, " after its restart: it took no part in ",
                         missed.count == 1
                             ? absl::StrCat("step ", missed.first)
                             : absl::StrCat("steps ", missed.first, "-",
                                            missed.first + missed.count - 1),
                         " (the others trained ", missed.count == 1 ? "it" : "them",
                         " without it)"));
      } else if (missed.count > 0) {
        Say(absl::StrCat(group_.name(child), " took no part in ", missed.count,
                         missed.count == 1 ? " step" : " steps", " before step ", event->step(),
                         ": its step failed and it rejoined at the others' step (the others "
                         "trained ", missed.count == 1 ? "it" : "them", " without it; its log "
                         "says why: a push the servers refused, or a barrier that dropped it "
                         "after consistency.worker_timeout_ms)"));
      }
      renderer_.OnEvent(role.rank, *event, absl::Now());
      return;
    }
    // Anything else a worker prints (a COMMAND's print()) is kept in its log, too.
    group_.AppendToLog(child, line);
  }
  renderer_.PrintLine(absl::StrCat("[", group_.name(child), "] ", line));
}

void Job::KeepEvent(int child, const std::string& line) {
  auto [kept, first] = event_files_.try_emplace(child);
  if (first) {  // A file that cannot be opened loses only this copy: the summary has them.
    std::string path = group_.log_path(child);
    if (absl::EndsWith(path, ".log")) path.resize(path.size() - 4);
    kept->second.open(path + ".events", std::ios::out | std::ios::trunc);
  }
  if (kept->second.is_open()) kept->second << line << "\n" << std::flush;
}

void Job::SayShardLoad() {
  // Configs without a model (tests' stand-ins) have no layout: nothing to say.
  absl::StatusOr<JobLayout> layout = BuildJobLayout(config_);
  if (!layout.ok()) return;
  for (const std::string& note : LayoutNotes(config_, *layout)) {
    Say(absl::StrCat("warning: ", note));
  }
  uint64_t total = 0;
  for (uint64_t bytes : layout->shard_bytes) total += bytes;
  for (size_t shard = 0; shard < layout->shard_bytes.size(); ++shard) {
    const uint64_t bytes = layout->shard_bytes[shard];
    const size_t chunks = layout->ChunksOfShard(static_cast<uint32_t>(shard)).size();
    Say(absl::StrCat("shard ", shard, ": ", chunks, chunks == 1 ? " chunk, " : " chunks, ",
                     FormatBytes(bytes), " (",
                     FormatPercent(total == 0 ? 0.0 : static_cast<double>(bytes) / total), ")"));
  }
}

void Job::ReportChildFailure(int child, absl::string_view what) {
  renderer_.Finish();
  SayFailure(absl::StrCat(group_.name(child), " ", what));
  const std::string& log = group_.log_path(child);
  absl::StatusOr<std::vector<std::string>> lines =
      ReadLastLines(log, std::numeric_limits<int>::max());
  if (!lines.ok()) {
    Say(lines.status().message());
    return;
  }
  if (lines->empty()) {
    Say(absl::StrCat(log, " is empty"));
    return;
  }
  const size_t tail = std::min<size_t>(lines->size(), kLogTailLines);
  const std::optional<size_t> exception = LastPythonException(*lines);
  if (exception && *exception < lines->size() - tail) {  // A message longer than the tail.
    Say(absl::StrCat("its Python exception: ", (*lines)[*exception]));
  }
  Say(tail == 1 ? absl::StrCat("last line of ", log, ":")
                : absl::StrCat("last ", tail, " lines of ", log, ":"));
  for (size_t i = lines->size() - tail; i < lines->size(); ++i) {
    renderer_.PrintLine(absl::StrCat("    ", (*lines)[i]));
  }
}

void Job::TearDown(absl::Duration grace, bool expect_clean) {
  renderer_.Finish();
  const int running = group_.num_running();
  if (running == 0) return;
  interrupts_->Consume();  // From here on, a new signal means "hurry": SIGKILL at once.
  const std::vector<ChildEvent> events = group_.Shutdown(grace, interrupts_->fd());
  const bool hurried = interrupts_->Consume() > 0;
  for (const ChildEvent& event : events) {
    if (event.type == ChildEvent::Type::kLine) {
      HandleLine(event.child, event.line);
    } else if (event.status.signaled() && event.status.signal() == SIGKILL) {
      Say(hurried ? absl::StrCat(group_.name(event.child), " killed (interrupted again)")
          : grace == absl::ZeroDuration()
              ? absl::StrCat(group_.name(event.child), " killed at once (--kill_grace=0)")
              : absl::StrCat(group_.name(event.child), " did not stop within ", Seconds(grace),
                             " of SIGTERM; killed", expect_clean ? "" : " (--kill_grace)"));
    } else if (expect_clean && !event.status.success() &&
               !(event.status.signaled() && event.status.signal() == SIGTERM)) {
      const bool checkpoint_lost = roles_[event.child].role == Role::kServer &&
                                   !event.status.signaled() &&
                                   event.status.code() == kServerExitCheckpointLost;
      Say(absl::StrCat("warning: ", group_.name(event.child), " stopped with ",
                       event.status.ToString(),
                       checkpoint_lost ? " (its final checkpoint was not written)" : "", "; see ",
                       group_.log_path(event.child)));
    }
  }
}

int Job::Finish(Outcome outcome) {
  if (outcome == Outcome::kOk) {
    TearDown(options_.stop_grace, /*expect_clean=*/true);
    return kExitOk;
  }
  const double wall_seconds = WallSeconds();
  if (outcome == Outcome::kFailed) {
    TearDown(options_.failure_grace, /*expect_clean=*/false);
    Say(absl::StrCat("failed; logs are in ", run_dir_));
  } else {
    renderer_.Finish();
    const char* name = sigabbrev_np(interrupts_->last_signal());
    const int running = group_.num_running();
    const std::string interrupted = absl::StrCat("interrupted (SIG", name ? name : "?", ")");
    failure_ = interrupted;  // What ended the job, whatever failed as it stopped.
    Say(absl::StrCat(interrupted, "; stopping ", running,
                     running == 1 ? " process" : " processes",
                     " (interrupt again to kill at once)"));
    TearDown(options_.failure_grace, /*expect_clean=*/false);
    Say(absl::StrCat("logs are in ", run_dir_));
  }
  if (!options_.summary_json.empty() &&
      WriteSummary(summary_.BuildEnded(
          config_.name(), config_.training().epochs(), wall_seconds,
          outcome == Outcome::kFailed ? "failed" : "interrupted", failure_))) {
    Say(absl::StrCat("summary of what ran: ", options_.summary_json));
  }
  return outcome == Outcome::kFailed ? kExitFailed : kExitInterrupted;
}

bool Job::WriteSummary(const events::RunSummary& summary) {
  if (options_.summary_json.empty()) return true;
  absl::Status written = WriteFileAtomically(options_.summary_json, SummaryToJson(summary) + "\n");
  if (!written.ok()) Say(absl::StrCat("cannot write the summary: ", written.message()));
  return written.ok();
}

int Job::Run() {
  absl::StatusOr<std::string> run_dir = MakeRunDir(options_.run_dir);
  if (!run_dir.ok()) {
    Say(run_dir.status().message());
    return kExitUsage;
  }
  run_dir_ = *run_dir;
  absl::StatusOr<int> lock = LockRunDir(run_dir_);
  if (!lock.ok()) {
    Say(lock.status().message());
    return kExitUsage;
  }
  run_dir_lock_ = *lock;
  // A run resumed on the same directory keeps the interrupted one's logs and events.
  absl::StatusOr<std::string> aside = SetAsideEarlierLogs(run_dir_);
  if (!aside.ok()) {
    Say(aside.status().message());
    return kExitFailed;
  }
  config_path_ = MakeAbsolute(options_.config_path);
  absl::StatusOr<std::unique_ptr<InterruptWatcher>> interrupts = InterruptWatcher::Install();
  if (!interrupts.ok()) {
    Say(interrupts.status().message());
    return kExitFailed;
  }
  interrupts_ = std::move(*interrupts);
  // The summary is written at the end: a path it cannot take is refused before the run.
  if (!options_.summary_json.empty()) {
    if (absl::Status ready = PrepareOutputFile(options_.summary_json); !ready.ok()) {
      Say(absl::StrCat("--summary_json: ", ready.message()));
      return kExitUsage;
    }
  }
  // A COMMAND that cannot start is a usage error, said before any server starts.
  if (!options_.command.empty()) {
    if (absl::Status executable = CheckExecutable(options_.command[0]); !executable.ok()) {
      Say(executable.message());
      return kExitUsage;
    }
  }
  // A run again on the same run_dir (a resume) rewrites the metrics file: the earlier run's
  // lines go beside its logs first.
  std::string metrics_kept;  // Said after the run's first line.
  if (!options_.metrics_file.empty() && !aside->empty()) {
    absl::StatusOr<std::string> kept = CopyAside(options_.metrics_file, *aside);
    if (!kept.ok()) {
      Say(absl::StrCat("cannot keep the earlier run's metrics: ", kept.status().message()));
      return kExitFailed;
    }
    metrics_kept = *std::move(kept);
  }
  if (!options_.metrics_file.empty()) {
    metrics_.open(options_.metrics_file, std::ios::out | std::ios::trunc);
    if (!metrics_.is_open()) {
      Say(absl::StrCat("cannot write the metrics file ", options_.metrics_file, ": ",
                       strerror(errno)));
      return kExitUsage;
    }
  }

  const auto& cluster = config_.cluster();
  std::vector<std::string> addresses(cluster.server_addresses().begin(),
                                     cluster.server_addresses().end());
  const bool own_servers = addresses.empty();
  Say(absl::StrCat(
      "run \"", config_.name(),
      "\": ",
      own_servers ? absl::StrCat(cluster.num_servers(),
                                 cluster.num_servers() == 1 ? " server, " : " servers, ")
                  : "",
      cluster.num_workers(), cluster.num_workers() == 1 ? " worker" : " workers",
      options_.command.empty() ? "" : absl::StrCat(" (", absl::StrJoin(options_.command, " "), ")"),
      "; logs in ", run_dir_));
  if (!aside->empty()) Say(absl::StrCat("an earlier run's logs and events moved to ", *aside));
  if (!metrics_kept.empty()) Say(absl::StrCat("the earlier run's metrics copied to ", metrics_kept));
  SayShardLoad();
  if (own_servers) {
    if (absl::Status status = StartServers(); !status.ok()) {
      SayFailure(status.message());
      return Finish(Outcome::kFailed);
    }
    if (Outcome outcome = WaitForServers(&addresses); outcome != Outcome::kOk) {
      return Finish(outcome);
    }
    Say(absl::StrCat("servers listening on ", absl::StrJoin(addresses, ", ")));
  } else {
    Say(absl::StrCat("using servers ", absl::StrJoin(addresses, ", ")));
  }
  server_addresses_ = addresses;
  if (absl::Status status = StartWorkers(); !status.ok()) {
    SayFailure(status.message());
    return Finish(Outcome::kFailed);
  }
  if (Outcome outcome = WatchWorkers(); outcome != Outcome::kOk) return Finish(outcome);
  const double wall_seconds = WallSeconds();
  renderer_.Finish();

  absl::StatusOr<events::RunSummary> summary =
      summary_.Build(config_.name(), config_.training().epochs(), wall_seconds);
  const bool wall_time_only = !summary.ok() && !options_.command.empty();
  if (wall_time_only) {  // A COMMAND that did not report DONE: summarize what is known.
    Say(absl::StrCat(summary.status().message(), "; the summary holds the wall time only"));
    summary = events::RunSummary();
    summary->set_name(config_.name());
    summary->set_wall_time_only(true);
    summary->set_wall_seconds(wall_seconds);
    summary->set_server_restarts(server_restarts_);
    summary->set_worker_restarts(worker_restarts_);
    summary->set_outcome("completed");
  }
  if (!summary.ok()) {  // Unreachable: WatchWorkers checked every tamp_worker's DONE.
    SayFailure(summary.status().message());
    return Finish(Outcome::kFailed);
  }
  const int code = Finish(Outcome::kOk);
  if (!WriteSummary(*summary)) return kExitFailed;
  Say(wall_time_only ? absl::StrFormat("done in %.1f s", wall_seconds)
                     : FormatSummaryLine(*summary));
  if (!options_.summary_json.empty()) Say(absl::StrCat("summary: ", options_.summary_json));
  return code;
}

}  // namespace

int RunJob(const config::RunConfig& config, const RunOptions& options, const Console& console) {
  Job job(config, options, console);
  return job.Run();
}

}  // namespace tamp::launcher
