// InterruptWatcher: turns SIGINT, SIGTERM, SIGHUP and SIGPIPE (its console closed: a `| head`
// or a `| tee` that died) to the launcher into a readable fd.
//
// While an InterruptWatcher exists, those signals no longer kill the process: the handler
// records the signal and writes a byte to a self-pipe whose read end (fd()) a poll loop
// watches (ProcessGroup::Poll's wake_fd). The previous dispositions come back on
// destruction. A signal within `same_interrupt` of the last one counted is taken for that
// interrupt arriving twice (a signal to the launcher's whole process group, which `timeout`
// also forwards; Slurm's scancel) and is not counted: only a later one means "again".
// SIGPIPE counts once (each later write to the closed console raises it again).
//
// Only one may exist at a time (signal handlers are process-wide). Not thread-safe.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto interrupts, InterruptWatcher::Install());
//   while (...) {
//     group.Poll(absl::Seconds(1), interrupts->fd());
//     if (interrupts->Consume() > 0) { ... tear down, exit 130 ... }
//   }
#ifndef TAMP_TOOLS_TAMP_INTERRUPT_H_
#define TAMP_TOOLS_TAMP_INTERRUPT_H_

#include <signal.h>

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tamp::launcher {

class InterruptWatcher {
 public:
  // SIGINT, SIGTERM, SIGHUP, SIGPIPE.
  static constexpr int kWatchedSignals = 4;

  // InterruptWatcher::Install()
  //
  // Installs the handlers. FAILED_PRECONDITION if another watcher exists.
  static absl::StatusOr<std::unique_ptr<InterruptWatcher>> Install(
      absl::Duration same_interrupt = absl::Seconds(1));
  ~InterruptWatcher();
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  // Readable while signals are pending (not yet Consume()d). Close-on-exec.
  int fd() const { return read_fd_; }

  // InterruptWatcher::Consume()
  //
  // Drains the pipe and returns how many signals were counted since the last call.
  int Consume();

  // The last signal received (0 if none).
  int last_signal() const;

 private:
  InterruptWatcher(int read_fd, int write_fd) : read_fd_(read_fd), write_fd_(write_fd) {}

  int read_fd_;
  int write_fd_;
  struct sigaction saved_[kWatchedSignals];
};

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_INTERRUPT_H_
