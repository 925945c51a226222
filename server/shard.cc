#include "server/shard.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "compress/ratio_warmup.h"
#include "compress/registry.h"
#include "glog/logging.h"
#include "job/config.h"
#include "job/model_layout.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "protocol/chunk_update.h"
#include "protocol/keys.h"

// PullWeights sends weights as raw host floats; the wire format says little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Tamp needs a little-endian host");

namespace tamp {

// Of a round, or of a step for single-round codecs.
struct Shard::Completion {
  std::vector<RoundDoneCallback> callbacks;
  absl::Status status;
  std::string update;     // Empty before the last round.
  std::string aggregate;  // The push codec's answer (multi-round codecs).
  uint64_t step = 0;
  bool last_round = true;
  // The chunk whose pull buffer `update` is on loan from (FinishStep); Deliver() hands it
  // back, so a steady-state step encodes into memory it already has.
  ChunkState* lender = nullptr;
};

struct Shard::ChunkState {
  using Completion = Shard::Completion;

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
    if (num_arrived++ == 0) barrier_start = std::chrono::steady_clock::now();
    return absl::OkStatus();
  }

  // accumulator += decode(payload), but only if every sum is finite (NaN / Inf detection for
  // nonfinite_policy REJECT and SKIP); this also catches finite pushes whose sum overflows.
  // Codecs that decode sparse (topk, dgc, threshold): check the k sums, then add them, O(k).
  // The accumulator never holds -0 (it starts at +0, and +0 + -0 is +0), so the entries the
  // payload skips need no check: their sums are the finite accumulator itself. Other
  // single-round codecs: Decode() into `scratch`, then one pass forms accumulator + scratch
  // in `scratch` while OR-ing an exponent-all-ones test, and a finite result is swapped in
  // (O(1)): the work of the default DecodeAdd, with the check fused into the add.
  // Multi-round codecs: copy the (small) round accumulator, DecodeAddRound into it, check.
  // *finite false: the accumulator is untouched. A bad payload is an error, as with
  // DecodeAdd. Requires mu.
  absl::Status DecodeAddFinite(uint64_t push_step, absl::string_view payload,
                               const RandomKey& key, bool* finite) {
    uint32_t bad = 0;
    if (rounds == 1) {
      const compress::Codec& codec = PushCodecAt(push_step);
      TAMP_ASSIGN_OR_RETURN(const bool sparse, codec.DecodeSparse(payload, key, &pushed));
      if (sparse) {
        for (size_t j = 0; j < pushed.indices.size(); ++j) {
          bad |= NonFinite(accumulator[pushed.indices[j]] + pushed.values[j]);
        }
        *finite = bad == 0;
        if (*finite) compress::AddSparseEntries(pushed, absl::MakeSpan(accumulator));
        return absl::OkStatus();
      }
      scratch.resize(accumulator.size());
      TAMP_RETURN_IF_ERROR(codec.Decode(payload, key, absl::MakeSpan(scratch)));
      for (size_t i = 0; i < scratch.size(); ++i) {
        const float sum = accumulator[i] + scratch[i];
        scratch[i] = sum;
        bad |= NonFinite(sum);
      }
    } else {
      scratch.resize(accumulator.size());
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

  // Once every live worker has pushed a round before the last (multi-round push codecs): the
  // codec's answer to the round over the workers that pushed it, then on to the next round;
  // hands back the parked callbacks. Requires mu.
  Completion FinishRound(const config::RunConfig& config) {
    Completion done;
    push_codec->FinishRound(static_cast<int>(round), static_cast<int>(num_arrived),
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

  // The gradient the optimizer applies once every live worker has pushed the step's last
  // round: the accumulator turned into the mean (or vote) over the workers that pushed (fewer
  // than num_workers once some were dropped), or a multi-round codec's aggregate, whose
  // answer goes to *answer. Requires mu.
  absl::Span<const float> AggregateGradient(const config::RunConfig& config, std::string* answer) {
    const int contributors = static_cast<int>(num_arrived);
    if (rounds == 1) {
      PushCodecAt(step).FinishAggregate(contributors, absl::MakeSpan(accumulator));
      return accumulator;
    }
    push_codec->FinishRound(static_cast<int>(round), contributors, absl::MakeSpan(accumulator),
                            PullKey(config, step, id), answer, absl::MakeSpan(aggregate));
    return aggregate;
  }

  // Once every live worker has pushed: mean gradient, optimizer step at `learning_rate` (the
  // schedule's rate for this step), update through the pull codec and residual; then resets
  // for the next step and hands back the parked callbacks. Requires mu.
  Completion FinishStep(const config::RunConfig& config, float learning_rate) {
    Completion done;
    done.update = TakePullBuffer();
    done.lender = this;
    const absl::Span<const float> gradient = AggregateGradient(config, &done.aggregate);
    // Encoding a well-sized buffer fails only on a codec bug. The weights have moved either
    // way, so the step still counts; workers that get the error must resync (PullWeights).
    // server.mode AGGREGATE answers the mean gradient itself; the weights stay.
    done.status =
        config.server().mode() == config::Server::AGGREGATE
            ? pull_feedback->Compress(*pull_codec, gradient, PullKey(config, step, id),
                                      &done.update)
            : UpdateChunk(*optimizer, absl::MakeSpan(weights), gradient,
                          static_cast<int64_t>(step), learning_rate, *pull_feedback, *pull_codec,
                          PullKey(config, step, id), absl::MakeSpan(update), &done.update);
    ++step;
    done.step = step;
    round = 0;
    resuming = false;  // In step with the workers again.
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
  // The fewest pushes of any worker. A chunk restored from a checkpoint counts only the
  // workers that have pushed to it since: the others' counts are the checkpoint's, behind
  // their real steps, and a worker that has finished would never raise its own.
  uint64_t SlowestPushes() const {
    uint64_t slowest = std::numeric_limits<uint64_t>::max();
    for (size_t worker = 0; worker < worker_steps.size(); ++worker) {
      if (!resuming || followed[worker]) slowest = std::min(slowest, worker_steps[worker]);
    }
    return slowest == std::numeric_limits<uint64_t>::max() ? 0 : slowest;
  }

  // ASYNC / SSP counterpart of FollowWorkers() for a chunk restored from a checkpoint: the
  // first push of worker `worker` since the restore sets that worker's count to its step
  // (the pushes in between were applied only by the lost server); a push of a step below its
  // count is refused OUT_OF_RANGE (skip it), one at or past `run_end` (0: not known)
  // INVALID_ARGUMENT. Once every worker has pushed, the chunk is in step with them again.
  // Requires mu and resuming.
  absl::Status FollowWorker(uint32_t worker, uint64_t push_step, uint64_t run_end) {
    if (run_end != 0 && push_step >= run_end) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", id, ": push for step ", push_step,
                                                     ", past the run's last step ", run_end - 1));
    }
    if (followed[worker]) return absl::OkStatus();
    if (push_step < worker_steps[worker]) {
      return absl::OutOfRangeError(absl::StrCat(
          "chunk ", id, " resumed from a checkpoint at worker ", worker, "'s step ",
          worker_steps[worker], "; step ", push_step,
          " is behind it: pull the chunk's weights and go on with the next step"));
    }
    worker_steps[worker] = push_step;
    followed[worker] = true;
    resuming = !std::all_of(followed.begin(), followed.end(), [](bool seen) { return seen; });
    return absl::OkStatus();
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
      answer.update = TakePullBuffer();
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
  // When this round's first push arrived (the barrier's start; consistency.worker_timeout_ms).
  std::chrono::steady_clock::time_point barrier_start;
  std::vector<RoundDoneCallback> pending;  // Of this round's accepted pushes.
  std::unique_ptr<compress::Codec> pull_codec;
  std::unique_ptr<compress::ErrorFeedback> pull_feedback;
  std::vector<float> update;  // Scratch: w_new - w_old (Optimizer::Apply()).
  // Pull payload buffers of answers already sent (ReturnPullBuffer): an answer is encoded
  // into one of them rather than into fresh memory (a raw pull is the whole chunk every
  // step). SYNC uses one at a time; ASYNC / SSP one per answer formed together.
  std::vector<std::string> pull_buffers;
  // A spare pull buffer, or an empty string. Requires mu.
  std::string TakePullBuffer() {
    if (pull_buffers.empty()) return {};
    std::string buffer = std::move(pull_buffers.back());
    pull_buffers.pop_back();
    return buffer;
  }
  // Keeps the buffer of a sent answer for a later one, up to one per worker. Locks mu.
  void ReturnPullBuffer(std::string&& buffer) {
    if (buffer.capacity() == 0) return;
    std::lock_guard<std::mutex> lock(mu);
    if (pull_buffers.size() < arrived.size()) pull_buffers.push_back(std::move(buffer));
  }
  std::vector<float> scratch;  // DecodeAddFinite(): the next accumulator.
  compress::SparseEntries pushed;  // DecodeAddFinite(): a sparse push's entries.
  uint64_t nonfinite_skipped = 0;  // Pushes skipped by nonfinite_policy SKIP.
  absl::Status closed;        // Not OK once Close() ran.
  // Restored from a checkpoint and no step completed since: FollowWorkers() applies.
  bool resuming = false;

  // A chunk restored from a checkpoint (at its step c) joins the workers at the highest step
  // any of them pushes it, s >= c: the steps in between are lost (their gradients were
  // applied only by the lost server). A push of a higher step than the chunk's drops the
  // pushes parked for the current one into *superseded (answered OUT_OF_RANGE: their
  // workers are behind and skip the step) and moves the chunk to that step; a push of a
  // lower step is refused OUT_OF_RANGE. Nothing gathered before the restore is applied twice:
  // the restored state holds only steps < c. A push of a step at or past `run_end` (the run's
  // total_steps; 0: not known yet) is refused INVALID_ARGUMENT: no worker pushes it.
  // Requires mu and resuming.
  absl::Status FollowWorkers(uint64_t push_step, uint64_t run_end, Completion* superseded) {
    if (run_end != 0 && push_step >= run_end) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", id, ": push for step ", push_step,
                                                     ", past the run's last step ", run_end - 1));
    }
    const auto behind = [&](uint64_t pushed) {
      return absl::OutOfRangeError(absl::StrCat(
          "chunk ", id, " resumed from a checkpoint and follows the workers at step ",
          std::max(step, push_step), "; step ", pushed,
          " is behind it: pull the chunk's weights and go on with the next step"));
    };
    if (push_step < step) return behind(push_step);
    if (push_step == step) return absl::OkStatus();
    if (!pending.empty()) {
      superseded->status = behind(step);
      superseded->callbacks = std::move(pending);
      pending.clear();
    }
    step = push_step;
    round = 0;
    accumulator.assign(push_codec->RoundValues(0), 0.0f);
    std::fill(arrived.begin(), arrived.end(), false);
    num_arrived = 0;
    return absl::OkStatus();
  }
  // ASYNC / SSP only (empty in SYNC). `step` above counts applied pushes there.
  bool async = false;
  uint64_t staleness = 0;                 // SSP's tau; 0 for ASYNC (no bound).
  std::vector<uint64_t> worker_steps;     // By worker: its pushes applied (its next step).
  std::vector<std::vector<float>> views;  // By worker: the weights that worker holds.
  // By worker, while resuming: it has pushed since the restore (FollowWorker()).
  std::vector<bool> followed;
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
  if (config_.model().kind() != config::Model::REGISTERED) {  // Else worker 0 sets them.
    InitTensorSlice(layout_.tensor_of(plan), config_.model().init_seed(), plan.chunk.tensor,
                    plan.chunk.offset, absl::MakeSpan(chunk->weights));
  }
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

namespace {

// consistency.worker_timeout_ms, or its default when unset: half the workers' RPC deadline
// (proto/config.proto). 0 in ASYNC / SSP, which have no barrier to time out.
std::chrono::milliseconds WorkerTimeout(const config::RunConfig& config) {
  const config::Consistency& consistency = config.consistency();
  if (consistency.mode() != config::Consistency::SYNC) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(consistency.has_worker_timeout_ms()
                                       ? consistency.worker_timeout_ms()
                                       : config.cluster().rpc_timeout_ms() / 2);
}

}  // namespace

Shard::Shard(const config::RunConfig& config, const JobLayout& layout, uint32_t rank)
    : config_(config),
      layout_(layout),
      weights_ready_(config.model().kind() != config::Model::REGISTERED),
      rank_(rank),
      chunk_ids_(layout.ChunksOfShard(rank)),
      worker_timeout_(WorkerTimeout(config)),
      members_(config.cluster().num_workers()) {}

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
  if (!weights_ready_.load(std::memory_order_acquire)) {
    done(absl::FailedPreconditionError(absl::StrCat(
             "server ", rank_, " has no weights yet: worker 0 sets the initial weights "
             "(model.kind REGISTERED) before any push")),
         nullptr);
    return;
  }
  ChunkState& chunk = **found;
  if (chunk.async) {
    PushAsync(chunk, worker, step, round, payload, std::move(done));
    return;
  }
  ChunkState::Completion completion;
  ChunkState::Completion superseded;  // Of a restored chunk (ChunkState::FollowWorkers).
  {
    std::lock_guard<std::mutex> lock(chunk.mu);
    absl::Status status = chunk.closed.ok() ? CheckMember(worker, step) : chunk.closed;
    if (status.ok() && chunk.resuming) {
      status = chunk.FollowWorkers(step, KnownTotalSteps(), &superseded);
    }
    if (status.ok()) status = chunk.Add(config_, worker, step, round, payload);
    if (status.ok()) {
      chunk.pending.push_back(std::move(done));
      // Else answered by the last live worker's push.
      if (BarrierComplete(chunk)) completion = Finish(chunk);
    } else {
      completion.callbacks.push_back(std::move(done));
      completion.status = std::move(status);
    }
  }
  Deliver(superseded);
  Deliver(completion);
}

