#include "tools/tamp/process_group.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"

namespace tamp::launcher {
namespace {

// Children without a stdout pipe are only noticed by waitpid(WNOHANG), so waits are cut
// into ticks of this length. 20 wake-ups a second cost nothing next to a training job.
constexpr absl::Duration kTick = absl::Milliseconds(50);

// A line longer than this is reported in pieces rather than buffered without bound.
constexpr size_t kMaxLineBytes = 1 << 20;

// At most this much is read from one pipe per call, so one chatty child cannot starve the
// others.
constexpr size_t kMaxReadPerCall = 1 << 20;

using Clock = std::chrono::steady_clock;

Clock::time_point Deadline(absl::Duration d) { return Clock::now() + absl::ToChronoNanoseconds(d); }

absl::Duration Remaining(Clock::time_point deadline) {
  return std::max(absl::ZeroDuration(), absl::FromChrono(deadline - Clock::now()));
}

absl::Status ErrnoStatus(int err, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOEXEC:
    case EISDIR:
    case E2BIG:
      return absl::InvalidArgumentError(message);
    case ENOMEM:
    case EAGAIN:
    case EMFILE:
    case ENFILE:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

void CloseFd(int* fd) {
  if (*fd >= 0) {
    close(*fd);
    *fd = -1;
  }
}

// `name` looked up in PATH as execvp() does (an empty entry is the current directory).
std::optional<std::string> FindInPath(const std::string& name) {
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = dir.empty() ? name : absl::StrCat(dir, "/", name);
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

}  // namespace

absl::Status CheckExecutable(const std::string& program) {
  if (program.find('/') == std::string::npos) {
    if (FindInPath(program).has_value()) return absl::OkStatus();
    return absl::NotFoundError(absl::StrCat("cannot execute ", program, ": not found in PATH"));
  }
  struct stat st;
  if (stat(program.c_str(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot execute ", program));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot execute ", program, ": not a regular file"));
  }
  if (access(program.c_str(), X_OK) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot execute ", program));
  }
  // A script's interpreter (its #! line) must be executable too: exec fails on it with ENOENT.
  std::ifstream file(program);
  std::string first_line;
  if (std::getline(file, first_line) && absl::StartsWith(first_line, "#!")) {
    const std::vector<std::string> words =
        absl::StrSplit(first_line.substr(2), absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (!words.empty() && access(words[0].c_str(), X_OK) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot execute ", program, ": its interpreter ",
                                             words[0], " (its #! line)"));
    }
  }
  return absl::OkStatus();
}

namespace {

// The environment of a child: the launcher's with `overrides` ("NAME=VALUE") set over it.
// The pointers stay valid while `overrides` and the launcher's environment do.
std::vector<char*> ChildEnvironment(const std::vector<std::string>& overrides) {
  auto name_of = [](absl::string_view var) { return var.substr(0, var.find('=')); };
  std::vector<char*> env;
  for (char** var = environ; *var != nullptr; ++var) {
    const absl::string_view name = name_of(*var);
    if (std::none_of(overrides.begin(), overrides.end(),
                     [&](const std::string& o) { return name_of(o) == name; })) {
      env.push_back(*var);
    }
  }
  for (const std::string& var : overrides) {
    CHECK_NE(var.find('='), std::string::npos) << "ChildSpec.env entry without '=': " << var;
    env.push_back(const_cast<char*>(var.c_str()));
  }
  env.push_back(nullptr);
  return env;
}

// Sends `sig` to the process group led by `pid`, or to `pid` alone if the group is gone
// (the child may not have called setpgid yet).
void SignalTree(pid_t pid, int sig) {
  if (kill(-pid, sig) != 0) kill(pid, sig);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// ExitStatus

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  if (WIFSIGNALED(wait_status)) return Signaled(WTERMSIG(wait_status));
  if (WIFEXITED(wait_status)) return Exited(WEXITSTATUS(wait_status));
  LOG(FATAL) << "not a termination status: " << wait_status;
}

ExitStatus ExitStatus::Exited(int code) {
  ExitStatus s;
  s.code_ = code;
  return s;
}

ExitStatus ExitStatus::Signaled(int signal) {
  ExitStatus s;
  s.signaled_ = true;
  s.signal_ = signal;
  return s;
}

std::string ExitStatus::ToString() const {
  if (!signaled_) return absl::StrCat("exit status ", code_);
  const char* abbrev = sigabbrev_np(signal_);
  if (abbrev == nullptr) return absl::StrCat("killed by signal ", signal_);
  return absl::StrCat("killed by SIG", abbrev);
}

// ---------------------------------------------------------------------------------------
// ProcessGroup

ProcessGroup::~ProcessGroup() {
  for (Child& child : children_) {
    if (child.running) SignalTree(child.pid, SIGKILL);
  }
  for (Child& child : children_) {
    if (child.running) {
      int status;
      while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
      }
      child.running = false;
    }
    CloseFd(&child.stdout_fd);
    CloseFd(&child.log_fd);
  }
}

absl::StatusOr<int> ProcessGroup::Spawn(const ChildSpec& spec) {
  CHECK(!spec.argv.empty()) << "ChildSpec.argv is empty for " << spec.name;
  std::string program = spec.argv[0];
  if (spec.search_path && program.find('/') == std::string::npos) {
    std::optional<std::string> found = FindInPath(program);
    if (!found.has_value()) {
      return absl::NotFoundError(
          absl::StrCat("cannot execute ", program, " (", spec.name, "): not found in PATH"));
    }
    program = *std::move(found);
  }
  // With SIGCHLD ignored (it can be inherited so), the kernel reaps children itself and
  // exit statuses are lost.
  struct sigaction chld;
  if (sigaction(SIGCHLD, nullptr, &chld) == 0 && chld.sa_handler == SIG_IGN) {
    signal(SIGCHLD, SIG_DFL);
  }

  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed.
  int log_fd = -1;
  if (!spec.log_path.empty()) {
    log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", spec.log_path));
  }
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    int err = errno;
    CloseFd(&log_fd);
    return ErrnoStatus(err, "cannot open /dev/null");
  }
  int out_pipe[2] = {-1, -1};
  int exec_pipe[2] = {-1, -1};  // Reports exec's errno; closed by a successful exec.
  if ((spec.capture_stdout && pipe2(out_pipe, O_CLOEXEC) != 0) ||
      pipe2(exec_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    for (int* fd : {&log_fd, &null_fd, &out_pipe[0], &out_pipe[1]}) CloseFd(fd);
    return ErrnoStatus(err, "pipe2");
  }
  std::vector<char*> argv;
  argv.reserve(spec.argv.size() + 1);
  for (const std::string& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> env = ChildEnvironment(spec.env);
  const int stdout_target = spec.capture_stdout ? out_pipe[1] : log_fd;
  const int stderr_target = log_fd;
  const pid_t parent = getpid();

  // Block signals across fork so that no launcher handler runs in the child before its
  // dispositions are reset.
  sigset_t all, saved;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = fork();
  if (pid == 0) {
    // Child.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // The launcher died before prctl took effect.
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) {
      struct sigaction old;
      if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_DFL &&
          !(old.sa_handler == SIG_IGN && sig != SIGPIPE)) {
        sigaction(sig, &dfl, nullptr);
      }
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(null_fd, STDIN_FILENO);
    if (stdout_target >= 0) dup2(stdout_target, STDOUT_FILENO);
    if (stderr_target >= 0) dup2(stderr_target, STDERR_FILENO);
    execve(program.c_str(), argv.data(), env.data());
    int err = errno;
    ssize_t ignored = write(exec_pipe[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  const int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &saved, nullptr);
  for (int* fd : {&null_fd, &out_pipe[1], &exec_pipe[1]}) CloseFd(fd);
  if (pid < 0) {
    for (int* fd : {&log_fd, &out_pipe[0], &exec_pipe[0]}) CloseFd(fd);
    return ErrnoStatus(fork_errno, absl::StrCat("cannot start ", spec.name));
  }
  setpgid(pid, pid);  // Also here, so the group exists before we may signal it.

  // The exec pipe reads EOF on a successful exec, or the errno of a failed one.
  int exec_errno = 0;
  ssize_t n;
  while ((n = read(exec_pipe[0], &exec_errno, sizeof(exec_errno))) < 0 && errno == EINTR) {
  }
  CloseFd(&exec_pipe[0]);
  if (n > 0) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    CloseFd(&out_pipe[0]);
    CloseFd(&log_fd);
    return ErrnoStatus(exec_errno,
                       absl::StrCat("cannot execute ", spec.argv[0], " (", spec.name, ")"));
  }

  if (out_pipe[0] >= 0) fcntl(out_pipe[0], F_SETFL, fcntl(out_pipe[0], F_GETFL) | O_NONBLOCK);
  Child child;
  child.name = spec.name;
  child.log_path = spec.log_path;
  child.pid = pid;
  child.stdout_fd = out_pipe[0];
  child.log_fd = log_fd;
  children_.push_back(std::move(child));
  return static_cast<int>(children_.size()) - 1;
}

void ProcessGroup::ReadOutput(int index, std::vector<ChildEvent>* events) {
  Child& child = children_[index];
  if (child.stdout_fd < 0) return;
  auto emit = [&](std::string line) {
    ChildEvent event;
    event.type = ChildEvent::Type::kLine;
    event.child = index;
    event.line = std::move(line);
    events->push_back(std::move(event));
  };
  char buffer[65536];
  size_t total = 0;
  while (total < kMaxReadPerCall) {
    ssize_t n = read(child.stdout_fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // EOF, or an error that ends the stream all the same.
      if (!child.partial.empty()) emit(std::move(child.partial));
      child.partial.clear();
      CloseFd(&child.stdout_fd);
      return;
    }
    total += n;
    child.partial.append(buffer, n);
    size_t start = 0;
    for (size_t nl; (nl = child.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      emit(child.partial.substr(start, nl - start));
    }
    child.partial.erase(0, start);
    while (child.partial.size() >= kMaxLineBytes) {
      emit(child.partial.substr(0, kMaxLineBytes));
      child.partial.erase(0, kMaxLineBytes);
    }
  }
}

void ProcessGroup::Reaped(int index, int wait_status, std::vector<ChildEvent>* events) {
  Child& child = children_[index];
  // The child is gone, so whatever it wrote is in the pipe: drain it first. (A grandchild
  // holding the write end could keep it open; what it writes later is dropped.)
  ReadOutput(index, events);
  if (child.stdout_fd >= 0) {
    if (!child.partial.empty()) {
      ChildEvent line;
      line.child = index;
      line.line = std::move(child.partial);
      events->push_back(std::move(line));
      child.partial.clear();
    }
    CloseFd(&child.stdout_fd);
  }
  child.running = false;
  child.status = ExitStatus::FromWaitStatus(wait_status);
  ChildEvent exited;
  exited.type = ChildEvent::Type::kExited;
  exited.child = index;
  exited.status = child.status;
  events->push_back(std::move(exited));
}

void ProcessGroup::ReapExited(std::vector<ChildEvent>* events) {
  for (int i = 0; i < size(); ++i) {
    if (!children_[i].running) continue;
    ReadOutput(i, events);
    int status;
    pid_t r = waitpid(children_[i].pid, &status, WNOHANG);
    if (r == children_[i].pid) Reaped(i, status, events);
  }
}

ProcessGroup::Wake ProcessGroup::WaitForActivity(absl::Duration timeout, int wake_fd) {
  std::vector<pollfd> fds;
  for (const Child& child : children_) {
    if (child.stdout_fd >= 0) fds.push_back({child.stdout_fd, POLLIN, 0});
  }
  if (wake_fd >= 0) fds.push_back({wake_fd, POLLIN, 0});
  const int timeout_ms = static_cast<int>(
      absl::ToInt64Milliseconds(std::min(timeout, kTick) + absl::Microseconds(999)));
  const int r = poll(fds.data(), fds.size(), timeout_ms);
  if (r < 0) {
    PCHECK(errno == EINTR) << "poll";
    return Wake::kInterrupted;
  }
  if (wake_fd >= 0 && (fds.back().revents & (POLLIN | POLLHUP))) return Wake::kWakeFd;
  return Wake::kActivityOrTimeout;
}

std::vector<ChildEvent> ProcessGroup::Poll(absl::Duration timeout, int wake_fd) {
  std::vector<ChildEvent> events;
  const Clock::time_point deadline = Deadline(timeout);
  ReapExited(&events);
  while (events.empty()) {
    const absl::Duration left = Remaining(deadline);
    if (left <= absl::ZeroDuration()) break;
    const Wake wake = WaitForActivity(left, wake_fd);
    ReapExited(&events);
    if (wake != Wake::kActivityOrTimeout) break;
  }
  return events;
}

std::vector<ChildEvent> ProcessGroup::Shutdown(absl::Duration grace, int wake_fd) {
  std::vector<ChildEvent> events;
  ReapExited(&events);
  for (const Child& child : children_) {
    if (child.running) SignalTree(child.pid, SIGTERM);
  }
  const Clock::time_point deadline = Deadline(grace);
  while (num_running() > 0) {
    const absl::Duration left = Remaining(deadline);
    if (left <= absl::ZeroDuration()) break;
    const Wake wake = WaitForActivity(left, wake_fd);
    ReapExited(&events);
    if (wake == Wake::kWakeFd) break;  // Asked to hurry: SIGKILL now.
  }
  for (const Child& child : children_) {
    if (child.running) SignalTree(child.pid, SIGKILL);
  }
  for (int i = 0; i < size(); ++i) {
    if (!children_[i].running) continue;
    int status;
    pid_t r;
    while ((r = waitpid(children_[i].pid, &status, 0)) < 0 && errno == EINTR) {
    }
    PCHECK(r == children_[i].pid) << "waitpid " << children_[i].pid;
    Reaped(i, status, &events);
  }
  return events;
}

void ProcessGroup::Signal(int child, int sig) {
  if (children_.at(child).running) SignalTree(children_[child].pid, sig);
}

void ProcessGroup::AppendToLog(int child, absl::string_view line) {
  const int fd = children_.at(child).log_fd;
  if (fd < 0) return;
  // One write() per line through the file description the child writes its stderr with: the
  // shared offset makes each write land whole after the last one, whoever made it.
  const std::string text = absl::StrCat(line, "\n");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // A full disk loses log lines, not the job.
    done += n;
  }
}

int ProcessGroup::num_running() const {
  return static_cast<int>(
      std::count_if(children_.begin(), children_.end(), [](const Child& c) { return c.running; }));
}

}  // namespace tamp::launcher
