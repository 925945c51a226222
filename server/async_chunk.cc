#include "server/async_chunk.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "protocol/keys.h"
#include "server/shard_state.h"

namespace tamp {

AsyncChunk::AsyncChunk(std::unique_ptr<ChunkCore> core, const config::RunConfig& config,
                       const Membership* membership)
    : ShardChunk(std::move(core)),
      config_(config),
      membership_(*membership),
      staleness_(config.consistency().mode() == config::Consistency::SSP
                     ? config.consistency().staleness()
                     : 0),
      worker_steps_(core_->num_workers, 0),
      // Every worker starts from the initial weights (and resets its view on a pull).
      views_(core_->num_workers, core_->weights) {
  CHECK_EQ(core_->rounds, 1) << "chunk " << core_->id << ": multi-round push codecs are SYNC-only";
}

void AsyncChunk::Push(uint32_t worker, uint64_t step, uint32_t round, absl::string_view payload,
                      RoundDoneCallback done) {
  std::vector<Answer> answers;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    // A refused push leaves a restored chunk following the workers as before.
    const bool resuming = core_->resuming;
    const uint64_t steps_before = worker_steps_[worker];
    const bool followed_before = resuming && followed_[worker];
    absl::Status status = resuming
                              ? FollowWorker(worker, step, membership_.KnownTotalSteps())
                              : absl::OkStatus();
    // The schedule's rate at the pushing worker's own step.
    if (status.ok()) status = Add(worker, step, round, payload, membership_.LearningRateAt(step));
    if (!status.ok() && resuming) {
      worker_steps_[worker] = steps_before;
      followed_[worker] = followed_before;
      core_->resuming = true;
    }
    if (!status.ok()) {
      Answer refused;
      refused.done = std::move(done);
      refused.status = std::move(status);
      answers.push_back(std::move(refused));
    } else {
      // This push, then any parked one it unblocked (it may have been the slowest's).
      parked_.push_back({worker, step, std::move(done)});
      ReleaseParked(&answers);
    }
  }
  // Outside the lock: a callback may take its time or push again.
  const std::string empty;
  for (Answer& answer : answers) {
    if (!answer.status.ok()) {
      answer.done(answer.status, nullptr);
      continue;
    }
    PushAnswer out;
    out.step = answer.step;
    out.update = core_->pull_buffers->Share(std::move(answer.update));
    out.aggregate = &empty;
    out.slowest_pushes = answer.slowest;
    answer.done(absl::OkStatus(), &out);
  }
}

absl::Status AsyncChunk::Add(uint32_t worker, uint64_t push_step, uint32_t push_round,
                             absl::string_view payload, float learning_rate) {
  ChunkCore& c = *core_;
  if (!c.closed.ok()) return c.closed;
  if (push_round != 0) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", c.id, " takes 1 round(s) per step, ",
                                                   "push was for round ", push_round));
  }
  if (push_step < worker_steps_[worker]) {
    return absl::AlreadyExistsError(absl::StrCat("worker ", worker, " already pushed chunk ", c.id,
                                                 " for step ", push_step));
  }
  if (push_step > worker_steps_[worker]) {
    return absl::FailedPreconditionError(
        absl::StrCat("chunk ", c.id, ": worker ", worker, " is at step ", worker_steps_[worker],
                     ", push was for step ", push_step));
  }
  const RandomKey key = PushKey(config_, push_step, c.id, worker);
  if (absl::Status status =
          c.PushCodecAt(push_step).DecodeAdd(payload, key, absl::MakeSpan(c.accumulator));
      !status.ok()) {
    std::fill(c.accumulator.begin(), c.accumulator.end(), 0.0f);  // Back to the state before.
    return absl::Status(status.code(), absl::StrCat("chunk ", c.id, " step ", push_step,
                                                    " worker ", worker, ": ", status.message()));
  }
  // One push's aggregate (the value itself, or its sign for vote codecs), as a mean over
  // the W workers so the learning rate means what it means in SYNC.
  c.PushCodecAt(push_step).FinishAggregate(1, absl::MakeSpan(c.accumulator));
  const float scale = 1.0f / static_cast<float>(worker_steps_.size());
  // NaN / Inf detection fused into the scaling pass (config.validation.nonfinite_policy).
  uint32_t bad = 0;
  for (float& value : c.accumulator) {
    value *= scale;
    bad |= ChunkCore::NonFinite(value);
  }
  const config::Validation::NonfinitePolicy policy = config_.validation().nonfinite_policy();
  if (bad != 0 && policy != config::Validation::ALLOW) {
    std::fill(c.accumulator.begin(), c.accumulator.end(), 0.0f);  // Back to the state before.
    const std::string what = absl::StrCat("chunk ", c.id, " step ", push_step, " worker ", worker,
                                          ": the push holds NaN or Inf");
    if (policy == config::Validation::REJECT) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "; validation.nonfinite_policy is REJECT"));
    }
    // SKIP: the worker's step advances, nothing is applied.
    ++c.nonfinite_skipped;
    ++worker_steps_[worker];
    LOG_EVERY_N(WARNING, 100) << what << "; skipped (validation.nonfinite_policy SKIP, "
                              << google::COUNTER << " so far on this server)";
    return absl::OkStatus();
  }
  c.optimizer->Apply(absl::MakeSpan(c.weights), c.accumulator, static_cast<int64_t>(c.step),
                     learning_rate);
  std::fill(c.accumulator.begin(), c.accumulator.end(), 0.0f);
  ++c.step;
  ++worker_steps_[worker];
  return absl::OkStatus();
}

