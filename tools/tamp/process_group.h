// ProcessGroup: the child processes of the launcher — spawn, watch, signal, reap, tear down.
//
// Every child
//   - is fork+exec'ed with prctl(PR_SET_PDEATHSIG, SIGKILL), so it dies with the launcher
//     even when the launcher is SIGKILLed;
//   - leads its own process group (so a Ctrl-C on the terminal reaches only the launcher,
//     which then tears down in order, and signals reach any grandchildren too);
//   - gets /dev/null as stdin, its stderr in a log file, and its stdout either on a pipe
//     that Poll() splits into lines (ChildSpec::capture_stdout) or in the log file;
//   - inherits the launcher's environment, with ChildSpec::env set over it.
//
// Nothing outlives the group: Shutdown() sends SIGTERM, waits a grace period, SIGKILLs
// what is left and reaps everything; the destructor SIGKILLs and reaps whatever is still
// running. No zombie is left behind in any path.
//
// Thread safety: not thread-safe; use from one thread (PR_SET_PDEATHSIG fires when the
// *thread* that forked exits, so that thread should live as long as the children).
//
// Example:
//   ProcessGroup group;
//   TAMP_ASSIGN_OR_RETURN(int w, group.Spawn({"worker 0", {"/bin/worker", "--rank=0"},
//                                             "/tmp/run/worker-0.log", true}));
//   while (group.running(w)) {
//     for (const ChildEvent& e : group.Poll(absl::Milliseconds(100))) { ... }
//   }
//   group.Shutdown(absl::Seconds(10));
#ifndef TAMP_TOOLS_TAMP_PROCESS_GROUP_H_
#define TAMP_TOOLS_TAMP_PROCESS_GROUP_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tamp::launcher {

// ExitStatus
//
// How a child ended, decoded from a waitpid() status.
class ExitStatus {
 public:
  ExitStatus() = default;
  static ExitStatus FromWaitStatus(int wait_status);
  static ExitStatus Exited(int code);
  static ExitStatus Signaled(int signal);

  // True for exit status 0.
  bool success() const { return !signaled_ && code_ == 0; }
  bool signaled() const { return signaled_; }
  // Exit code; 0 when signaled().
  int code() const { return code_; }
  // Terminating signal; 0 unless signaled().
  int signal() const { return signal_; }

  // "exit status 3", "killed by SIGSEGV" ("killed by signal 70" if it has no name).
  std::string ToString() const;

 private:
  bool signaled_ = false;
  int code_ = 0;
  int signal_ = 0;
};

// ChildSpec
//
// What to start. argv[0] is the path that is executed; with `search_path`, a name without
// '/' is looked up in the launcher's PATH first, as a shell does.
struct ChildSpec {
  // Human name used in messages, e.g. "worker 1".
  std::string name;
  std::vector<std::string> argv;
  bool search_path = false;
  // "NAME=VALUE" each: set in the child's environment, replacing an inherited NAME.
  std::vector<std::string> env;
  // File (created or truncated) that receives the child's stderr, and its stdout unless
  // captured. Empty: inherit the launcher's.
  std::string log_path;
  // Put stdout on a pipe read by Poll()/Shutdown() as ChildEvent::kLine events.
  bool capture_stdout = false;
};

// ChildEvent
//
// Something that happened to a child. For one child, every kLine event comes before its
// kExited event (the pipe is drained when the child is reaped).
struct ChildEvent {
  enum class Type { kLine, kExited };
  Type type = Type::kLine;
  // Index returned by Spawn().
  int child = -1;
  // kLine: one line of stdout without its '\n'. A last line without '\n' is reported at EOF.
  std::string line;
  // kExited: how it ended.
  ExitStatus status;
};

// CheckExecutable()
//
// Whether `program` (a ChildSpec's argv[0], with search_path) can be started: found in PATH
// when it names no directory, else an executable regular file. NOT_FOUND or
// PERMISSION_DENIED: "cannot execute train.py: Permission denied". What Spawn() would
// refuse, asked before anything starts.
absl::Status CheckExecutable(const std::string& program);

class ProcessGroup {
 public:
  ProcessGroup() = default;
  // SIGKILLs and reaps every child still running.
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // ProcessGroup::Spawn()
  //
  // Starts a child and returns its index (0, 1, ... in spawn order). Fails, with nothing
  // left running, when the log file cannot be opened or argv[0] cannot be executed
  // (NOT_FOUND, PERMISSION_DENIED, ...).
  absl::StatusOr<int> Spawn(const ChildSpec& spec);

  // ProcessGroup::Poll()
  //
  // Reads available stdout, reaps children that have exited and returns what happened.
  // Blocks up to `timeout` while nothing has happened; returns early, possibly with no
  // events, when `wake_fd` (if >= 0; it is not read) becomes readable or a signal arrives.
  std::vector<ChildEvent> Poll(absl::Duration timeout, int wake_fd = -1);

  // ProcessGroup::Shutdown()
  //
  // Sends SIGTERM to every running child (to its process group), waits up to `grace` for
  // them to exit, SIGKILLs the rest and reaps them all. If `wake_fd` becomes readable
  // during the grace period (a second Ctrl-C), it SIGKILLs at once. Returns the events of
  // the teardown (remaining output lines and every exit). Blocks; returns with nothing
  // running.
  std::vector<ChildEvent> Shutdown(absl::Duration grace, int wake_fd = -1);

  // ProcessGroup::Signal()
  //
  // Sends `sig` to the process group of `child` if it is still running.
  void Signal(int child, int sig);

  // ProcessGroup::AppendToLog()
  //
  // Appends `line` and '\n' to the log of `child` (running or not), e.g. a captured stdout
  // line that the caller keeps for the record. It writes through the child's own open log,
  // so whole lines interleave with the child's and none overwrites another. No-op for a
  // child without a log.
  void AppendToLog(int child, absl::string_view line);

  int size() const { return static_cast<int>(children_.size()); }
  const std::string& name(int child) const { return children_.at(child).name; }
  const std::string& log_path(int child) const { return children_.at(child).log_path; }
  pid_t pid(int child) const { return children_.at(child).pid; }
  // True until the child has been reaped (its kExited event returned).
  bool running(int child) const { return children_.at(child).running; }
  // Valid once !running(child).
  const ExitStatus& exit_status(int child) const { return children_.at(child).status; }
  int num_running() const;

 private:
  struct Child {
    std::string name;
    std::string log_path;
    pid_t pid = -1;
    int stdout_fd = -1;   // Non-blocking read end; -1 when not captured or at EOF.
    int log_fd = -1;      // The child's log as it writes it (AppendToLog()); or -1.
    std::string partial;  // Bytes after the last '\n'.
    bool running = true;
    ExitStatus status;
  };

  // Reads what is available on child's pipe into lines; closes it at EOF.
  void ReadOutput(int index, std::vector<ChildEvent>* events);
  enum class Wake { kActivityOrTimeout, kWakeFd, kInterrupted };
  // Waits (at most one tick) for output on a pipe, for `wake_fd`, or for a signal.
  Wake WaitForActivity(absl::Duration timeout, int wake_fd);
  // Reaps exited children (non-blocking), draining their pipes first.
  void ReapExited(std::vector<ChildEvent>* events);
  void Reaped(int index, int wait_status, std::vector<ChildEvent>* events);

  std::vector<Child> children_;
};

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_PROCESS_GROUP_H_
