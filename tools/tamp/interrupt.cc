#include "tools/tamp/interrupt.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tamp::launcher {
namespace {

constexpr int kSignals[InterruptWatcher::kWatchedSignals] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

// Written by the handler; -1 while no watcher is installed.
std::atomic<int> g_write_fd{-1};
volatile sig_atomic_t g_last_signal = 0;
// SIGPIPE counts once: every later write to the closed console raises it again, and a
// second one would kill everything at once.
volatile sig_atomic_t g_pipe_counted = 0;
// CLOCK_MONOTONIC nanoseconds of the last signal counted, and the window after it in which
// another is the same interrupt (lock-free atomics: safe in a handler).
std::atomic<int64_t> g_last_counted_ns{0};
std::atomic<int64_t> g_same_interrupt_ns{0};

int64_t MonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);  // Async-signal-safe.
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

extern "C" void OnSignal(int sig) {
  if (sig == SIGPIPE) {
    if (g_pipe_counted) return;
    g_pipe_counted = 1;
  }
  const int saved_errno = errno;
  g_last_signal = sig;
  const int fd = g_write_fd.load();
  const int64_t now = MonotonicNs();
  const int64_t last = g_last_counted_ns.load();
  const bool same = last != 0 && now - last < g_same_interrupt_ns.load();
  if (fd >= 0 && !same) {
    g_last_counted_ns.store(now);
    const char byte = static_cast<char>(sig);
    ssize_t ignored = write(fd, &byte, 1);  // Non-blocking; a full pipe is still readable.
    (void)ignored;
  }
  errno = saved_errno;
}

}  // namespace

absl::StatusOr<std::unique_ptr<InterruptWatcher>> InterruptWatcher::Install(
    absl::Duration same_interrupt) {
  if (g_write_fd.load() >= 0) {
    return absl::FailedPreconditionError("an InterruptWatcher is already installed");
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  std::unique_ptr<InterruptWatcher> watcher(new InterruptWatcher(fds[0], fds[1]));
  g_last_signal = 0;
  g_pipe_counted = 0;
  g_last_counted_ns.store(0);
  g_same_interrupt_ns.store(absl::ToInt64Nanoseconds(same_interrupt));
  g_write_fd.store(fds[1]);
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int i = 0; i < InterruptWatcher::kWatchedSignals; ++i) {
    sigaction(kSignals[i], &action, &watcher->saved_[i]);
  }
  return watcher;
}

InterruptWatcher::~InterruptWatcher() {
  for (int i = 0; i < kWatchedSignals; ++i) sigaction(kSignals[i], &saved_[i], nullptr);
  g_write_fd.store(-1);
  close(read_fd_);
  close(write_fd_);
}

int InterruptWatcher::Consume() {
  int count = 0;
  char buffer[64];
  ssize_t n;
  while ((n = read(read_fd_, buffer, sizeof(buffer))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) count += static_cast<int>(n);
  }
  return count;
}

int InterruptWatcher::last_signal() const { return g_last_signal; }

}  // namespace tamp::launcher
