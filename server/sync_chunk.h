// SyncChunk: a chunk in consistency.mode SYNC (bulk-synchronous): every step waits at a
// barrier for the push of every live worker, and every worker gets the same answer.
//
// Each step: every worker pushes its encoded gradient; each push is decoded and added to the
// accumulator. The push that completes the barrier turns the sum into the mean (or vote),
// applies the optimizer at the schedule's rate for that step, encodes the update
// u = w_new - w_old through the pull codec and residual, and answers all of the step's pushes
// with that one payload, so every worker applies the same bytes. Where the pushes are sparse
// (top-k, dgc, threshold), the pull memory is RESIDUAL, and the optimizer moves only weights
// whose gradient is not zero (sgd without momentum or weight decay: DGC's server) or there is
// none (server.mode AGGREGATE), the mean and the answer touch only the pushed entries
// (protocol/chunk_update.h GatherSparseAggregate, UpdateChunkSparse): the same bits in
// O(entries) instead of passes over the chunk. Other optimizers still take the mean (and the
// next step's zeroing) over the pushed entries alone.
//
// Rounds. A push codec with rounds() R > 1 (e.g. powersgd) splits a step into rounds 0 .. R-1,
// each gathered like a step: the chunk accepts pushes for its current (step, round) only; the
// last push of round r < R-1 has the codec aggregate the round (FinishRound) and answers the
// round with the same `aggregate` bytes; the last push of round R-1 gets the codec's aggregate
// gradient and ends the step as above. Single-round codecs are the case R = 1, round 0, with
// an empty `aggregate`.
//
// Barriers wait for the workers Membership (server/membership.h) counts live at the step;
// a chunk whose round waited too long drops the missing ones (ExpireWait), and a chunk whose
// round waits for nobody any more completes (CompleteIfDone).
//
// After a restore (server/shard_state.h) the chunk follows the workers: it takes the highest
// step pushed to it as its own, answers pushes of lower steps OUT_OF_RANGE (their workers skip
// that step after pulling the weights), and is back in lock step once it completes a step.
//
// Threading: as ShardChunk (server/chunk.h): every method takes the chunk's mu itself, except the
// *Held methods, which require the lock from Hold(); Membership's lock is taken under it.
// Callbacks run after the lock is released.
//
// Example:
//   SyncChunk chunk(std::move(core), config, &membership);
//   chunk.Push(worker, step, /*round=*/0, payload, std::move(done));  // Answered at the barrier.
#ifndef TAMP_SERVER_SYNC_CHUNK_H_
#define TAMP_SERVER_SYNC_CHUNK_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/philox.h"
#include "compress/codec.h"
#include "proto/config.pb.h"
#include "server/chunk.h"
#include "server/membership.h"

namespace tamp {

class SyncChunk : public ShardChunk {
 public:
  // `config` and `membership` outlive the chunk.
  SyncChunk(std::unique_ptr<ChunkCore> core, const config::RunConfig& config,
            Membership* membership);

  // Errors, answered at once (the chunk's state is left bit-for-bit as it was): those of
  // Shard::PushPullRound(): ABORTED for a worker Membership refuses; OUT_OF_RANGE behind a
  // restored chunk; INVALID_ARGUMENT for round >= rounds() or a bad payload (or a NaN / Inf
  // per validation.nonfinite_policy REJECT); FAILED_PRECONDITION for another step or round;
  // ALREADY_EXISTS for a second push of the round; the Close() reason once closed.
  void Push(uint32_t worker, uint64_t step, uint32_t round, absl::string_view payload,
            RoundDoneCallback done) override;
  // kExact resets the pull residual: every worker pulls at the same step boundary, and what
  // the residual still owed them is delivered with the exact weights.
  uint64_t Pull(uint32_t worker, PullKind kind, std::string* values) override;
  void Close(const absl::Status& reason) override;
  void Export(checkpoint::ChunkState* out) const override;
  absl::Status CheckRestore(const checkpoint::ChunkState& saved) const override;
  void Restore(const checkpoint::ChunkState& saved) override;
  void SetWeights(absl::string_view bytes) override;
  ChunkSnapshot Snapshot() const override;

  // SyncChunk::ExpireWait()
  //
  // When the current round has waited at least `timeout` by `now`, drops every worker still
  // missing from it (Membership::DropMissing; LOG(WARNING) each, naming server `rank`) and
  // returns true. The caller completes the barriers that then wait for nobody.
  bool ExpireWait(std::chrono::steady_clock::time_point now, std::chrono::milliseconds timeout,
                  uint32_t rank);

