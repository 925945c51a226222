#include "server/shard.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "common/model_layout.h"
#include "common/status_macros.h"
#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "compress/ratio_warmup.h"
#include "compress/registry.h"
#include "glog/logging.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

// PullWeights sends weights as raw host floats; the wire format says little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Tamp needs a little-endian host");

namespace tamp {

struct Shard::ChunkState {
  // The answer to every push of one completed round (a step, for single-round codecs);
  // delivered after the lock is released.
  struct Completion {
    std::vector<RoundDoneCallback> callbacks;
    absl::Status status;
    std::string update;     // Empty before the last round.
    std::string aggregate;  // The push codec's answer (multi-round codecs).
    uint64_t step = 0;
    bool last_round = true;
  };

  // Validates one push and adds it to the accumulator. On error nothing has changed.
  // Requires mu.
  absl::Status Add(const config::RunConfig& config, uint32_t worker, uint64_t push_step,
                   uint32_t push_round, absl::string_view payload) {
    if (!closed.ok()) return closed;
    // Single-round codecs keep their messages without rounds.
    const std::string at = rounds == 1 ? "" : absl::StrCat(" round ", round);
    if (push_round >= static_cast<uint32_t>(rounds)) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", id, " takes ", rounds,
                                                     " round(s) per step, push was for round ",
                                                     push_round));
    }
    if (push_step != step || push_round != round) {
      return absl::FailedPreconditionError(absl::StrCat(
          "chunk ", id, " is at step ", step, at, ", push was for step ", push_step,
          rounds == 1 ? "" : absl::StrCat(" round ", push_round)));
    }
    if (arrived[worker]) {
      return absl::AlreadyExistsError(absl::StrCat("worker ", worker, " already pushed chunk ", id,
                                                   " for step ", step, at));
    }
    // The codec contract: a bad payload is rejected before the accumulator is touched.
    const RandomKey key = PushKey(config, step, id, worker);
    const config::Validation::NonfinitePolicy policy = config.validation().nonfinite_policy();
    bool finite = true;
    if (absl::Status status =
            policy == config::Validation::ALLOW
                ? (rounds == 1
                       ? PushCodecAt(step).DecodeAdd(payload, key, absl::MakeSpan(accumulator))
                       : push_codec->DecodeAddRound(round, payload, key,
                                                    absl::MakeSpan(accumulator)))
                : DecodeAddFinite(step, payload, key, &finite);
        !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("chunk ", id, " step ", step, at, " worker ",
                                                      worker, ": ", status.message()));
    }
    if (!finite) {
      const std::string what = absl::StrCat("chunk ", id, " step ", step, at, " worker ", worker,
                                            ": the push holds NaN or Inf (or overflows the sum)");
      if (policy == config::Validation::REJECT) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, "; validation.nonfinite_policy is REJECT"));
      }
      ++nonfinite_skipped;  // SKIP: arrived, with a zero contribution.
      LOG_EVERY_N(WARNING, 100) << what << "; skipped (validation.nonfinite_policy SKIP, "
                                << google::COUNTER << " so far on this server)";
    }
    arrived[worker] = true;
    ++num_arrived;
    return absl::OkStatus();
  }

  // accumulator += decode(payload), but only if every sum is finite (NaN / Inf detection for
  // nonfinite_policy REJECT and SKIP). Single-round codecs: Decode() into `scratch`, then one
  // pass forms accumulator + scratch in `scratch` while OR-ing an exponent-all-ones test, and
  // a finite result is swapped in (O(1)). That is the work of the default DecodeAdd (decode
  // to a buffer, add), with the check fused into the add, so there is no second pass; it also
  // catches finite pushes whose sum overflows. Sparse codecs whose DecodeAdd scatters pay a
  // dense add instead. Multi-round codecs: copy the (small) round accumulator, DecodeAddRound
  // into it, check. *finite false: the accumulator is untouched. A bad payload is an error,
  // as with DecodeAdd. Requires mu.
  absl::Status DecodeAddFinite(uint64_t push_step, absl::string_view payload,
                               const RandomKey& key, bool* finite) {
    scratch.resize(accumulator.size());
    uint32_t bad = 0;
    if (rounds == 1) {
      TAMP_RETURN_IF_ERROR(PushCodecAt(push_step).Decode(payload, key, absl::MakeSpan(scratch)));
      for (size_t i = 0; i < scratch.size(); ++i) {
        const float sum = accumulator[i] + scratch[i];
        scratch[i] = sum;
        bad |= NonFinite(sum);
      }
    } else {
      std::copy(accumulator.begin(), accumulator.end(), scratch.begin());
      TAMP_RETURN_IF_ERROR(
          push_codec->DecodeAddRound(round, payload, key, absl::MakeSpan(scratch)));
      for (const float value : scratch) bad |= NonFinite(value);
    }
    *finite = bad == 0;
    if (*finite) accumulator.swap(scratch);
    return absl::OkStatus();
  }
  // 1 for NaN and +-Inf (exponent bits all ones), else 0; branch-free so loops vectorise.
  static uint32_t NonFinite(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    return static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }

  // Once every worker has pushed a round before the last (multi-round push codecs): the
  // codec's answer to the round, then on to the next round; hands back the parked callbacks.
  // Requires mu.
  Completion FinishRound(const config::RunConfig& config) {
    Completion done;
    push_codec->FinishRound(static_cast<int>(round), static_cast<int>(arrived.size()),
                            absl::MakeSpan(accumulator), PullKey(config, step, id), &done.aggregate,
                            {});
    done.step = step;
    done.last_round = false;
    ++round;
    accumulator.assign(push_codec->RoundValues(static_cast<int>(round)), 0.0f);
    std::fill(arrived.begin(), arrived.end(), false);
    num_arrived = 0;
    done.callbacks = std::move(pending);
    pending.clear();
    return done;
  }

  // The gradient the optimizer applies once every worker has pushed the step's last round:
  // the accumulator turned into the mean (or vote), or a multi-round codec's aggregate, whose
  // answer goes to *answer. Requires mu.
  absl::Span<const float> AggregateGradient(const config::RunConfig& config, std::string* answer) {
    const int contributors = static_cast<int>(arrived.size());
    if (rounds == 1) {
      PushCodecAt(step).FinishAggregate(contributors, absl::MakeSpan(accumulator));
      return accumulator;
    }
    push_codec->FinishRound(static_cast<int>(round), contributors, absl::MakeSpan(accumulator),
                            PullKey(config, step, id), answer, absl::MakeSpan(aggregate));
    return aggregate;
  }

  // Once every worker has pushed: mean gradient, optimizer step at `learning_rate` (the
  // schedule's rate for this step), update through the pull codec and residual; then resets
  // for the next step and hands back the parked callbacks. Requires mu.
  Completion FinishStep(const config::RunConfig& config, float learning_rate) {
    Completion done;
    const absl::Span<const float> gradient = AggregateGradient(config, &done.aggregate);
    update = weights;  // w_old
    optimizer->Apply(absl::MakeSpan(weights), gradient, static_cast<int64_t>(step),
                     learning_rate);
    for (size_t i = 0; i < update.size(); ++i) update[i] = weights[i] - update[i];

    // Encoding a well-sized buffer fails only on a codec bug. The weights have moved either
    // way, so the step still counts; workers that get the error must resync (PullWeights).
    done.status =
        pull_feedback->Compress(*pull_codec, update, PullKey(config, step, id), &done.update);
    ++step;
    done.step = step;
    round = 0;
    accumulator.resize(push_codec->RoundValues(0));  // A no-op for single-round codecs.
    std::fill(accumulator.begin(), accumulator.end(), 0.0f);
    std::fill(arrived.begin(), arrived.end(), false);
    num_arrived = 0;
    done.callbacks = std::move(pending);
    pending.clear();
    return done;
  }

  // ---- ASYNC / SSP (config.consistency; see shard.h) ----

  // Validates worker `worker`'s push for its step `push_step` and applies it at once:
  // decode, the codec's one-push aggregate scaled by 1 / num_workers, optimizer at
  // `learning_rate`. On error nothing has changed. Requires mu.
  absl::Status AddAsync(const config::RunConfig& config, uint32_t worker, uint64_t push_step,
                        uint32_t push_round, absl::string_view payload, float learning_rate) {
    if (!closed.ok()) return closed;
    if (push_round != 0) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", id, " takes 1 round(s) per step, ",
                                                     "push was for round ", push_round));
    }
    if (push_step < worker_steps[worker]) {
      return absl::AlreadyExistsError(absl::StrCat("worker ", worker, " already pushed chunk ", id,
                                                   " for step ", push_step));
    }
    if (push_step > worker_steps[worker]) {
      return absl::FailedPreconditionError(
          absl::StrCat("chunk ", id, ": worker ", worker, " is at step ", worker_steps[worker],
                       ", push was for step ", push_step));
    }
    const RandomKey key = PushKey(config, push_step, id, worker);
    if (absl::Status status =
            PushCodecAt(push_step).DecodeAdd(payload, key, absl::MakeSpan(accumulator));
        !status.ok()) {
      std::fill(accumulator.begin(), accumulator.end(), 0.0f);  // Back to the state before.
      return absl::Status(status.code(), absl::StrCat("chunk ", id, " step ", push_step,
                                                      " worker ", worker, ": ", status.message()));
    }
    // One push's aggregate (the value itself, or its sign for vote codecs), as a mean over
    // the W workers so the learning rate means what it means in SYNC.
    PushCodecAt(push_step).FinishAggregate(1, absl::MakeSpan(accumulator));
    const float scale = 1.0f / static_cast<float>(worker_steps.size());
    // NaN / Inf detection fused into the scaling pass (config.validation.nonfinite_policy).
    uint32_t bad = 0;
    for (float& value : accumulator) {
      value *= scale;
      bad |= NonFinite(value);
    }
    const config::Validation::NonfinitePolicy policy = config.validation().nonfinite_policy();
    if (bad != 0 && policy != config::Validation::ALLOW) {
      std::fill(accumulator.begin(), accumulator.end(), 0.0f);  // Back to the state before.
      const std::string what = absl::StrCat("chunk ", id, " step ", push_step, " worker ", worker,
                                            ": the push holds NaN or Inf");
      if (policy == config::Validation::REJECT) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, "; validation.nonfinite_policy is REJECT"));
      }
      // SKIP: the worker's step advances, nothing is applied.
      ++nonfinite_skipped;
      ++worker_steps[worker];
      LOG_EVERY_N(WARNING, 100) << what << "; skipped (validation.nonfinite_policy SKIP, "
                                << google::COUNTER << " so far on this server)";
      return absl::OkStatus();
    }
    optimizer->Apply(absl::MakeSpan(weights), accumulator, static_cast<int64_t>(step),
                     learning_rate);
    std::fill(accumulator.begin(), accumulator.end(), 0.0f);
    ++step;
    ++worker_steps[worker];
    return absl::OkStatus();
  }

  // SSP: a push for step s may be answered once every worker has pushed step s - staleness,
  // i.e. s < min(worker_steps) + staleness. ASYNC: always. Requires mu.
  bool MayAnswer(uint64_t push_step) const {
    if (staleness == 0) return true;
    return push_step < SlowestPushes() + staleness;
  }
  uint64_t SlowestPushes() const {
    return *std::min_element(worker_steps.begin(), worker_steps.end());
  }

  // The answer to worker `worker`'s push of step `push_step`: encode(w - view) through the
  // pull codec (keyed by the push step, as the worker decodes it), and view += decode(that),
  // so whatever the codec drops is sent with a later answer. Requires mu.
  absl::Status AnswerAsync(const config::RunConfig& config, uint32_t worker, uint64_t push_step,
                           std::string* payload) {
    std::vector<float>& view = views[worker];
    for (size_t i = 0; i < update.size(); ++i) update[i] = weights[i] - view[i];
    const RandomKey key = PullKey(config, push_step, id);
    TAMP_RETURN_IF_ERROR(pull_codec->Encode(update, key, payload));
    return pull_codec->DecodeAdd(*payload, key, absl::MakeSpan(view));
  }

  // A push answered later (SSP), with what its answer needs.
  struct Parked {
    uint32_t worker;
    uint64_t step;
    RoundDoneCallback done;
  };
  // One formed answer of ASYNC/SSP, delivered after the lock is released.
  struct AsyncAnswer {
    RoundDoneCallback done;
    absl::Status status;
    std::string update;
    uint64_t step = 0;
    uint64_t slowest = 0;
  };
  // Forms the answer of every parked push that may now be answered, in push order.
  // Requires mu.
  void ReleaseParked(const config::RunConfig& config, std::vector<AsyncAnswer>* out) {
    std::vector<Parked> still;
    for (Parked& push : parked) {
      if (!MayAnswer(push.step)) {
        still.push_back(std::move(push));
        continue;
      }
      AsyncAnswer answer;
      answer.done = std::move(push.done);
      answer.status = AnswerAsync(config, push.worker, push.step, &answer.update);
      answer.step = push.step + 1;
      answer.slowest = SlowestPushes();
      out->push_back(std::move(answer));
    }
    parked = std::move(still);
  }

  uint32_t id = 0;

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built for ThreadSanitizer,
  // which then cannot see absl::Mutex and reports every access below as a race.
  mutable std::mutex mu;
  // Everything below is guarded by mu.
  uint64_t step = 0;  // Steps completed.
  std::vector<float> weights;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<compress::Codec> push_codec;
  // Sparsity warm-up (compress/ratio_warmup.h): the push codecs of the first epochs; null
  // without ratio_warmup. Then steps_per_epoch points at the shard's, which pushes may read
  // once CheckScheduleReady() has seen the run's length fixed.
  std::unique_ptr<compress::RatioWarmup> push_warmup;
  const uint64_t* steps_per_epoch = nullptr;
  // The push codec that encoded step `at`: push_codec, or a warm-up codec during warm-up.
  compress::Codec& PushCodecAt(uint64_t at) {
    return push_warmup == nullptr ? *push_codec
                                  : push_warmup->CodecFor(at / *steps_per_epoch, *push_codec);
  }
  int rounds = 1;                  // push_codec->rounds(), fixed.
  uint32_t round = 0;              // Of the step in progress.
  std::vector<float> accumulator;  // Sum of this round's decoded pushes.
  std::vector<float> aggregate;    // Multi-round codecs: the last round's gradient (n values).
  std::vector<bool> arrived;       // By worker, this round.
  uint32_t num_arrived = 0;
  std::vector<RoundDoneCallback> pending;  // Of this round's accepted pushes.
  std::unique_ptr<compress::Codec> pull_codec;
  std::unique_ptr<compress::ErrorFeedback> pull_feedback;
  std::vector<float> update;  // Scratch: w_old, then w_new - w_old.
  std::vector<float> scratch;  // DecodeAddFinite(): the next accumulator.
  uint64_t nonfinite_skipped = 0;  // Pushes skipped by nonfinite_policy SKIP.
  absl::Status closed;        // Not OK once Close() ran.
  // ASYNC / SSP only (empty in SYNC). `step` above counts applied pushes there.
  bool async = false;
  uint64_t staleness = 0;                 // SSP's tau; 0 for ASYNC (no bound).
  std::vector<uint64_t> worker_steps;     // By worker: its pushes applied (its next step).
  std::vector<std::vector<float>> views;  // By worker: the weights that worker holds.
  std::vector<Parked> parked;             // SSP: accepted pushes not answered yet.
};

