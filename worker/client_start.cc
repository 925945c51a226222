// Client's start-up half (worker/client.h: Start(), Broadcast()): the job's weights into the
// caller's buffers and out of them, through the flat scratch Pulled(); worker 0's initial
// weights and broadcasts. The step's own path is in client.cc, recovery in
// client_recovery.cc.
#include "worker/client.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tamp {

absl::Span<float> Client::Pulled() {
  pulled_.resize(layout_.total_elements);
  return absl::MakeSpan(pulled_);
}

absl::Status Client::CopyPulled(int shard, TensorSpans params, const TensorMemory& memory) {
  for (const ChunkPlan& plan : layout_.chunks) {
    if (shard >= 0 && plan.chunk.shard != static_cast<uint32_t>(shard)) continue;
    TAMP_RETURN_IF_ERROR(WriteTensor(pulled_.data() + layout_.flat_offset(plan),
                                     params[plan.chunk.tensor].data() + plan.chunk.offset,
                                     plan.chunk.length, memory));
  }
  return absl::OkStatus();
}

absl::Status Client::SetInitialWeights(TensorSpans params, const TensorMemory& memory) {
  if (ps_client_->latest_step_at_connect() != 0 || rank_ != 0 ||
      config_.model().kind() != config::Model::REGISTERED) {
    return absl::OkStatus();
  }
  // Worker 0's weights are the job's initial weights (the others pull them).
  TAMP_RETURN_IF_ERROR(ReadParams(params, memory));
  return ps_client_->InitWeights(Pulled());
}

absl::Status Client::ReadParams(TensorSpans params, const TensorMemory& memory) {
  const absl::Span<float> flat = Pulled();
  for (const ChunkPlan& plan : layout_.chunks) {
    TAMP_RETURN_IF_ERROR(ReadTensor(params[plan.chunk.tensor].data() + plan.chunk.offset,
                                    flat.data() + layout_.flat_offset(plan),
                                    plan.chunk.length, memory));
  }
  return absl::OkStatus();
}

absl::Status Client::Broadcast(TensorSpans params, const TensorMemory& memory) {
  TAMP_RETURN_IF_ERROR(CheckTensors("Broadcast()", params));
  TAMP_RETURN_IF_ERROR(UseMemory("Broadcast()", 0, memory));
  // Step 0 may have begun (BeginStep()), as long as nothing was pushed in it.
  const bool pushed =
      in_step_ && std::find(pushed_tensors_.begin(), pushed_tensors_.end(), true) !=
                      pushed_tensors_.end();
  if (next_step_ != uint64_t{0} || pushed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Broadcast(): worker 0's weights can replace the job's only before its first step "
        "has pushed anything, and ",
        pushed ? absl::StrCat("step ", step_, " has pushed gradients")
        : next_step_.has_value() ? absl::StrCat("the next step is ", *next_step_)
                                 : std::string("the job has not started here (Start() first)")));
  }
  const uint32_t generation = weights_generation_ + 1;
  if (rank_ == 0) {
    TAMP_RETURN_IF_ERROR(ReadParams(params, memory));
    TAMP_RETURN_IF_ERROR(ps_client_->InitWeights(Pulled(), generation));
  }
  // Worker 0 too: every replica is then the shards' copy, bit for bit.
  TAMP_RETURN_IF_ERROR(ps_client_->PullWeights(Pulled(), generation).status());
  TAMP_RETURN_IF_ERROR(CopyPulled(-1, params, memory));
  weights_generation_ = generation;
  return absl::OkStatus();
}

absl::Status Client::StartedOnce(absl::string_view call) const {
  if (!started_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      call, ": the client has started already (Start() or Resume() once; Rejoin() after a "
      "dropped or failed step)"));
}

absl::StatusOr<uint64_t> Client::Start(TensorSpans params, const TensorMemory& memory) {
  TAMP_RETURN_IF_ERROR(StartedOnce("Start()"));
  TAMP_RETURN_IF_ERROR(CheckTensors("Start()", params));
  TAMP_RETURN_IF_ERROR(UseMemory("Start()", 0, memory));
  const bool sync = config_.consistency().mode() == config::Consistency::SYNC;
  const uint64_t latest = ps_client_->latest_step_at_connect();
  TAMP_RETURN_IF_ERROR(SetInitialWeights(params, memory));
  if (sync && latest != 0) {
    if (latest >= length_.total_steps) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the run is over: the servers have completed step ", latest, " of ",
          length_.total_steps, ": worker ", rank_, " came after the others had trained it",
          config_.consistency().worker_timeout_ms() != 0
              ? " (later than consistency.worker_timeout_ms allowed)"
              : "",
          config_.has_checkpoint()
              ? ", or the servers resumed a checkpoint of a run that got that far (a finished "
                "run's: remove checkpoint.dir to train again; or this config's "
                "training.epochs / max_steps are fewer than that run's: resume with as many)"
              : ""));
    }
    return Rejoin(params, absl::StrCat("the run is at step ", latest), memory);
  }
  // The process this one displaced pushed part of step 0, which a fresh start would push
  // again (AGGREGATE cannot rejoin: it starts, and a part pushed twice is refused). One that
  // pushed nothing (it failed at another shard's handshake) leaves step 0 to this one.
  if (sync && ps_client_->displaced_another_process() && ps_client_->rank_pushed() &&
      !aggregates()) {
    return Rejoin(params,
                  absl::StrCat("took rank ", rank_, " over from another process (a "
                               "replacement, or a second process started with this rank)"),
                  memory);
  }
  TAMP_ASSIGN_OR_RETURN(const uint64_t step, ps_client_->PullWeights(Pulled()));
  TAMP_RETURN_IF_ERROR(CopyPulled(-1, params, memory));
  if (!sync && step != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the servers are at step ", step, "; a worker can only join a job at step 0"));
  }
  next_step_ = step;
  started_ = true;
  return step;
}

}  // namespace tamp