  // SyncChunk::CompleteIfDone()
  //
  // After a drop or a rejoin: a chunk no push has reached, when no worker pushes its step any
  // more (every one not dropped rejoins later), skips to the first step one will push,
  // applying nothing; a round every live worker has pushed completes, its callbacks called on
  // this thread.
  void CompleteIfDone();

  // For a rejoin, which holds every chunk still while it checks (Shard).
  std::unique_lock<std::mutex> Hold() const { return std::unique_lock<std::mutex>(core_->mu); }
  // FAILED_PRECONDITION when the chunk has passed `step` for `worker` (its step is higher, or
  // it is at `step` beyond round 0 or with this worker's push), naming server `rank`.
  absl::Status CheckRejoinHeld(uint32_t worker, uint64_t step, uint32_t rank) const;
  uint64_t StepHeld() const { return core_->step; }
  bool ResumingHeld() const { return core_->resuming; }
  // Whether the step in progress holds `worker`'s push: it pushed this round, or the step is
  // beyond round 0 (which took every live worker's push).
  bool HoldsPushOf(uint32_t worker) const;

 private:
  // " round R" in messages, empty for a single-round codec.
  std::string RoundLabel(uint32_t round) const;
  // The answer to every push of one completed round, delivered after the lock is released.
  struct Completion {
    std::vector<RoundDoneCallback> callbacks;
    absl::Status status;
    // Empty before the last round; else encoded into one of the chunk's PullBuffers, which
    // Deliver() shares with every worker's answer.
    std::string update;
    std::string aggregate;  // The push codec's answer (multi-round codecs).
    uint64_t step = 0;
    bool last_round = true;
  };

  // Validates one push and adds it to the accumulator. On error nothing has changed.
  // Requires mu.
  absl::Status Add(uint32_t worker, uint64_t push_step, uint32_t push_round,
                   absl::string_view payload);
  // accumulator += decode(payload), only if every sum is finite (nonfinite_policy REJECT and
  // SKIP); *finite false leaves the accumulator untouched. Requires mu.
  absl::Status DecodeAddFinite(uint64_t push_step, absl::string_view payload,
                               const RandomKey& key, bool* finite);
  // Every live worker has pushed the current round (and someone has). Requires mu.
  bool BarrierComplete() const;
  // Ends the complete round: FinishRound, or FinishStep after the last round. Requires mu.
  Completion Finish();
  Completion FinishRound();
  // The mean (or vote) of the pushes, or a multi-round codec's aggregate, whose answer goes
  // to *answer. Requires mu.
  absl::Span<const float> AggregateGradient(std::string* answer);
  Completion FinishStep(float learning_rate);
  // Restored chunks: joins the workers at the highest step pushed (see above); a push of a
  // higher step than the chunk's drops the pushes waiting for the current one into
  // *superseded (OUT_OF_RANGE). Requires mu and resuming.
  absl::Status FollowWorkers(uint64_t push_step, uint64_t run_end, Completion* superseded);
  // The chunk moves to a step where no worker will push (CompleteIfDone). Requires mu.
  void SkipStepsNoOneTakes();
  // Round `round` of the current step with nothing gathered (0: a step anew). Requires mu.
  void StartRound(uint32_t round);
  // Calls the completion's callbacks (outside the lock: a callback may push again).
  void Deliver(Completion& completion);

  const config::RunConfig& config_;
  Membership& membership_;
  // Guarded by core_->mu.
  uint32_t round_ = 0;             // Of the step in progress.
  std::vector<float> aggregate_;   // Multi-round codecs: the last round's gradient.
  std::vector<bool> arrived_;      // By worker, this round.
  uint32_t num_arrived_ = 0;
  // When this round's first push arrived (the barrier's start; consistency.worker_timeout_ms).
  std::chrono::steady_clock::time_point barrier_start_;
  std::vector<RoundDoneCallback> pending_;  // Of this round's accepted pushes.
  std::vector<float> scratch_;              // DecodeAddFinite(): the next accumulator.
  compress::SparseEntries pushed_;          // DecodeAddFinite(): a sparse push's entries.
  // While sums_sparse_, the accumulator is zero outside touched_: the entries sparse pushes
  // added to (repeats allowed) since StartRound() zeroed it. A dense add clears it.
  bool sums_sparse_ = false;
  std::vector<size_t> touched_;
  compress::SparseEntries gathered_;  // The mean at the entries sparse pushes touched.
};

}  // namespace tamp

#endif  // TAMP_SERVER_SYNC_CHUNK_H_