bool AsyncChunk::MayAnswer(uint64_t push_step) const {
  if (staleness_ == 0) return true;
  return push_step < SlowestPushes() + staleness_;
}

// The others' counts are the checkpoint's, behind their real steps, and a worker that has
// finished would never raise its own.
uint64_t AsyncChunk::SlowestPushes() const {
  uint64_t slowest = std::numeric_limits<uint64_t>::max();
  for (size_t worker = 0; worker < worker_steps_.size(); ++worker) {
    if (!core_->resuming || followed_[worker]) slowest = std::min(slowest, worker_steps_[worker]);
  }
  return slowest == std::numeric_limits<uint64_t>::max() ? 0 : slowest;
}

// The pushes between the checkpoint and a worker's first push since were applied only by the
// lost server. Once every worker has pushed, the chunk is in step with them again.
absl::Status AsyncChunk::FollowWorker(uint32_t worker, uint64_t push_step, uint64_t run_end) {
  const uint32_t id = core_->id;
  if (run_end != 0 && push_step >= run_end) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", id, ": push for step ", push_step,
                                                   ", past the run's last step ", run_end - 1));
  }
  if (followed_[worker]) return absl::OkStatus();
  if (push_step < worker_steps_[worker]) {
    return absl::OutOfRangeError(absl::StrCat(
        "chunk ", id, " resumed from a checkpoint at worker ", worker, "'s step ",
        worker_steps_[worker], "; step ", push_step,
        " is behind it: pull the chunk's weights and go on with the next step"));
  }
  worker_steps_[worker] = push_step;
  followed_[worker] = true;
  core_->resuming =
      !std::all_of(followed_.begin(), followed_.end(), [](bool seen) { return seen; });
  return absl::OkStatus();
}

// Keyed by the push step, as the worker decodes it; whatever the codec drops is sent with a
// later answer.
absl::Status AsyncChunk::AnswerFor(uint32_t worker, uint64_t push_step, std::string* payload) {
  ChunkCore& c = *core_;
  std::vector<float>& view = views_[worker];
  for (size_t i = 0; i < c.update.size(); ++i) c.update[i] = c.weights[i] - view[i];
  const RandomKey key = PullKey(config_, push_step, c.id);
  TAMP_RETURN_IF_ERROR(c.pull_codec->Encode(c.update, key, payload));
  return c.pull_codec->DecodeAdd(*payload, key, absl::MakeSpan(view));
}

void AsyncChunk::ReleaseParked(std::vector<Answer>* out) {
  std::vector<Parked> still;
  for (Parked& push : parked_) {
    if (!MayAnswer(push.step)) {
      still.push_back(std::move(push));
      continue;
    }
    Answer answer;
    answer.done = std::move(push.done);
    answer.update = core_->pull_buffers->Take();
    answer.status = AnswerFor(push.worker, push.step, &answer.update);
    answer.step = push.step + 1;
    answer.slowest = SlowestPushes();
    out->push_back(std::move(answer));
  }
  parked_ = std::move(still);
}

uint64_t AsyncChunk::Pull(uint32_t worker, PullKind /*kind*/, std::string* values) {
  std::lock_guard<std::mutex> lock(core_->mu);
  *values = FloatBytes(core_->weights);
  views_[worker] = core_->weights;  // The worker now holds exactly these.
  return worker_steps_[worker];
}

void AsyncChunk::Close(const absl::Status& reason) {
  std::vector<RoundDoneCallback> parked;
  {
    std::lock_guard<std::mutex> lock(core_->mu);
    core_->closed = reason;
    for (Parked& push : parked_) parked.push_back(std::move(push.done));
    parked_.clear();
  }
  for (RoundDoneCallback& callback : parked) callback(reason, nullptr);
}

// Each worker's count too. Not the views: every worker resyncs with a restarted server before
// it pushes there (the incarnation check), which resets its view to the weights; nor the
// parked SSP pushes: their workers push them again.
void AsyncChunk::Export(checkpoint::ChunkState* out) const {
  std::lock_guard<std::mutex> lock(core_->mu);
  ExportCore(*core_, out);
  for (uint64_t steps : worker_steps_) out->add_worker_steps(steps);
}

absl::Status AsyncChunk::CheckRestore(const checkpoint::ChunkState& saved) const {
  std::lock_guard<std::mutex> lock(core_->mu);
  return CheckCore(*core_, saved, worker_steps_.size());
}

void AsyncChunk::Restore(const checkpoint::ChunkState& saved) {
  std::lock_guard<std::mutex> lock(core_->mu);
  RestoreCore(saved, core_.get());
  worker_steps_.assign(saved.worker_steps().begin(), saved.worker_steps().end());
  for (std::vector<float>& view : views_) view = core_->weights;
  followed_.assign(worker_steps_.size(), false);
}

void AsyncChunk::SetWeights(absl::string_view bytes) {
  std::lock_guard<std::mutex> lock(core_->mu);
  std::memcpy(core_->weights.data(), bytes.data(), bytes.size());
  for (std::vector<float>& view : views_) view = core_->weights;
}

ChunkSnapshot AsyncChunk::Snapshot() const {
  std::lock_guard<std::mutex> lock(core_->mu);
  ChunkSnapshot snapshot = CoreSnapshot();
  snapshot.worker_steps = worker_steps_;
  snapshot.views = views_;
  // No barrier: nobody has arrived.
  snapshot.arrived.assign(worker_steps_.size(), false);
  return snapshot;
}

}  // namespace tamp
