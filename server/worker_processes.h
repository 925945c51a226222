// WorkerProcesses: which process holds each worker rank, as far as one server can tell.
//
// Every worker process draws a random id (base/random_id.h) and sends it with its handshakes
// and pushes (proto/tamp.proto, worker_process). The latest accepted handshake of a rank
// that can train (the service decides: before the first step, or a rejoin) makes its process
// the rank's holder, and a push from any other process of that rank is refused. Two
// processes started with the same rank (a launch mistake) so fail with a message that says
// so, instead of one of them failing later with "already pushed" or both training
// on half the data each. A replacement of a dead worker is the same event seen from here: its
// handshake makes it the holder, and the dead process sends nothing more. A process once
// displaced never takes its rank back: were it to rejoin (a push of its that raced the
// newcomer's handshake is answered "dropped"), the two would take the rank from each other in
// turn, and the one that came last would train on while the rightful one failed.
//
// Threading: every method may be called from any thread (one mutex, held briefly, taking no
// other lock).
//
// Example:
//   WorkerProcesses holders;
//   holders.Joined(request.worker_rank(), request.worker_process());  // Handshake accepted.
//   TAMP_RETURN_IF_ERROR(holders.CheckHolder(push.worker_rank(), push.worker_process(), 0));
#ifndef TAMP_SERVER_WORKER_PROCESSES_H_
#define TAMP_SERVER_WORKER_PROCESSES_H_

#include <cstdint>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"

namespace tamp {

class WorkerProcesses {
 public:
  // Process `process` of worker `rank` handshook and was accepted: it holds the rank from now
  // on. True when another process held it (the caller tells the newcomer). Process 0 (a
  // client that sends no id) changes nothing.
  bool Joined(uint32_t rank, uint64_t process);

  // FAILED_PRECONDITION, as CheckHolder()'s, when another process of `rank` displaced
  // `process` (its handshake is refused before it changes anything); OK otherwise, and for
  // process 0.
  absl::Status CheckNotDisplaced(uint32_t rank, uint64_t process, uint32_t server_rank) const;

  // FAILED_PRECONDITION, naming both processes and server `server_rank`, when another process
  // of `rank` handshook after `process`; OK for the holder, for a rank no process with an id
  // has handshaken for, and for process 0.
  absl::Status CheckHolder(uint32_t rank, uint64_t process, uint32_t server_rank) const;

 private:
  // The rank `rank` is held by `holder`, not by `process`.
  static absl::Status NotTheHolder(uint32_t rank, uint64_t holder, uint64_t process,
                                   uint32_t server_rank);

  mutable std::mutex mu_;
  absl::flat_hash_map<uint32_t, uint64_t> holders_;  // Guarded by mu_.
  // (rank, process) of every process displaced from its rank. Guarded by mu_.
  absl::flat_hash_set<std::pair<uint32_t, uint64_t>> displaced_;
};

}  // namespace tamp

#endif  // TAMP_SERVER_WORKER_PROCESSES_H_
