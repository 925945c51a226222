// Checkpointer: a running server's checkpoints (file format: server/checkpoint.h).
//
// Start() takes the file's lock (server/checkpoint_lock.h: a second server of the shard on
// the same directory is refused), resumes the shard from <dir>/shard-<rank>.ckpt when that
// file exists (logging the step it resumes from; a damaged file or one of another job is an
// error, never loaded), then, with every_steps > 0, starts a thread that writes a checkpoint each time
// the shard's slowest chunk has completed every_steps more steps. WriteFinal() writes one
// more, for shutdown. Write failures are logged and training goes on (the previous file
// stays whole).
//
// Example (the shard must outlive the checkpointer):
//   TAMP_ASSIGN_OR_RETURN(std::unique_ptr<Checkpointer> checkpointer,
//                         Checkpointer::Start(shard.get(), config.checkpoint()));
//   ...
//   shard->Close(absl::UnavailableError("server shutting down"));
//   checkpointer->WriteFinal();  // Stops the thread, then writes the final state.
#ifndef TAMP_SERVER_CHECKPOINTER_H_
#define TAMP_SERVER_CHECKPOINTER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"
#include "server/checkpoint_lock.h"
#include "server/shard.h"

namespace tamp {

// CheckCheckpointDirSet()
//
// INVALID_ARGUMENT where `spec` names no directory (Start() refuses it; tamp_server --check
// too).
absl::Status CheckCheckpointDirSet(const config::Checkpoint& spec);

class Checkpointer {
 public:
  // Checkpointer::Start()
  //
  // Resumes `shard` (not yet serving) from its checkpoint in `spec.dir()` if there is one,
  // then starts the periodic writes. Errors name the file: DATA_LOSS (damaged),
  // FAILED_PRECONDITION (another format version or job), INVALID_ARGUMENT (a state that does
  // not fit the shard), UNAVAILABLE (unreadable); INVALID_ARGUMENT when spec.dir() is empty.
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Start(Shard* shard,
                                                             const config::Checkpoint& spec);

  // Stops the thread.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Steps the shard resumed from (its slowest chunk's), 0 on a fresh start.
  uint64_t resumed_step() const { return resumed_step_; }
  const std::string& path() const { return path_; }

  // Checkpointer::WriteFinal()
  //
  // Stops the periodic writes, then writes the shard's state now. Call it after
  // Shard::Close(), so that no step completes meanwhile.
  absl::Status WriteFinal();

 private:
  Checkpointer(Shard* shard, std::string path, uint32_t every_steps);
  absl::Status Resume();
  // Writes the shard's state, logging the step and the time taken.
  absl::Status Write(const char* why);
  void Loop();
  void Stop();

  Shard* const shard_;
  const std::string path_;
  const uint32_t every_steps_;
  const checkpoint::JobIdentity job_;
  std::optional<CheckpointLock> lock_;  // Held from Start() on: this shard's file is ours.
  uint64_t resumed_step_ = 0;
  uint64_t written_step_ = 0;  // Of the last checkpoint; only the thread touches it.
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // Guarded by mu_.
  std::thread thread_;
};

}  // namespace tamp

#endif  // TAMP_SERVER_CHECKPOINTER_H_
