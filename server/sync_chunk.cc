#include "server/sync_chunk.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "protocol/chunk_update.h"
#include "protocol/keys.h"
#include "server/shard_state.h"

namespace tamp {

SyncChunk::SyncChunk(std::unique_ptr<ChunkCore> core, const config::RunConfig& config,
                     Membership* membership)
    : ShardChunk(std::move(core)), config_(config), membership_(*membership) {
  // The last round of a multi-round codec aggregates from a smaller accumulator into a
  // buffer of its own; a single-round codec aggregates in the accumulator itself.
  if (core_->rounds > 1) aggregate_.resize(core_->weights.size());
  arrived_.assign(core_->num_workers, false);
}

void SyncChunk::Push(uint32_t worker, uint64_t step, uint32_t round, absl::string_view payload,
                     RoundDoneCallback done) {
  Completion completion;
  Completion superseded;  // Of a restored chunk (FollowWorkers).
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    absl::Status status =
        core_->closed.ok() ? membership_.CheckMember(worker, step) : core_->closed;
    if (status.ok() && core_->resuming) {
      status = FollowWorkers(step, membership_.KnownTotalSteps(), &superseded);
    }
    if (status.ok()) status = Add(worker, step, round, payload);
    if (status.ok()) {
      pending_.push_back(std::move(done));
      // Else answered by the last live worker's push.
      if (BarrierComplete()) completion = Finish();
    } else {
      completion.callbacks.push_back(std::move(done));
      completion.status = std::move(status);
    }
  }
  Deliver(superseded);
  Deliver(completion);
}

absl::Status SyncChunk::Add(uint32_t worker, uint64_t push_step, uint32_t push_round,
                            absl::string_view payload) {
  ChunkCore& c = *core_;
  const uint32_t id = c.id;
  if (!c.closed.ok()) return c.closed;
  const std::string at = RoundLabel(round_);
  if (push_round >= static_cast<uint32_t>(c.rounds)) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", id, " takes ", c.rounds,
                                                   " round(s) per step, push was for round ",
                                                   push_round));
  }
  if (push_step != c.step || push_round != round_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "chunk ", id, " is at step ", c.step, at, ", push was for step ", push_step,
        RoundLabel(push_round)));
  }
  if (arrived_[worker]) {
    return absl::AlreadyExistsError(absl::StrCat("worker ", worker, " already pushed chunk ", id,
                                                 " for step ", c.step, at));
  }
  // The codec contract: a bad payload is rejected before the accumulator is touched.
  const RandomKey key = PushKey(config_, c.step, id, worker);
  const config::Validation::NonfinitePolicy policy = config_.validation().nonfinite_policy();
  bool finite = true;
  if (absl::Status status =
          policy == config::Validation::ALLOW
              ? c.PushCodecAt(c.step).DecodeAddRound(static_cast<int>(round_), payload, key,
                                                     absl::MakeSpan(c.accumulator))
              : DecodeAddFinite(c.step, payload, key, &finite);
      !status.ok()) {
    return absl::Status(status.code(), absl::StrCat("chunk ", id, " step ", c.step, at, " worker ",
                                                    worker, ": ", status.message()));
  }
  if (policy == config::Validation::ALLOW) sums_sparse_ = false;  // Added where, unknown.
  if (!finite) {
    const std::string what = absl::StrCat("chunk ", id, " step ", c.step, at, " worker ", worker,
                                          ": the push holds NaN or Inf (or overflows the sum)");
    if (policy == config::Validation::REJECT) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "; validation.nonfinite_policy is REJECT"));
    }
    ++c.nonfinite_skipped;  // SKIP: arrived, with a zero contribution.
    LOG_EVERY_N(WARNING, 100) << what << "; skipped (validation.nonfinite_policy SKIP, "
                              << google::COUNTER << " so far on this server)";
  }
  arrived_[worker] = true;
  if (num_arrived_++ == 0) barrier_start_ = std::chrono::steady_clock::now();
  return absl::OkStatus();
}

