#include "tools/tamp/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tamp::launcher {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int err = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

absl::Status MakeDirs(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    absl::Status parent = MakeDirs(path.substr(0, slash));
    if (!parent.ok()) return parent;
  }
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoError("cannot create directory", path);
  }
  return absl::OkStatus();
}

// True for the names `tamp run` gives its children's logs and event files:
// (server|worker)-<digits>[.restart-<digits>].(log|events).
bool IsRunLogName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "server-") && !absl::ConsumePrefix(&name, "worker-")) {
    return false;
  }
  if (!absl::ConsumeSuffix(&name, ".log") && !absl::ConsumeSuffix(&name, ".events")) {
    return false;
  }
  auto all_digits = [](absl::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), absl::ascii_isdigit);
  };
  constexpr absl::string_view kRestart = ".restart-";
  const size_t restart = name.find(kRestart);
  if (restart == absl::string_view::npos) return all_digits(name);
  return all_digits(name.substr(0, restart)) &&
         all_digits(name.substr(restart + kRestart.size()));
}

}  // namespace

absl::StatusOr<int> LockRunDir(const std::string& run_dir) {
  const std::string path = absl::StrCat(run_dir, "/.tamp-run.lock");
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot open", path);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char owner[32] = {0};
    const ssize_t n = pread(fd, owner, sizeof(owner) - 1, 0);
    close(fd);
    if (err != EWOULDBLOCK) {
      errno = err;
      return ErrnoError("cannot lock", path);
    }
    return absl::FailedPreconditionError(absl::StrCat(
        run_dir, " is in use by another tamp run",
        n > 0 ? absl::StrCat(" (pid ", absl::StripAsciiWhitespace(owner), ")") : "",
        ": give this run a --run_dir of its own, or wait for that one to end"));
  }
  // Only a refusal's message reads the pid: the lock holds whether or not it is written.
  const std::string pid = absl::StrCat(getpid(), "\n");
  static_cast<void>(ftruncate(fd, 0) == 0 && pwrite(fd, pid.data(), pid.size(), 0) > 0);
  return fd;
}

absl::StatusOr<std::string> SetAsideEarlierLogs(const std::string& run_dir) {
  DIR* dir = opendir(run_dir.c_str());
  if (dir == nullptr) return ErrnoError("cannot list", run_dir);
  std::vector<std::string> logs;
  while (const dirent* entry = readdir(dir)) {
    if (IsRunLogName(entry->d_name)) logs.push_back(entry->d_name);
  }
  closedir(dir);
  if (logs.empty()) return std::string();
  std::string aside;
  for (int n = 1;; ++n) {
    aside = absl::StrCat(run_dir, "/earlier-", n);
    if (mkdir(aside.c_str(), 0755) == 0) break;
    if (errno != EEXIST) return ErrnoError("cannot create directory", aside);
  }
  std::sort(logs.begin(), logs.end());
  for (const std::string& name : logs) {
    const std::string from = absl::StrCat(run_dir, "/", name);
    if (rename(from.c_str(), absl::StrCat(aside, "/", name).c_str()) != 0) {
      return ErrnoError(absl::StrCat("cannot move into ", aside, ":"), from);
    }
  }
  return aside;
}

absl::StatusOr<std::string> CopyAside(const std::string& path, const std::string& aside) {
  std::error_code error;
  if (std::filesystem::file_size(path, error) == 0 || error) return std::string();
  const std::string kept =
      absl::StrCat(aside, "/", std::filesystem::path(path).filename().string());
  std::filesystem::copy_file(path, kept, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot copy ", path, " into ", aside, ": ", error.message()));
  }
  return kept;
}

absl::StatusOr<std::string> MakeRunDir(const std::string& requested) {
  if (!requested.empty()) {
    absl::Status status = MakeDirs(requested);
    if (!status.ok()) return status;
    return requested;
  }
  const char* tmp = getenv("TMPDIR");
  std::string base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::string templ = absl::StrCat(base, "/tamp-run-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) return ErrnoError("cannot create a directory in", base);
  return templ;
}

absl::Status PrepareOutputFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is a directory, not a file"));
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (absl::Status made = MakeDirs(dir); !made.ok()) return made;
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return ErrnoError("cannot create files in", dir);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  std::string tmp = absl::StrCat(path, ".tmp-XXXXXX");
  const int fd = mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  size_t written = 0;
  while (written < contents.size()) {
    const ssize_t n = write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status error = ErrnoError("cannot write", tmp);
      close(fd);
      unlink(tmp.c_str());
      return error;
    }
    written += n;
  }
  // mkostemp creates mode 0600; a summary is not a secret.
  fchmod(fd, 0644);
  if (fsync(fd) != 0 || close(fd) != 0) {
    absl::Status error = ErrnoError("cannot write", tmp);
    unlink(tmp.c_str());
    return error;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status error = ErrnoError("cannot rename to", path);
    unlink(tmp.c_str());
    return error;
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ReadPortFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  char buffer[32];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) < 0 && errno == EINTR) {
  }
  close(fd);
  if (n < 0) return ErrnoError("cannot read", path);
  absl::string_view text(buffer, n);
  int port = 0;
  if (!absl::ConsumeSuffix(&text, "\n") || !absl::SimpleAtoi(text, &port) || port < 1 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(path,
                                                   ": expected a port number and a newline, got \"",
                                                   absl::string_view(buffer, n), "\""));
  }
  return port;
}

absl::StatusOr<std::vector<std::string>> ReadLastLines(const std::string& path, int n) {
  constexpr off_t kMaxTail = 64 << 10;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status error = ErrnoError("cannot stat", path);
    close(fd);
    return error;
  }
  const off_t start = std::max<off_t>(0, st.st_size - kMaxTail);
  std::string text(st.st_size - start, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t r = pread(fd, text.data() + got, text.size() - got, start + got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += r;
  }
  close(fd);
  text.resize(got);
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // Trailing newline.
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());   // Cut mid-line.
  if (static_cast<int>(lines.size()) > n) lines.erase(lines.begin(), lines.end() - n);
  return lines;
}

std::optional<size_t> LastPythonException(const std::vector<std::string>& lines) {
  std::optional<size_t> traceback;
  for (size_t i = lines.size(); i-- > 0;) {
    if (absl::StartsWith(lines[i], "Traceback (most recent call last):")) {
      traceback = i;
      break;
    }
  }
  if (!traceback) return std::nullopt;
  for (size_t i = *traceback + 1; i < lines.size(); ++i) {
    if (!lines[i].empty() && lines[i][0] != ' ') return i;
  }
  return std::nullopt;
}

std::string MakeAbsolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char* cwd = getcwd(nullptr, 0);
  if (cwd == nullptr) return path;
  std::string result = absl::StrCat(cwd, "/", absl::StripPrefix(path, "./"));
  free(cwd);
  return result;
}

}  // namespace tamp::launcher