namespace {

// Prefixes a chunk's name to an error about it: "chunk 3 (fc1.weight): ...".
absl::Status AboutChunk(const JobLayout& layout, uint32_t id, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("chunk ", id, " (", layout.tensor_of(layout.chunks[id]).name,
                                   "): ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Shard::ChunkState>> Shard::NewChunk(uint32_t id) const {
  const ChunkPlan& plan = layout_.chunks[id];
  const size_t n = plan.chunk.length;
  auto chunk = std::make_unique<ChunkState>();
  chunk->id = id;
  TAMP_ASSIGN_OR_RETURN(chunk->optimizer, CreateOptimizer(config_.optimizer(), n));
  // Codecs that view a chunk as a matrix see its rows in the tensor, as the workers' do.
  const compress::ChunkShape shape =
      compress::ChunkShapeInTensor(layout_.tensor_of(plan).shape, plan.chunk.offset, n);
  TAMP_ASSIGN_OR_RETURN(chunk->push_codec, compress::CreateCodec(plan.compression.push(), shape));
  TAMP_ASSIGN_OR_RETURN(chunk->push_warmup,
                        compress::RatioWarmup::Create(plan.compression.push(), shape));
  chunk->steps_per_epoch = &steps_per_epoch_;
  TAMP_ASSIGN_OR_RETURN(chunk->pull_codec, compress::CreateCodec(plan.compression.pull(), shape));
  if (chunk->pull_codec->rounds() != 1) {  // Config validation refuses these already.
    return absl::InvalidArgumentError(absl::StrCat("pull codec ", plan.compression.pull().name(),
                                                   " takes several rounds; it can only push"));
  }
  chunk->rounds = chunk->push_codec->rounds();
  if (chunk->rounds > 1) chunk->aggregate.resize(n);
  TAMP_ASSIGN_OR_RETURN(chunk->pull_feedback,
                        compress::ErrorFeedback::Create(plan.compression.pull_feedback(), n));
  chunk->weights.resize(n);
  InitTensorSlice(layout_.tensor_of(plan), config_.model().init_seed(), plan.chunk.tensor,
                  plan.chunk.offset, absl::MakeSpan(chunk->weights));
  chunk->accumulator.assign(chunk->push_codec->RoundValues(0), 0.0f);
  chunk->arrived.assign(config_.cluster().num_workers(), false);
  chunk->update.resize(n);
  const config::Consistency& consistency = config_.consistency();
  if (consistency.mode() != config::Consistency::SYNC) {
    if (chunk->rounds != 1) {  // Config validation refuses these already.
      return absl::InvalidArgumentError(absl::StrCat(
          "push codec ", plan.compression.push().name(), " takes several rounds; it works only "
          "with consistency.mode SYNC"));
    }
    chunk->async = true;
    chunk->staleness =
        consistency.mode() == config::Consistency::SSP ? consistency.staleness() : 0;
    chunk->worker_steps.assign(config_.cluster().num_workers(), 0);
    // Every worker starts from the initial weights (and resets its view on PullWeights).
    chunk->views.assign(config_.cluster().num_workers(), chunk->weights);
  }
  return chunk;
}

Shard::Shard(const config::RunConfig& config, const JobLayout& layout, uint32_t rank)
    : config_(config), layout_(layout), rank_(rank), chunk_ids_(layout.ChunksOfShard(rank)) {}

Shard::~Shard() = default;

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(const config::RunConfig& config,
                                                     const JobLayout& layout, uint32_t rank) {
  const uint32_t num_servers = config.cluster().num_servers();
  if (rank >= num_servers) {
    return absl::InvalidArgumentError(
        absl::StrCat("server rank ", rank, " out of range: the job has ", num_servers, " servers"));
  }
  auto shard = absl::WrapUnique(new Shard(config, layout, rank));
  shard->chunks_.resize(layout.chunks.size());
  for (uint32_t id : shard->chunk_ids_) {
    absl::StatusOr<std::unique_ptr<ChunkState>> chunk = shard->NewChunk(id);
    if (!chunk.ok()) return AboutChunk(layout, id, chunk.status());
    if ((*chunk)->push_warmup != nullptr) shard->has_ratio_warmup_ = true;
    shard->chunks_[id] = std::move(chunk).value();
  }
  return shard;
}

absl::StatusOr<Shard::ChunkState*> Shard::Find(uint32_t chunk_id) const {
  if (chunk_id >= chunks_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk ", chunk_id, " does not exist: the model has ", chunks_.size(), " chunks"));
  }
  if (chunks_[chunk_id] == nullptr) {
    return absl::NotFoundError(absl::StrCat("chunk ", chunk_id, " is on shard ",
                                            layout_.chunks[chunk_id].chunk.shard, ", not on shard ",
                                            rank_));
  }
  return chunks_[chunk_id].get();
}

void Shard::PushPull(uint32_t worker, uint64_t step, uint32_t chunk_id, absl::string_view payload,
                     DoneCallback done) {
  // Its answer has no room for a multi-round codec's intermediate answers.
  if (absl::StatusOr<ChunkState*> found = Find(chunk_id); found.ok() && (*found)->rounds != 1) {
    done(absl::InvalidArgumentError(absl::StrCat("chunk ", chunk_id, " takes ", (*found)->rounds,
                                                 " rounds per step: push with PushPullRound()")),
         nullptr, 0);
    return;
  }
  PushPullRound(worker, step, 0, chunk_id, payload,
                [done = std::move(done)](absl::Status status, const PushAnswer* answer) {
                  if (answer == nullptr) {
                    done(std::move(status), nullptr, 0);
                  } else {
                    done(std::move(status), answer->update, answer->step);
                  }
                });
}

void Shard::PushPullRound(uint32_t worker, uint64_t step, uint32_t round, uint32_t chunk_id,
                          absl::string_view payload, RoundDoneCallback done) {
  const uint32_t num_workers = config_.cluster().num_workers();
  if (worker >= num_workers) {
    done(absl::InvalidArgumentError(absl::StrCat("worker ", worker, " out of range: the job has ",
                                                 num_workers, " workers")),
         nullptr);
    return;
  }
  absl::StatusOr<ChunkState*> found = Find(chunk_id);
  if (!found.ok()) {
    done(found.status(), nullptr);
    return;
  }
  if (absl::Status ready = CheckScheduleReady(); !ready.ok()) {
    done(ready, nullptr);
    return;
  }
  ChunkState& chunk = **found;
  if (chunk.async) {
    PushAsync(chunk, worker, step, round, payload, std::move(done));
    return;
  }
  ChunkState::Completion completion;
  {
    std::lock_guard<std::mutex> lock(chunk.mu);
    absl::Status status = chunk.Add(config_, worker, step, round, payload);
    if (status.ok()) {
      chunk.pending.push_back(std::move(done));
      if (chunk.num_arrived < num_workers) return;  // Answered by the last worker's push.
      completion = static_cast<int>(chunk.round) + 1 < chunk.rounds
                       ? chunk.FinishRound(config_)
                       : chunk.FinishStep(config_, LearningRateAt(chunk.step));
    } else {
      completion.callbacks.push_back(std::move(done));
      completion.status = std::move(status);
    }
  }
  // Outside the lock: a callback may take its time or push again.
  PushAnswer answer;
  answer.step = completion.step;
  answer.last_round = completion.last_round;
  answer.update = &completion.update;
  answer.aggregate = &completion.aggregate;
  for (RoundDoneCallback& callback : completion.callbacks) {
    callback(completion.status, completion.status.ok() ? &answer : nullptr);
  }
}

void Shard::PushAsync(ChunkState& chunk, uint32_t worker, uint64_t step, uint32_t round,
                      absl::string_view payload, RoundDoneCallback done) {
  std::vector<ChunkState::AsyncAnswer> answers;
  {
    std::lock_guard<std::mutex> lock(chunk.mu);
    // The schedule's rate at the pushing worker's own step.
    absl::Status status = chunk.AddAsync(config_, worker, step, round, payload, LearningRateAt(step));
    if (!status.ok()) {
      ChunkState::AsyncAnswer refused;
      refused.done = std::move(done);
      refused.status = std::move(status);
      answers.push_back(std::move(refused));
    } else {
      // This push, then any parked one it unblocked (it may have been the slowest's).
      chunk.parked.push_back({worker, step, std::move(done)});
      chunk.ReleaseParked(config_, &answers);
    }
  }
  // Outside the lock: a callback may take its time or push again.
  const std::string empty;
  for (ChunkState::AsyncAnswer& answer : answers) {
    if (!answer.status.ok()) {
      answer.done(answer.status, nullptr);
      continue;
    }
    PushAnswer out;
    out.step = answer.step;
    out.update = &answer.update;
    out.aggregate = &empty;
    out.slowest_pushes = answer.slowest;
    answer.done(absl::OkStatus(), &out);
  }
}

absl::Status Shard::FixRunLength(uint64_t steps_per_epoch, uint64_t total_steps) {
  if (steps_per_epoch == 0 || total_steps == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps_per_epoch and total_steps must be >= 1, got ", steps_per_epoch,
                     " and ", total_steps));
  }
  std::lock_guard<std::mutex> lock(run_length_mu_);
  if (!run_length_fixed_.load(std::memory_order_relaxed)) {
    steps_per_epoch_ = steps_per_epoch;
    total_steps_ = total_steps;
    run_length_fixed_.store(true, std::memory_order_release);
    return absl::OkStatus();
  }
  if (steps_per_epoch != steps_per_epoch_) {
    return absl::FailedPreconditionError(
        absl::StrCat("steps_per_epoch: worker says ", steps_per_epoch, ", server ", rank_,
                     " has ", steps_per_epoch_, " from the first handshake"));
  }
  if (total_steps != total_steps_) {
    return absl::FailedPreconditionError(
        absl::StrCat("total_steps: worker says ", total_steps, ", server ", rank_, " has ",
                     total_steps_, " from the first handshake"));
  }
  return absl::OkStatus();
}