// Codecs that decode sparse (topk, dgc, threshold): check the k sums, then add them, O(k).
// The accumulator never holds -0 (it starts at +0, and +0 + -0 is +0), so the entries the
// payload skips need no check: their sums are the finite accumulator itself. Other codecs:
// DecodeRound() into `scratch_`, then one pass forms accumulator + scratch in `scratch_`
// while OR-ing an exponent-all-ones test, and a finite result is swapped in (O(1)): the work
// of DecodeAddRound, with the check fused into the add. A bad payload is an error, as with
// DecodeAddRound.
absl::Status SyncChunk::DecodeAddFinite(uint64_t push_step, absl::string_view payload,
                                        const RandomKey& key, bool* finite) {
  std::vector<float>& accumulator = core_->accumulator;
  const compress::Codec& codec = core_->PushCodecAt(push_step);
  uint32_t bad = 0;
  TAMP_ASSIGN_OR_RETURN(const bool sparse, codec.DecodeSparse(payload, key, &pushed_));
  if (sparse) {
    for (size_t j = 0; j < pushed_.indices.size(); ++j) {
      bad |= ChunkCore::NonFinite(accumulator[pushed_.indices[j]] + pushed_.values[j]);
    }
    *finite = bad == 0;
    if (*finite) {
      compress::AddSparseEntries(pushed_, absl::MakeSpan(accumulator));
      if (sums_sparse_) {
        touched_.insert(touched_.end(), pushed_.indices.begin(), pushed_.indices.end());
      }
    }
    return absl::OkStatus();
  }
  scratch_.resize(accumulator.size());
  TAMP_RETURN_IF_ERROR(
      codec.DecodeRound(static_cast<int>(round_), payload, key, absl::MakeSpan(scratch_)));
  for (size_t i = 0; i < scratch_.size(); ++i) {
    const float sum = accumulator[i] + scratch_[i];
    scratch_[i] = sum;
    bad |= ChunkCore::NonFinite(sum);
  }
  *finite = bad == 0;
  if (*finite) {
    accumulator.swap(scratch_);
    sums_sparse_ = false;
  }
  return absl::OkStatus();
}

bool SyncChunk::BarrierComplete() const {
  if (num_arrived_ == 0 || !core_->closed.ok()) return false;
  return membership_.AllLiveArrived(arrived_, core_->step);
}

SyncChunk::Completion SyncChunk::Finish() {
  return static_cast<int>(round_) + 1 < core_->rounds
             ? FinishRound()
             : FinishStep(membership_.LearningRateAt(core_->step));
}

// Once every live worker has pushed a round before the last (multi-round push codecs): the
// codec's answer to the round over the workers that pushed it, then on to the next round.
SyncChunk::Completion SyncChunk::FinishRound() {
  ChunkCore& c = *core_;
  Completion done;
  c.PushCodecAt(c.step).FinishRound(static_cast<int>(round_), static_cast<int>(num_arrived_),
                                    absl::MakeSpan(c.accumulator), PullKey(config_, c.step, c.id),
                                    &done.aggregate, {});
  done.step = c.step;
  done.last_round = false;
  StartRound(round_ + 1);
  done.callbacks = std::move(pending_);
  pending_.clear();
  return done;
}

// The last round, over the workers that pushed it: fewer than num_workers once some were
// dropped. A single-round codec aggregates in the accumulator itself (aggregate_ is empty):
// over the entries sparse pushes touched alone while sums_sparse_.
absl::Span<const float> SyncChunk::AggregateGradient(std::string* answer) {
  ChunkCore& c = *core_;
  if (sums_sparse_) {
    GatherSparseAggregate(absl::MakeSpan(c.accumulator), touched_, c.PushCodecAt(c.step),
                          static_cast<int>(num_arrived_), &gathered_);
    // Back where it was: the mean, zero elsewhere, as FinishRound() would leave it.
    for (size_t j = 0; j < gathered_.indices.size(); ++j) {
      c.accumulator[gathered_.indices[j]] = gathered_.values[j];
    }
    answer->clear();
    return c.accumulator;
  }
  const absl::Span<float> aggregate =
      aggregate_.empty() ? absl::MakeSpan(c.accumulator) : absl::MakeSpan(aggregate_);
  c.PushCodecAt(c.step).FinishRound(static_cast<int>(round_), static_cast<int>(num_arrived_),
                                    absl::MakeSpan(c.accumulator), PullKey(config_, c.step, c.id),
                                    answer, aggregate);
  return aggregate;
}

