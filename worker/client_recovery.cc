// Client's recovery half (worker/client.h: "SYNC worker failure", "Server failure"):
// resuming in place of a dead worker, rejoining after a barrier dropped this worker, and
// pushing again what a restarted server lost. The step's own path is in client.cc.
#include "worker/client.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "protocol/keys.h"

namespace tamp {

absl::StatusOr<uint64_t> Client::Resume(TensorSpans params, const TensorMemory& memory) {
  TAMP_RETURN_IF_ERROR(StartedOnce("Resume()"));
  TAMP_RETURN_IF_ERROR(CheckTensors("Resume()", params));
  TAMP_RETURN_IF_ERROR(UseMemory("Resume()", 0, memory));
  if (config_.consistency().mode() != config::Consistency::SYNC) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank_, " cannot resume in place of a dead worker: consistency.mode ",
        config::Consistency::Mode_Name(config_.consistency().mode()),
        " keeps no barrier to rejoin (only SYNC workers rejoin)"));
  }
  // The dead process may have died before setting them (ALREADY_EXISTS otherwise: they stand).
  TAMP_RETURN_IF_ERROR(SetInitialWeights(params, memory));
  const uint64_t latest = ps_client_->latest_step_at_connect();
  if (latest >= length_.total_steps) {
    // Nothing left to train: the final weights, for the caller's evaluation.
    TAMP_RETURN_IF_ERROR(ps_client_->PullWeights(Pulled()).status());
    TAMP_RETURN_IF_ERROR(CopyPulled(-1, params, memory));
    LOG(WARNING) << "worker " << rank_ << ": resumed after the run's last step (" << latest
                 << "); nothing left to train";
    started_ = true;
    return length_.total_steps;
  }
  // Even at step 0: the dead process may have pushed part of it, which a fresh start would
  // push again.
  return Rejoin(params,
                absl::StrCat("resumed in place of a dead worker; the run is at step ", latest),
                memory);
}

absl::StatusOr<uint64_t> Client::Rejoin(TensorSpans params, absl::string_view cause,
                                        const TensorMemory& memory) {
  TAMP_RETURN_IF_ERROR(CheckTensors("Rejoin()", params));
  TAMP_RETURN_IF_ERROR(UseMemory("Rejoin()", 0, memory));
  if (aggregates()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", rank_, " cannot rejoin (", cause, "): with server.mode AGGREGATE the "
        "servers hold no trained weights to rejoin with"));
  }
  LOG(WARNING) << "worker " << rank_ << ": " << cause << "; rejoining";
  // What the residuals held belonged to the replica this worker had; it now takes the
  // others' replica, as if it had been resynced.
  for (ChunkCodecs& codecs : codecs_) codecs.push_memory->Reset();
  if (device_ != nullptr) TAMP_RETURN_IF_ERROR(device_->ResetResiduals(memory.stream));
  fusion_->Flush();  // Pushed in the step left: they go as they would have unfused.
  in_step_ = false;
  absl::StatusOr<uint64_t> rejoined = ps_client_->Rejoin(Pulled());
  if (!rejoined.ok()) {
    // Why it rejoined: a process that took its rank over from a second one started with the
    // same rank waits for a worker that was never started.
    return absl::Status(rejoined.status().code(),
                        absl::StrCat(rejoined.status().message(), " (why it rejoined: ",
                                     cause, ")"));
  }
  const uint64_t step = *rejoined;
  TAMP_RETURN_IF_ERROR(CopyPulled(-1, params, memory));
  LOG(WARNING) << "worker " << rank_ << " rejoined at step " << step;
  if (last_completed_step_.has_value() && step > *last_completed_step_ + 1) {
    totals_.steps_missed += step - *last_completed_step_ - 1;
  }
  next_step_ = step;
  started_ = true;
  failed_step_ = absl::OkStatus();
  return step;
}