Shard::Completion Shard::Finish(ChunkState& chunk) const {
  return static_cast<int>(chunk.round) + 1 < chunk.rounds
             ? chunk.FinishRound(config_)
             : chunk.FinishStep(config_, LearningRateAt(chunk.step));
}

void Shard::Deliver(Completion& completion) {
  // Outside the lock: a callback may take its time or push again.
  PushAnswer answer;
  answer.step = completion.step;
  answer.last_round = completion.last_round;
  answer.update = &completion.update;
  answer.aggregate = &completion.aggregate;
  for (RoundDoneCallback& callback : completion.callbacks) {
    callback(completion.status, completion.status.ok() ? &answer : nullptr);
  }
  if (completion.lender != nullptr) {
    completion.lender->ReturnPullBuffer(std::move(completion.update));
  }
}

bool Shard::Live(uint32_t worker, uint64_t step) const {
  const Member& member = members_[worker];
  return !member.dropped && step >= member.from_step;
}

absl::Status Shard::CheckMember(uint32_t worker, uint64_t step) const {
  std::lock_guard<std::mutex> lock(members_mu_);
  const Member& member = members_[worker];
  if (member.dropped) {
    return absl::AbortedError(absl::StrCat(
        "worker ", worker, " was dropped at step ", member.dropped_at_step, " after ",
        member.waited_ms, " ms without a push (consistency.worker_timeout_ms); rejoin with a "
        "handshake"));
  }
  if (step < member.from_step) {
    return absl::AbortedError(absl::StrCat("worker ", worker, " rejoined at step ",
                                           member.from_step, ", push was for step ", step));
  }
  return absl::OkStatus();
}