// Mean gradient, optimizer step at `learning_rate` (the schedule's rate for this step),
// update through the pull codec and residual; then resets for the next step.
SyncChunk::Completion SyncChunk::FinishStep(float learning_rate) {
  ChunkCore& c = *core_;
  Completion done;
  done.update = c.pull_buffers->Take();
  // Encoding a well-sized buffer fails only on a codec bug. The weights have moved either
  // way, so the step still counts; workers that get the error must resync (PullWeights).
  // server.mode AGGREGATE answers the mean gradient itself; the weights stay.
  const bool aggregates = config_.server().mode() == config::Server::AGGREGATE;
  Optimizer* const optimizer = aggregates ? nullptr : c.optimizer.get();
  if (sums_sparse_ && SparseUpdateApplies(optimizer, *c.pull_feedback)) {
    // Few sums: the answer from them alone, leaving the accumulator zero for StartRound().
    GatherSparseAggregate(absl::MakeSpan(c.accumulator), touched_, c.PushCodecAt(c.step),
                          static_cast<int>(num_arrived_), &gathered_);
    touched_.clear();
    done.status = UpdateChunkSparse(optimizer, absl::MakeSpan(c.weights), gathered_,
                                    learning_rate, *c.pull_feedback, *c.pull_codec,
                                    PullKey(config_, c.step, c.id), &done.update);
  } else {
    const absl::Span<const float> gradient = AggregateGradient(&done.aggregate);
    done.status =
        aggregates
            ? c.pull_feedback->Compress(*c.pull_codec, gradient, PullKey(config_, c.step, c.id),
                                        &done.update)
            : UpdateChunk(*c.optimizer, absl::MakeSpan(c.weights), gradient,
                          static_cast<int64_t>(c.step), learning_rate, *c.pull_feedback,
                          *c.pull_codec, PullKey(config_, c.step, c.id),
                          absl::MakeSpan(c.update), &done.update);
  }
  ++c.step;
  done.step = c.step;
  c.resuming = false;  // In step with the workers again.
  StartRound(0);
  done.callbacks = std::move(pending_);
  pending_.clear();
  return done;
}

std::string SyncChunk::RoundLabel(uint32_t round) const {
  // Single-round codecs keep their messages without rounds.
  return core_->rounds == 1 ? "" : absl::StrCat(" round ", round);
}

void SyncChunk::StartRound(uint32_t round) {
  round_ = round;
  std::vector<float>& accumulator = core_->accumulator;
  const size_t values = core_->push_codec->RoundValues(static_cast<int>(round));
  if (sums_sparse_ && accumulator.size() == values) {
    for (const size_t i : touched_) accumulator[i] = 0.0f;  // Zero elsewhere already.
  } else {
    accumulator.assign(values, 0.0f);
  }
  touched_.clear();
  // Only a single-round codec's step is one aggregation that a sparse update can take.
  sums_sparse_ = core_->rounds == 1;
  std::fill(arrived_.begin(), arrived_.end(), false);
  num_arrived_ = 0;
}

// A chunk restored from a checkpoint (at its step c) joins the workers at the highest step
// any of them pushes it, s >= c: the steps in between are lost (their gradients were applied
// only by the lost server). Nothing gathered before the restore is applied twice: the restored
// state holds only steps < c. A push of a step at or past `run_end` (the run's total_steps;
// 0: not known yet) is refused INVALID_ARGUMENT: no worker pushes it.
absl::Status SyncChunk::FollowWorkers(uint64_t push_step, uint64_t run_end,
                                      Completion* superseded) {
  ChunkCore& c = *core_;
  if (run_end != 0 && push_step >= run_end) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", c.id, ": push for step ", push_step,
                                                   ", past the run's last step ", run_end - 1));
  }
  const auto behind = [&](uint64_t pushed) {
    return absl::OutOfRangeError(absl::StrCat(
        "chunk ", c.id, " resumed from a checkpoint and follows the workers at step ",
        std::max(c.step, push_step), "; step ", pushed,
        " is behind it: pull the chunk's weights and go on with the next step"));
  };
  if (push_step < c.step) return behind(push_step);
  if (push_step == c.step) return absl::OkStatus();
  if (!pending_.empty()) {
    superseded->status = behind(c.step);
    superseded->callbacks = std::move(pending_);
    pending_.clear();
  }
  c.step = push_step;
  StartRound(0);
  return absl::OkStatus();
}

void SyncChunk::Deliver(Completion& completion) {
  if (completion.callbacks.empty()) return;  // A push that waits for the others'.
  PushAnswer answer;
  answer.step = completion.step;
  answer.last_round = completion.last_round;
  if (completion.status.ok()) {
    answer.update = core_->pull_buffers->Share(std::move(completion.update));
  }
  answer.aggregate = &completion.aggregate;
  for (RoundDoneCallback& callback : completion.callbacks) {
    callback(completion.status, completion.status.ok() ? &answer : nullptr);
  }
}

