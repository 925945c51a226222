#include "server/checkpointer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "server/checkpoint.h"

namespace tamp {
namespace {

// How often the thread looks at the shard's step: small next to a step's time is not
// needed, a checkpoint a few steps late is as good.
constexpr auto kPollPeriod = std::chrono::milliseconds(20);

std::pair<uint64_t, uint64_t> StepRange(const checkpoint::ShardState& state) {
  uint64_t low = UINT64_MAX, high = 0;
  for (const checkpoint::ChunkState& chunk : state.chunks()) {
    low = std::min<uint64_t>(low, chunk.step());
    high = std::max<uint64_t>(high, chunk.step());
  }
  return state.chunks().empty() ? std::make_pair(uint64_t{0}, uint64_t{0})
                                : std::make_pair(low, high);
}

}  // namespace

Checkpointer::Checkpointer(Shard* shard, std::string path, uint32_t every_steps)
    : shard_(shard),
      path_(std::move(path)),
      every_steps_(every_steps),
      job_(DescribeJob(shard->config(), shard->layout(), shard->rank())) {}

absl::Status CheckCheckpointDirSet(const config::Checkpoint& spec) {
  if (!spec.dir().empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "checkpoint.dir is empty: set it in the config or pass --checkpoint_dir");
}

absl::StatusOr<std::unique_ptr<Checkpointer>> Checkpointer::Start(Shard* shard,
                                                                  const config::Checkpoint& spec) {
  TAMP_RETURN_IF_ERROR(CheckCheckpointDirSet(spec));
  std::unique_ptr<Checkpointer> checkpointer(new Checkpointer(
      shard, CheckpointPath(spec.dir(), shard->rank()), spec.every_steps()));
  // Now, not at the first checkpoint a run with restarts would need; it makes the directory.
  if (absl::Status writable = CheckCheckpointWritable(checkpointer->path_); !writable.ok()) {
    return absl::Status(writable.code(), absl::StrCat("checkpoint.dir: ", writable.message()));
  }
  // Before the file is read: another server of the shard may be writing it.
  TAMP_ASSIGN_OR_RETURN(CheckpointLock lock, CheckpointLock::Acquire(checkpointer->path_));
  checkpointer->lock_.emplace(std::move(lock));
  TAMP_RETURN_IF_ERROR(checkpointer->Resume());
  checkpointer->written_step_ = checkpointer->resumed_step_;
  if (checkpointer->every_steps_ != 0) {
    checkpointer->thread_ = std::thread([raw = checkpointer.get()] { raw->Loop(); });
  }
  return checkpointer;
}

Checkpointer::~Checkpointer() { Stop(); }

absl::Status Checkpointer::Resume() {
  absl::StatusOr<checkpoint::ShardState> state = ReadCheckpoint(path_, job_);
  if (absl::IsNotFound(state.status())) {
    LOG(INFO) << "checkpoint: none at " << path_ << ", starting at step 0";
    return absl::OkStatus();
  }
  TAMP_RETURN_IF_ERROR(state.status());
  if (absl::Status restored = shard_->Restore(*state); !restored.ok()) {
    return absl::Status(restored.code(), absl::StrCat(path_, ": ", restored.message()));
  }
  const auto [low, high] = StepRange(*state);
  resumed_step_ = low;
  LOG(INFO) << "checkpoint: resumed from " << path_ << " at step " << low
            << (high == low ? "" : absl::StrCat(" (chunks up to step ", high, ")"))
            << "; workers resync to it";
  return absl::OkStatus();
}

absl::Status Checkpointer::Write(const char* why) {
  const auto start = std::chrono::steady_clock::now();
  const checkpoint::ShardState state = shard_->ExportState();
  TAMP_RETURN_IF_ERROR(WriteCheckpoint(path_, job_, state));
  const auto [low, high] = StepRange(state);
  written_step_ = low;
  LOG(INFO) << "checkpoint: step " << low << (high == low ? "" : absl::StrCat("-", high))
            << " written to " << path_ << " (" << why << ", "
            << absl::StrFormat("%.1f ms", std::chrono::duration<double, std::milli>(
                                              std::chrono::steady_clock::now() - start)
                                              .count())
            << ")";
  return absl::OkStatus();
}

void Checkpointer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, kPollPeriod, [this] { return stop_; })) {
    lock.unlock();
    if (shard_->step() >= written_step_ + every_steps_) {
      if (absl::Status status = Write("periodic"); !status.ok()) {
        LOG(ERROR) << "checkpoint: " << status.message() << "; training goes on, next try in "
                   << every_steps_ << " steps";
        written_step_ = shard_->step();
      }
    }
    lock.lock();
  }
}

void Checkpointer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

absl::Status Checkpointer::WriteFinal() {
  Stop();
  return Write("final");
}

}  // namespace tamp