bool Shard::BarrierComplete(const ChunkState& chunk) const {
  if (chunk.num_arrived == 0 || !chunk.closed.ok()) return false;
  std::lock_guard<std::mutex> lock(members_mu_);
  for (uint32_t worker = 0; worker < chunk.arrived.size(); ++worker) {
    if (!chunk.arrived[worker] && Live(worker, chunk.step)) return false;
  }
  return true;
}

void Shard::CompleteBarriers() {
  for (uint32_t id : chunk_ids_) {
    ChunkState& chunk = *chunks_[id];
    ChunkState::Completion completion;
    {
      std::lock_guard<std::mutex> lock(chunk.mu);
      if (chunk.async) continue;
      SkipStepsNoOneTakes(chunk);
      if (!BarrierComplete(chunk)) continue;
      completion = Finish(chunk);
    }
    Deliver(completion);
  }
}

void Shard::SkipStepsNoOneTakes(ChunkState& chunk) const {
  if (chunk.num_arrived != 0 || chunk.round != 0) return;
  std::lock_guard<std::mutex> lock(members_mu_);
  uint64_t first_live = std::numeric_limits<uint64_t>::max();
  for (const Member& member : members_) {
    if (!member.dropped) first_live = std::min(first_live, member.from_step);
  }
  // Every worker dropped: nobody to wait for or to skip to.
  if (first_live == std::numeric_limits<uint64_t>::max() || first_live <= chunk.step) return;
  // As FollowWorkers(): the weights stand, nothing is applied for the steps skipped.
  chunk.step = first_live;
}

