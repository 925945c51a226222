#include "server/worker_processes.h"

#include "absl/strings/str_cat.h"

namespace tamp {

bool WorkerProcesses::Joined(uint32_t rank, uint64_t process) {
  if (process == 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& holder = holders_[rank];
  const bool displaced = holder != 0 && holder != process;
  if (displaced) displaced_.insert({rank, holder});
  holder = process;
  return displaced;
}

absl::Status WorkerProcesses::CheckNotDisplaced(uint32_t rank, uint64_t process,
                                                uint32_t server_rank) const {
  if (process == 0) return absl::OkStatus();
  uint64_t holder = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!displaced_.contains({rank, process})) return absl::OkStatus();
    holder = holders_.at(rank);
  }
  return NotTheHolder(rank, holder, process, server_rank);
}

absl::Status WorkerProcesses::CheckHolder(uint32_t rank, uint64_t process,
                                          uint32_t server_rank) const {
  if (process == 0) return absl::OkStatus();
  uint64_t holder = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto found = holders_.find(rank);
    if (found == holders_.end()) return absl::OkStatus();
    holder = found->second;
  }
  if (holder == process) return absl::OkStatus();
  return NotTheHolder(rank, holder, process, server_rank);
}

absl::Status WorkerProcesses::NotTheHolder(uint32_t rank, uint64_t holder, uint64_t process,
                                           uint32_t server_rank) {
  return absl::FailedPreconditionError(absl::StrCat(
      "worker ", rank, ": another process with rank ", rank, " (id ", absl::Hex(holder),
      ") handshook with server ", server_rank, " after this one (id ", absl::Hex(process),
      "), and holds the rank now: this one was replaced after a stall, or two workers were "
      "started with rank ", rank,
      "? Each worker process needs a rank of its own, 0 .. cluster.num_workers - 1 (--rank, "
      "TAMP_RANK or RANK)"));
}

}  // namespace tamp
