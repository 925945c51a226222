// CheckpointLock: at most one server process per shard checkpoint file.
//
// Two servers started for one shard on one checkpoint directory (a duplicate by hand, a
// stale pod, a second Slurm step) would each write the shard's checkpoint, the later one
// over the other's, rolling the shard back. A server holds the lock of its checkpoint file
// (<path>.lock beside it, an exclusive flock) while it runs; a second one is refused at
// start, naming the holder. The lock goes with the process, however it ends (the kernel
// drops a flock with its last descriptor), so a killed server leaves no stale lock; the
// .lock file itself stays, empty of meaning until the next holder writes its pid.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(CheckpointLock lock, CheckpointLock::Acquire(path));
//   ... write `path` as often as needed; the lock is released when `lock` goes.
#ifndef TAMP_SERVER_CHECKPOINT_LOCK_H_
#define TAMP_SERVER_CHECKPOINT_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace tamp {

class CheckpointLock {
 public:
  // CheckpointLock::Acquire()
  //
  // Takes the lock of checkpoint `path` without waiting (its directory must exist).
  // FAILED_PRECONDITION naming the path and the holder's pid where another process holds
  // it; UNAVAILABLE naming the lock file and the system's reason where it cannot be made.
  static absl::StatusOr<CheckpointLock> Acquire(const std::string& path);

  CheckpointLock(CheckpointLock&& other) noexcept;
  CheckpointLock& operator=(CheckpointLock&& other) noexcept;
  CheckpointLock(const CheckpointLock&) = delete;
  CheckpointLock& operator=(const CheckpointLock&) = delete;
  ~CheckpointLock();  // Releases the lock.

 private:
  explicit CheckpointLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace tamp

#endif  // TAMP_SERVER_CHECKPOINT_LOCK_H_