void Shard::ExpireBarriers(std::chrono::steady_clock::time_point now) {
  if (worker_timeout_.count() == 0) return;
  bool dropped = false;
  for (uint32_t id : chunk_ids_) {
    ChunkState& chunk = *chunks_[id];
    std::lock_guard<std::mutex> chunk_lock(chunk.mu);
    if (chunk.async || chunk.num_arrived == 0 || !chunk.closed.ok()) continue;
    const auto waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - chunk.barrier_start);
    if (waited < worker_timeout_) continue;
    std::lock_guard<std::mutex> lock(members_mu_);
    for (uint32_t worker = 0; worker < chunk.arrived.size(); ++worker) {
      if (chunk.arrived[worker] || !Live(worker, chunk.step)) continue;
      Member& member = members_[worker];
      member.dropped = true;
      member.dropped_at_step = chunk.step;
      member.waited_ms = waited.count();
      dropped = true;
      LOG(WARNING) << "server " << rank_ << ": dropped worker " << worker
                   << " from the barrier: chunk " << id << " waited " << waited.count()
                   << " ms for its push of step " << chunk.step
                   << (chunk.rounds == 1 ? "" : absl::StrCat(" round ", chunk.round))
                   << " (consistency.worker_timeout_ms " << worker_timeout_.count()
                   << "); steps go on without it until it rejoins";
    }
  }
  // Every chunk whose barrier waited only for the dropped workers completes now.
  if (dropped) CompleteBarriers();
}