absl::Status Shard::CheckScheduleReady() const {
  if (run_length_fixed_.load(std::memory_order_acquire)) return absl::OkStatus();
  if (has_ratio_warmup_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server ", rank_, " cannot step yet: push codec ratio_warmup needs steps_per_epoch, "
        "which the first worker handshake sets"));
  }
  if (!ScheduleNeedsRunLength(config_.optimizer().schedule())) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "server ", rank_, " cannot step yet: optimizer.schedule needs the run's length "
      "(steps_per_epoch, total_steps), which the first worker handshake sets"));
}

float Shard::LearningRateAt(uint64_t step) const {
  // 0, 0 before a handshake: only for schedules that ignore them (CheckScheduleReady).
  const bool fixed = run_length_fixed_.load(std::memory_order_acquire);
  return static_cast<float>(LearningRate(config_.optimizer(), step, fixed ? steps_per_epoch_ : 0,
                                         fixed ? total_steps_ : 0));
}

absl::Status Shard::PullWeights(uint32_t worker, rpc::PullWeightsResponse* response) {
  const uint32_t num_workers = config_.cluster().num_workers();
  if (worker >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", worker, " out of range: the job has ",
                                                   num_workers, " workers"));
  }
  response->Clear();
  if (config_.consistency().mode() == config::Consistency::SYNC) {
    // In SYNC every worker pulls exact weights at the same step boundary (start and every
    // resync_steps), before pushing that step, so no step completes meanwhile. The replicas
    // are about to equal the weights exactly: what the pull residual still owed them is
    // delivered, and keeping it would deliver it a second time with later updates.
    uint64_t min_step = std::numeric_limits<uint64_t>::max();
    for (uint32_t id : chunk_ids_) {
      ChunkState& chunk = *chunks_[id];
      rpc::ChunkWeights* out = response->add_chunks();
      out->set_chunk_id(id);
      std::lock_guard<std::mutex> lock(chunk.mu);
      out->set_values(reinterpret_cast<const char*>(chunk.weights.data()),
                      chunk.weights.size() * sizeof(float));
      chunk.pull_feedback->Reset();
      min_step = std::min(min_step, chunk.step);
    }
    response->set_step(chunk_ids_.empty() ? 0 : min_step);
    return absl::OkStatus();
  }
  uint64_t min_step = std::numeric_limits<uint64_t>::max();
  for (uint32_t id : chunk_ids_) {
    ChunkState& chunk = *chunks_[id];
    rpc::ChunkWeights* out = response->add_chunks();
    out->set_chunk_id(id);
    std::lock_guard<std::mutex> lock(chunk.mu);
    out->set_values(reinterpret_cast<const char*>(chunk.weights.data()),
                    chunk.weights.size() * sizeof(float));
    chunk.views[worker] = chunk.weights;  // The worker now holds exactly these.
    min_step = std::min(min_step, chunk.worker_steps[worker]);
  }
  response->set_step(chunk_ids_.empty() ? 0 : min_step);
  return absl::OkStatus();
}

