// Small file helpers of the launcher: run directories, port files, log tails, atomic writes.
#ifndef TAMP_TOOLS_TAMP_FILES_H_
#define TAMP_TOOLS_TAMP_FILES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tamp::launcher {

// MakeRunDir()
//
// `requested` non-empty: creates it (and its parents) if missing and returns it.
// Empty: creates a fresh "tamp-run-XXXXXX" directory under $TMPDIR (default /tmp).
absl::StatusOr<std::string> MakeRunDir(const std::string& requested);

// LockRunDir()
//
// Takes `run_dir`'s lock (an flock on run_dir/.tamp-run.lock, which holds the owner's pid)
// for as long as the returned descriptor stays open (the process's life): two `tamp run` on
// one run_dir would mix their logs, events and checkpoints. FAILED_PRECONDITION naming the
// pid that holds it.
absl::StatusOr<int> LockRunDir(const std::string& run_dir);

// SetAsideEarlierLogs()
//
// Moves the logs and event files an earlier `tamp run` left in `run_dir` (server-I.log,
// worker-R.log, worker-R.events, their .restart-N twins) into a new subdirectory earlier-N
// (the first N free), so that a run resumed on the same directory keeps the interrupted one's
// record. Returns that subdirectory, or "" when there was nothing to move. Other files (the
// user's own, checkpoints/) stay where they are.
absl::StatusOr<std::string> SetAsideEarlierLogs(const std::string& run_dir);

// CopyAside()
//
// Copies the file at `path` into the directory `aside` (SetAsideEarlierLogs()'s), under its
// own name, before a run writes it anew (the earlier run's --metrics_file). Returns the copy's
// path, or "" when there is nothing to keep (no such file, or an empty one).
absl::StatusOr<std::string> CopyAside(const std::string& path, const std::string& aside);

// PrepareOutputFile()
//
// Makes sure a file can be written at `path` later (a run's summary, written at its end):
// creates its missing parent directories and checks the directory takes new files.
// FAILED_PRECONDITION when `path` is a directory, PERMISSION_DENIED naming the directory
// otherwise refused. Writes no file.
absl::Status PrepareOutputFile(const std::string& path);

// WriteFileAtomically()
//
// Writes `contents` to a temporary file next to `path`, flushes it and renames it over
// `path`, so readers see either the old file or the complete new one.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// ReadPortFile()
//
// Reads a server's port file: a decimal port in [1, 65535] followed by '\n'.
// NOT_FOUND while the file does not exist; INVALID_ARGUMENT if it holds anything else.
absl::StatusOr<int> ReadPortFile(const std::string& path);

// ReadLastLines()
//
// The last `n` lines of the file at `path` (of at most its last 64 KiB).
absl::StatusOr<std::vector<std::string>> ReadLastLines(const std::string& path, int n);

// LastPythonException()
//
// The index in `lines` (a log's) of the exception line of the last Python traceback: the
// first line after the last "Traceback (most recent call last):" that is not indented, as
// "ValueError: ...". A long exception message (torch's lists its dispatch keys) can push it
// out of a log's last lines. nullopt when there is none.
std::optional<size_t> LastPythonException(const std::vector<std::string>& lines);

// MakeAbsolute()
//
// `path` made absolute against the current directory (not resolved: no symlinks followed).
std::string MakeAbsolute(const std::string& path);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_FILES_H_