absl::Status Shard::Rejoin(uint32_t worker, uint64_t step) {
  TAMP_RETURN_IF_ERROR(AdmitRejoin(worker, step));
  // Steps before `step` no longer wait for it.
  CompleteBarriers();
  return absl::OkStatus();
}

absl::Status Shard::AdmitRejoin(uint32_t worker, uint64_t step) {
  const uint32_t num_workers = config_.cluster().num_workers();
  if (worker >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", worker, " out of range: the job has ",
                                                   num_workers, " workers"));
  }
  if (config_.consistency().mode() != config::Consistency::SYNC) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker, " asked to rejoin at step ", step, ": rejoining is for consistency.mode "
        "SYNC; ASYNC and SSP workers resume with PullWeights"));
  }
  if (const uint64_t total = KnownTotalSteps(); total != 0 && step > total) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", worker, " asked to rejoin at step ",
                                                   step, ", past the run's end at step ", total));
  }
  {
    // Every chunk held still, so none completes `step` between the check and the change.
    std::vector<std::unique_lock<std::mutex>> chunk_locks;
    for (uint32_t id : chunk_ids_) chunk_locks.emplace_back(chunks_[id]->mu);
    uint64_t latest = 0;
    bool resuming = false;
    for (uint32_t id : chunk_ids_) {
      const ChunkState& chunk = *chunks_[id];
      latest = std::max(latest, chunk.step);
      resuming = resuming || chunk.resuming;
      if (chunk.step > step ||
          (chunk.step == step && (chunk.round != 0 || chunk.arrived[worker]))) {
        return absl::FailedPreconditionError(absl::StrCat(
            "worker ", worker, " cannot rejoin at step ", step, " on server ", rank_, ": chunk ",
            id, " is at step ", chunk.step,
            chunk.rounds == 1 ? "" : absl::StrCat(" round ", chunk.round),
            "; rejoin at a later step"));
      }
    }
    // A step further ahead would let the steps in between complete without this worker.
    // Chunks restored from a checkpoint do not know the workers' step yet (FollowWorkers).
    if (!chunk_ids_.empty() && !resuming && step > latest + kRejoinLead) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker ", worker, " asked to rejoin at step ", step, " but server ", rank_,
          " is at step ", latest, ": a rejoining worker announces at most step ",
          latest + kRejoinLead));
    }
    std::lock_guard<std::mutex> lock(members_mu_);
    members_[worker] = Member{step};
  }
  LOG(INFO) << "server " << rank_ << ": worker " << worker << " rejoins at step " << step;
  return absl::OkStatus();
}

std::vector<Shard::Membership> Shard::members() const {
  std::lock_guard<std::mutex> lock(members_mu_);
  std::vector<Membership> out;
  for (const Member& member : members_) out.push_back({member.from_step, member.dropped});
  return out;
}

uint64_t Shard::latest_step() const {
  uint64_t latest = 0;
  for (uint32_t id : chunk_ids_) {
    std::lock_guard<std::mutex> lock(chunks_[id]->mu);
    latest = std::max(latest, chunks_[id]->step);
  }
  return latest;
}

void Shard::PushAsync(ChunkState& chunk, uint32_t worker, uint64_t step, uint32_t round,
                      absl::string_view payload, RoundDoneCallback done) {
  std::vector<ChunkState::AsyncAnswer> answers;
  {
    std::lock_guard<std::mutex> lock(chunk.mu);
    // A refused push leaves a restored chunk following the workers as before.
    const bool resuming = chunk.resuming;
    const uint64_t steps_before = chunk.worker_steps[worker];
    const bool followed_before = resuming && chunk.followed[worker];
    absl::Status status =
        resuming ? chunk.FollowWorker(worker, step, KnownTotalSteps()) : absl::OkStatus();
    // The schedule's rate at the pushing worker's own step.
    if (status.ok()) {
      status = chunk.AddAsync(config_, worker, step, round, payload, LearningRateAt(step));
    }
    if (!status.ok() && resuming) {
      chunk.worker_steps[worker] = steps_before;
      chunk.followed[worker] = followed_before;
      chunk.resuming = true;
    }
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
    chunk.ReturnPullBuffer(std::move(answer.update));
  }
}

