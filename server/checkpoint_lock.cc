#include "server/checkpoint_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tamp {
namespace {

// The pid the holder wrote into the lock file, or "" when it cannot be read.
std::string HolderPid(int fd) {
  char buffer[32] = {};
  const ssize_t read = pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (read <= 0) return "";
  return std::string(absl::StripAsciiWhitespace(absl::string_view(buffer, read)));
}

}  // namespace

absl::StatusOr<CheckpointLock> CheckpointLock::Acquire(const std::string& path) {
  const std::string lock_path = path + ".lock";
  const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot make the checkpoint's lock ", lock_path, ": ", strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = HolderPid(fd);
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is in use by another server of this shard",
          holder.empty() ? "" : absl::StrCat(" (pid ", holder, ")"), ", which holds ",
          lock_path, ": two servers of one shard would overwrite each other's checkpoint; "
          "stop that one first"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot lock the checkpoint's lock ", lock_path, ": ", strerror(error)));
  }
  // The holder's pid, for a refused second server's message (the lock holds without it).
  const std::string pid = absl::StrCat(getpid(), "\n");
  const bool noted = ftruncate(fd, 0) == 0 && pwrite(fd, pid.data(), pid.size(), 0) > 0;
  static_cast<void>(noted);
  return CheckpointLock(fd);
}

CheckpointLock::CheckpointLock(CheckpointLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

CheckpointLock& CheckpointLock::operator=(CheckpointLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

CheckpointLock::~CheckpointLock() {
  if (fd_ >= 0) close(fd_);  // Closing the last descriptor releases the flock.
}

}  // namespace tamp