bool SyncChunk::ExpireWait(std::chrono::steady_clock::time_point now,
                           std::chrono::milliseconds timeout, uint32_t rank) {
  std::lock_guard<std::mutex> lock(core_->mu);
  if (num_arrived_ == 0 || !core_->closed.ok()) return false;
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - barrier_start_);
  if (waited < timeout) return false;
  const std::vector<uint32_t> dropped =
      membership_.DropMissing(arrived_, core_->step, waited.count());
  for (const uint32_t worker : dropped) {
    LOG(WARNING) << "server " << rank << ": dropped worker " << worker
                 << " from the barrier: chunk " << core_->id << " waited " << waited.count()
                 << " ms for its push of step " << core_->step
                 << RoundLabel(round_)
                 << " (consistency.worker_timeout_ms " << timeout.count()
                 << "); steps go on without it until it rejoins";
  }
  return !dropped.empty();
}

void SyncChunk::CompleteIfDone() {
  Completion completion;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    SkipStepsNoOneTakes();
    if (!BarrierComplete()) return;
    completion = Finish();
  }
  Deliver(completion);
}

void SyncChunk::SkipStepsNoOneTakes() {
  if (num_arrived_ != 0 || round_ != 0) return;
  const uint64_t first_live = membership_.FirstLiveStep();
  // Every worker dropped: nobody to wait for or to skip to.
  if (first_live == std::numeric_limits<uint64_t>::max() || first_live <= core_->step) return;
  // As FollowWorkers(): the weights stand, nothing is applied for the steps skipped.
  core_->step = first_live;
}

bool SyncChunk::HoldsPushOf(uint32_t worker) const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return round_ != 0 || (worker < arrived_.size() && arrived_[worker]);
}

absl::Status SyncChunk::CheckRejoinHeld(uint32_t worker, uint64_t step, uint32_t rank) const {
  const ChunkCore& c = *core_;
  if (c.step > step || (c.step == step && (round_ != 0 || arrived_[worker]))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker, " cannot rejoin at step ", step, " on server ", rank, ": chunk ", c.id,
        " is at step ", c.step, RoundLabel(round_),
        "; rejoin at a later step"));
  }
  return absl::OkStatus();
}

uint64_t SyncChunk::Pull(uint32_t /*worker*/, PullKind kind, std::string* values) {
  std::lock_guard<std::mutex> lock(core_->mu);
  if (kind == PullKind::kExact) {
    // In SYNC every worker pulls exact weights at the same step boundary (start and every
    // resync_steps), before pushing that step, so no step completes meanwhile. The replicas
    // are about to equal the weights exactly: what the pull residual still owed them is
    // delivered, and keeping it would deliver it a second time with later updates.
    *values = FloatBytes(core_->weights);
    core_->pull_feedback->Reset();
  } else {
    // The others hold the weights less what the pull residual has not sent them yet.
    std::vector<float> replica = core_->weights;
    const absl::Span<const float> owed = core_->pull_feedback->residual();
    for (size_t i = 0; i < owed.size(); ++i) replica[i] -= owed[i];
    *values = FloatBytes(replica);
  }
  return core_->step;
}

void SyncChunk::Close(const absl::Status& reason) {
  std::vector<RoundDoneCallback> parked;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->closed = reason;
    parked = std::move(pending_);
    pending_.clear();
  }
  for (RoundDoneCallback& callback : parked) callback(reason, nullptr);
}

void SyncChunk::Export(checkpoint::ChunkState* out) const {
  std::lock_guard<std::mutex> lock(core_->mu);
  ExportCore(*core_, out);
}

absl::Status SyncChunk::CheckRestore(const checkpoint::ChunkState& saved) const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return CheckCore(*core_, saved, /*worker_steps=*/0);
}

void SyncChunk::Restore(const checkpoint::ChunkState& saved) {
  std::lock_guard<std::mutex> lock(core_->mu);
  RestoreCore(saved, core_.get());
  StartRound(0);
}

void SyncChunk::SetWeights(absl::string_view bytes) {
  std::lock_guard<std::mutex> lock(core_->mu);
  std::memcpy(core_->weights.data(), bytes.data(), bytes.size());
}

ChunkSnapshot SyncChunk::Snapshot() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  ChunkSnapshot snapshot = CoreSnapshot();
  snapshot.round = round_;
  snapshot.arrived = arrived_;
  return snapshot;
}

}  // namespace tamp