absl::Status Shard::FixRunLength(uint64_t steps_per_epoch, uint64_t total_steps) {
  std::lock_guard<std::mutex> lock(run_length_mu_);
  TAMP_RETURN_IF_ERROR(CheckRunLength(steps_per_epoch, total_steps));
  SetRunLength(steps_per_epoch, total_steps);
  return absl::OkStatus();
}

absl::Status Shard::Join(uint32_t worker, uint64_t steps_per_epoch, uint64_t total_steps,
                         uint64_t rejoin_at_step) {
  {
    std::lock_guard<std::mutex> lock(run_length_mu_);
    TAMP_RETURN_IF_ERROR(CheckRunLength(steps_per_epoch, total_steps));
    // The rejoin is the last thing that can fail; the run's length is fixed only after it.
    // Meanwhile no other handshake can fix another one (run_length_mu_), and a barrier the
    // rejoin lets complete before then does not need it (CheckScheduleReady() passed).
    if (rejoin_at_step != 0) TAMP_RETURN_IF_ERROR(AdmitRejoin(worker, rejoin_at_step));
    SetRunLength(steps_per_epoch, total_steps);
  }
  if (rejoin_at_step != 0) CompleteBarriers();
  return absl::OkStatus();
}

absl::Status Shard::CheckRunLength(uint64_t steps_per_epoch, uint64_t total_steps) const {
  if (steps_per_epoch == 0 || total_steps == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps_per_epoch and total_steps must be >= 1, got ", steps_per_epoch,
                     " and ", total_steps));
  }
  if (run_length_fixed_.load(std::memory_order_relaxed)) {
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
  // Each worker takes an equal share of the training set, in whole batches. The set is at
  // most data.train_limit examples, and an IDX file counts its examples in 32 bits.
  const config::Data& data = config_.data();
  const uint64_t examples = data.train_limit() != 0 ? data.train_limit() : uint64_t{0xffffffff};
  const uint64_t most_per_epoch =
      examples / config_.cluster().num_workers() / std::max<uint32_t>(1, data.batch_size());
  if (steps_per_epoch > most_per_epoch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "steps_per_epoch: worker says ", steps_per_epoch, ", but ", examples, " examples in ",
        config_.cluster().num_workers(), " shares of batches of ", data.batch_size(),
        " make at most ", most_per_epoch));
  }
  const config::Training& training = config_.training();
  const uint64_t expected = TotalSteps(training, steps_per_epoch);
  if (total_steps != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "total_steps: worker says ", total_steps, ", but training.epochs ", training.epochs(),
        " of ", steps_per_epoch, " steps",
        training.max_steps() != 0 ? absl::StrCat(" capped at training.max_steps ",
                                                 training.max_steps())
                                  : "",
        " make ", expected));
  }
  return absl::OkStatus();
}

void Shard::SetRunLength(uint64_t steps_per_epoch, uint64_t total_steps) {
  if (run_length_fixed_.load(std::memory_order_relaxed)) return;  // Checked equal.
  steps_per_epoch_ = steps_per_epoch;
  total_steps_ = total_steps;
  run_length_fixed_.store(true, std::memory_order_release);
}

uint64_t Shard::KnownTotalSteps() const {
  return run_length_fixed_.load(std::memory_order_acquire) ? total_steps_ : 0;
}