absl::Status Shard::PullWeights(rpc::PullWeightsResponse* response) const {
  response->Clear();
  uint64_t min_step = std::numeric_limits<uint64_t>::max();
  for (uint32_t id : chunk_ids_) {
    const ChunkState& chunk = *chunks_[id];
    rpc::ChunkWeights* out = response->add_chunks();
    out->set_chunk_id(id);
    std::lock_guard<std::mutex> lock(chunk.mu);
    out->set_values(reinterpret_cast<const char*>(chunk.weights.data()),
                    chunk.weights.size() * sizeof(float));
    min_step = std::min(min_step, chunk.step);
  }
  response->set_step(chunk_ids_.empty() ? 0 : min_step);
  return absl::OkStatus();
}

void Shard::Close(const absl::Status& reason) {
  CHECK(!reason.ok()) << "Close() needs an error to answer pushes with";
  for (uint32_t id : chunk_ids_) {
    ChunkState& chunk = *chunks_[id];
    std::vector<RoundDoneCallback> parked;
    {
      std::lock_guard<std::mutex> lock(chunk.mu);
      chunk.closed = reason;
      parked = std::move(chunk.pending);
      chunk.pending.clear();
      for (ChunkState::Parked& push : chunk.parked) parked.push_back(std::move(push.done));
      chunk.parked.clear();
    }
    for (RoundDoneCallback& callback : parked) callback(reason, nullptr);
  }
}

uint64_t Shard::step() const {
  uint64_t min_step = std::numeric_limits<uint64_t>::max();
  for (uint32_t id : chunk_ids_) {
    std::lock_guard<std::mutex> lock(chunks_[id]->mu);
    min_step = std::min(min_step, chunks_[id]->step);
  }
  return chunk_ids_.empty() ? 0 : min_step;
}

absl::StatusOr<Shard::ChunkSnapshot> Shard::Snapshot(uint32_t chunk_id) const {
  TAMP_ASSIGN_OR_RETURN(const ChunkState* chunk, Find(chunk_id));
  std::lock_guard<std::mutex> lock(chunk->mu);
  ChunkSnapshot snapshot;
  snapshot.step = chunk->step;
  snapshot.round = chunk->round;
  snapshot.weights = chunk->weights;
  snapshot.accumulator = chunk->accumulator;
  snapshot.arrived = chunk->arrived;
  const absl::Span<const float> residual = chunk->pull_feedback->residual();
  snapshot.pull_residual.assign(residual.begin(), residual.end());
  snapshot.worker_steps = chunk->worker_steps;
  snapshot.nonfinite_skipped = chunk->nonfinite_skipped;
  snapshot.views = chunk->views;
  return snapshot;
}

}  // namespace tamp