absl::Status Client::Resend(std::vector<LostPush>& pushes, TensorSpans params,
                            const TensorMemory& memory) {
  // A restarted shard also gets the step's pushes it had answered before: it lost them with
  // its state, and a worker that did not get those answers waits there for them. Without
  // them two workers can each wait on a push the other has already completed. The resync
  // replaced what those answers had applied; the new answers apply again.
  std::vector<bool> resynced(layout_.shard_bytes.size(), false);
  std::vector<bool> restarted(layout_.shard_bytes.size(), false);
  for (const LostPush& push : pushes) {
    const uint32_t shard = layout_.chunks[push.id].chunk.shard;
    if (resynced[shard]) continue;
    TAMP_ASSIGN_OR_RETURN(const bool new_process,
                          ps_client_->Reconnect(shard, push.status.message()));
    TAMP_ASSIGN_OR_RETURN(const uint64_t shard_step,
                          ps_client_->PullShardWeights(shard, Pulled()));
    TAMP_RETURN_IF_ERROR(CopyPulled(static_cast<int>(shard), params, memory));
    LOG(WARNING) << "worker " << rank_ << ": resynced with shard " << shard << " (its step "
                 << shard_step << "); pushing its chunks of step " << step_ << " again";
    resynced[shard] = true;
    restarted[shard] = new_process;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<uint32_t> still_answered;
    for (uint32_t id : answered_pushes_) {
      if (restarted[layout_.chunks[id].chunk.shard]) {
        const bool rounds = codecs_[id].push->rounds() > 1;
        pushes.push_back({id, rounds ? std::string() : std::move(pushed_[id]), absl::OkStatus(),
                          rounds});
      } else {
        still_answered.push_back(id);
      }
    }
    answered_pushes_.swap(still_answered);
  }
  for (LostPush& push : pushes) {
    if (push.rounds) {  // The codec encodes round 0 again; the step's rounds follow.
      ChunkCodecs& codecs = codecs_[push.id];
      const RandomKey key = PushKey(config_, step_, push.id, rank_);
      TAMP_RETURN_IF_ERROR(
          PushesOnDevice(push.id, memory)
              ? device_->ReplayPushRounds(push.id, key, &push.payload, memory.stream)
              : codecs.push_memory->ReplayRounds(*codecs.push, key, &push.payload));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++outstanding_;
    }
    if (push.rounds) {
      PushRound(push.id, 0, std::move(push.payload));
    } else {
      PushSingle(push.id, std::move(push.payload));
    }
  }
  fusion_->Flush();
  return absl::OkStatus();
}

uint64_t Client::HeldPayloadBytes() const {
  uint64_t bytes = 0;
  for (const std::vector<std::string>* held : {&updates_, &aggregates_, &pushed_}) {
    for (const std::string& payload : *held) bytes += payload.size();
  }
  return bytes;
}

bool Client::ShardIdleLocked(uint32_t shard) const {
  if (in_flight_by_shard_[shard] != 0) return false;
  // A round queued for the training thread to push is on its way there, too.
  return std::none_of(next_rounds_.begin(), next_rounds_.end(), [&](const NextRound& next) {
    return layout_.chunks[next.id].chunk.shard == shard;
  });
}

bool Client::ResendableLocked() const {
  if (!first_error_.ok()) return false;
  return std::any_of(lost_.begin(), lost_.end(), [this](const LostPush& push) {
    return ShardIdleLocked(layout_.chunks[push.id].chunk.shard);
  });
}

void Client::TakeResendableLocked(std::vector<LostPush>* out) {
  if (!first_error_.ok()) return;
  std::vector<LostPush> waiting;
  for (LostPush& push : lost_) {
    if (ShardIdleLocked(layout_.chunks[push.id].chunk.shard)) {
      out->push_back(std::move(push));
    } else {
      waiting.push_back(std::move(push));
    }
  }
  lost_.swap(waiting);
}

}  // namespace tamp