Shard::RunLength Shard::run_length() const {
  if (!run_length_fixed_.load(std::memory_order_acquire)) return {};
  return {steps_per_epoch_, total_steps_};
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

absl::Status Shard::InitWeights(uint32_t worker, const rpc::InitWeightsRequest& request) {
  if (config_.model().kind() != config::Model::REGISTERED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "InitWeights: server ", rank_, " initialises model.kind ",
        config::Model::Kind_Name(config_.model().kind()), " itself from model.init_seed"));
  }
  if (worker != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("InitWeights: only worker 0 sets the initial weights, not worker ", worker));
  }
  std::lock_guard<std::mutex> init_lock(init_mu_);
  if (weights_ready_.load(std::memory_order_acquire)) {
    return absl::AlreadyExistsError(
        absl::StrCat("InitWeights: server ", rank_, " has its initial weights already"));
  }
  // Everything is checked before anything is written, so a refusal changes nothing.
  if (static_cast<size_t>(request.chunks_size()) != chunk_ids_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("InitWeights: server ", rank_, " owns ",
                                                   chunk_ids_.size(), " chunks, got ",
                                                   request.chunks_size()));
  }
  for (int i = 0; i < request.chunks_size(); ++i) {
    const rpc::ChunkWeights& weights = request.chunks(i);
    if (weights.chunk_id() != chunk_ids_[i]) {
      return absl::InvalidArgumentError(absl::StrCat("InitWeights: entry ", i, " is chunk ",
                                                     weights.chunk_id(), ", expected chunk ",
                                                     chunk_ids_[i], " (the shard's chunks in id "
                                                     "order)"));
    }
    const ChunkPlan& plan = layout_.chunks[weights.chunk_id()];
    if (weights.values().size() != plan.chunk.length * sizeof(float)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "InitWeights: chunk ", plan.chunk.id, " (", layout_.tensor_of(plan).name, ") needs ",
          plan.chunk.length * sizeof(float), " bytes, got ", weights.values().size()));
    }
  }
  for (const rpc::ChunkWeights& weights : request.chunks()) {
    ChunkState& chunk = *chunks_[weights.chunk_id()];
    std::lock_guard<std::mutex> lock(chunk.mu);
    std::memcpy(chunk.weights.data(), weights.values().data(), weights.values().size());
    for (std::vector<float>& view : chunk.views) view = chunk.weights;
  }
  weights_ready_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status Shard::PullWeights(uint32_t worker, rpc::PullWeightsResponse* response) {
  const uint32_t num_workers = config_.cluster().num_workers();
  if (worker >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", worker, " out of range: the job has ",
                                                   num_workers, " workers"));
  }
  response->Clear();
  if (!weights_ready_.load(std::memory_order_acquire)) {
    response->set_awaiting_initial_weights(true);
    return absl::OkStatus();
  }
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

absl::Status Shard::PullReplica(uint32_t worker, rpc::PullWeightsResponse* response) {
  if (config_.consistency().mode() != config::Consistency::SYNC) {
    return PullWeights(worker, response);
  }
  const uint32_t num_workers = config_.cluster().num_workers();
  if (worker >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", worker, " out of range: the job has ",
                                                   num_workers, " workers"));
  }
  response->Clear();
  if (!weights_ready_.load(std::memory_order_acquire)) {
    response->set_awaiting_initial_weights(true);
    return absl::OkStatus();
  }
  uint64_t min_step = std::numeric_limits<uint64_t>::max();
  std::vector<float> replica;
  for (uint32_t id : chunk_ids_) {
    const ChunkState& chunk = *chunks_[id];
    std::lock_guard<std::mutex> lock(chunk.mu);
    replica = chunk.weights;
    // The others hold the weights less what the pull residual has not sent them yet.
    const absl::Span<const float> owed = chunk.pull_feedback->residual();
    for (size_t i = 0; i < owed.size(); ++i) replica[i] -= owed[i];
    rpc::ChunkWeights* out = response->add_chunks();
    out->set_chunk_id(id);
    out->set_values(reinterpret_cast<const char*>(replica.data()), replica.size() * sizeof(float));
    min_step = std::min(min_step, chunk.step);
  }
  response->set_step(chunk_ids_.empty() ? 0 : min_step);
  return absl::OkStatus();
}

absl::Status Shard::PullWeights(rpc::PullWeightsResponse* response) const {
  response->Clear();
  if (!weights_ready_.load(std::memory_order_acquire)) {
    response->set_awaiting_initial_weights(true);
    return absl::OkStatus();
  }
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

namespace {

std::string FloatBytes(absl::Span<const float> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// INVALID_ARGUMENT unless `bytes` holds exactly `expected` fp32 values.
absl::Status CheckFloatBytes(const std::string& bytes, size_t expected, uint32_t chunk_id,
                             absl::string_view what) {
  if (bytes.size() == expected * sizeof(float)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk_id, ": ", what, " has ",
                                                 bytes.size(), " bytes, expected ",
                                                 expected * sizeof(float)));
}

// INVALID_ARGUMENT unless `saved` fits `buffers` one for one (count and sizes).
absl::Status CheckBuffers(const google::protobuf::RepeatedPtrField<std::string>& saved,
                          const std::vector<absl::Span<float>>& buffers, uint32_t chunk_id,
                          absl::string_view what) {
  if (static_cast<size_t>(saved.size()) != buffers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk_id, ": ", saved.size(), " ",
                                                   what, " buffers, this job has ",
                                                   buffers.size()));
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    TAMP_RETURN_IF_ERROR(CheckFloatBytes(saved[static_cast<int>(i)], buffers[i].size(), chunk_id,
                                         absl::StrCat(what, " buffer ", i)));
  }
  return absl::OkStatus();
}

void CopyBuffers(const google::protobuf::RepeatedPtrField<std::string>& saved,
                 const std::vector<absl::Span<float>>& buffers) {
  for (size_t i = 0; i < buffers.size(); ++i) {
    // An empty buffer's data() may be null, and memcpy with null is undefined even for 0 bytes.
    if (buffers[i].empty()) continue;
    std::memcpy(buffers[i].data(), saved[static_cast<int>(i)].data(),
                buffers[i].size() * sizeof(float));
  }
}

}  // namespace

uint64_t Shard::NewIncarnation() {
  std::random_device device;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t{device()} << 32) | device();
  return id;
}

checkpoint::ShardState Shard::ExportState() const {
  checkpoint::ShardState state;
  for (uint32_t id : chunk_ids_) {
    const ChunkState& chunk = *chunks_[id];
    checkpoint::ChunkState* out = state.add_chunks();
    std::lock_guard<std::mutex> lock(chunk.mu);
    out->set_chunk_id(id);
    out->set_step(chunk.step);
    out->set_weights(FloatBytes(chunk.weights));
    for (absl::Span<float> buffer : chunk.optimizer->StateBuffers()) {
      out->add_optimizer_state(FloatBytes(buffer));
    }
    for (absl::Span<float> buffer : chunk.pull_feedback->StateBuffers()) {
      out->add_pull_feedback_state(FloatBytes(buffer));
    }
    out->set_nonfinite_skipped(chunk.nonfinite_skipped);
    // ASYNC / SSP: each worker's count. Not the views: every worker resyncs with a restarted
    // server before it pushes there (the incarnation check), which resets its view to the
    // weights; nor the parked SSP pushes: their workers push them again.
    for (uint64_t steps : chunk.worker_steps) out->add_worker_steps(steps);
  }
  return state;
}

absl::Status Shard::Restore(const checkpoint::ShardState& state) {
  if (static_cast<size_t>(state.chunks_size()) != chunk_ids_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the state has ", state.chunks_size(),
                                                   " chunks, shard ", rank_, " has ",
                                                   chunk_ids_.size()));
  }
  // Everything is checked before anything changes.
  for (size_t i = 0; i < chunk_ids_.size(); ++i) {
    const checkpoint::ChunkState& saved = state.chunks(static_cast<int>(i));
    const uint32_t id = chunk_ids_[i];
    if (saved.chunk_id() != id) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", i, " of the state is chunk ",
                                                     saved.chunk_id(), ", expected chunk ", id));
    }
    ChunkState& chunk = *chunks_[id];
    std::lock_guard<std::mutex> lock(chunk.mu);
    TAMP_RETURN_IF_ERROR(CheckFloatBytes(saved.weights(), chunk.weights.size(), id, "weights"));
    TAMP_RETURN_IF_ERROR(CheckBuffers(saved.optimizer_state(), chunk.optimizer->StateBuffers(),
                                      id, "optimizer state"));
    TAMP_RETURN_IF_ERROR(CheckBuffers(saved.pull_feedback_state(),
                                      chunk.pull_feedback->StateBuffers(), id,
                                      "pull feedback"));
    if (static_cast<size_t>(saved.worker_steps_size()) != chunk.worker_steps.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunk ", id, ": ", saved.worker_steps_size(), " worker step counts, this job has ",
          chunk.worker_steps.size(), " (one per worker in ASYNC / SSP, none in SYNC)"));
    }
  }
  for (size_t i = 0; i < chunk_ids_.size(); ++i) {
    const checkpoint::ChunkState& saved = state.chunks(static_cast<int>(i));
    ChunkState& chunk = *chunks_[chunk_ids_[i]];
    std::lock_guard<std::mutex> lock(chunk.mu);
    chunk.step = saved.step();
    std::memcpy(chunk.weights.data(), saved.weights().data(), saved.weights().size());
    CopyBuffers(saved.optimizer_state(), chunk.optimizer->StateBuffers());
    CopyBuffers(saved.pull_feedback_state(), chunk.pull_feedback->StateBuffers());
    chunk.nonfinite_skipped = saved.nonfinite_skipped();
    chunk.round = 0;
    chunk.accumulator.assign(chunk.push_codec->RoundValues(0), 0.0f);
    std::fill(chunk.arrived.begin(), chunk.arrived.end(), false);
    chunk.num_arrived = 0;
    chunk.resuming = true;
    if (chunk.async) {
      chunk.worker_steps.assign(saved.worker_steps().begin(), saved.worker_steps().end());
      for (std::vector<float>& view : chunk.views) view = chunk.weights;
      chunk.followed.assign(chunk.worker_steps.size(), false);
    }
  }
  return absl::OkStatus();
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
