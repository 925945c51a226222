// AsyncChunk: a chunk in consistency.mode ASYNC or SSP (docs/consistency.md): each push is
// applied on arrival, and answered relative to the weights its worker holds.
//
//   ASYNC  The chunk decodes the one worker's gradient, takes the codec's aggregate of that
//          single push (the value; its sign for vote codecs), scales it by 1 / num_workers so
//          the learning rate means what it does in SYNC (W pushes of gradient g move the
//          weights as one SYNC step of mean g would with plain SGD), and applies the optimizer
//          at the schedule's rate for the pushing worker's step. The chunk's step counts
//          applied pushes; each worker keeps its own step counter, and a worker's pushes must
//          come in step order 0, 1, 2, ... Workers' replicas differ, so the chunk keeps by
//          worker the weights that worker holds (its "view"): the answer is encode(w - view)
//          through the pull codec, keyed by the push step, and view += decode(answer), so what
//          the pull codec drops is carried into that worker's next answer (the pull_feedback
//          residual is not used). Memory: num_workers extra copies of the weights. A pull
//          resets the worker's view to the exact weights.
//   SSP    Stale-synchronous with staleness tau: as ASYNC, but worker w's push of its step s
//          is answered only once every worker has pushed step s - tau (s < the fewest pushes
//          of any worker + tau). The push is applied on arrival; its answer is parked (never
//          blocking the caller) and formed from the weights at release, when a later push
//          (the slowest's) unblocks it.
// Multi-round push codecs are SYNC-only (Shard refuses them).
//
// After a restore (server/shard_state.h), each worker's first push sets that worker's count,
// older pushes are answered OUT_OF_RANGE, and SSP's bound counts only the workers heard from
// since (a finished worker would otherwise hold the others at the checkpoint's count forever).
//
// Threading: as ShardChunk (server/chunk.h): every method takes the chunk's mu; answers are
// delivered after it is released.
//
// Example:
//   AsyncChunk chunk(std::move(core), config, &membership);
//   chunk.Push(worker, its_step, /*round=*/0, payload, std::move(done));  // Applied now.
#ifndef TAMP_SERVER_ASYNC_CHUNK_H_
#define TAMP_SERVER_ASYNC_CHUNK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/config.pb.h"
#include "server/chunk.h"
#include "server/membership.h"

namespace tamp {

class AsyncChunk : public ShardChunk {
 public:
  // The chunk over `core` for config.consistency() ASYNC or SSP; `core` has a single-round
  // push codec (Shard refuses others first). `config` and `membership` outlive the chunk.
  AsyncChunk(std::unique_ptr<ChunkCore> core, const config::RunConfig& config,
             const Membership* membership);

  // Errors, answered at once (nothing changes): INVALID_ARGUMENT for round != 0, a bad
  // payload, a NaN / Inf with validation.nonfinite_policy REJECT, or (restored) a step past the
  // run's end; ALREADY_EXISTS for a step this worker pushed; FAILED_PRECONDITION for a step
  // ahead of the worker's count; OUT_OF_RANGE (restored) behind it; the Close() reason.
  void Push(uint32_t worker, uint64_t step, uint32_t round, absl::string_view payload,
            RoundDoneCallback done) override;
  // Both kinds: the exact weights, which become the worker's view; the step is the worker's.
  uint64_t Pull(uint32_t worker, PullKind kind, std::string* values) override;
  void Close(const absl::Status& reason) override;
  void Export(checkpoint::ChunkState* out) const override;
  absl::Status CheckRestore(const checkpoint::ChunkState& saved) const override;
  void Restore(const checkpoint::ChunkState& saved) override;
  void SetWeights(absl::string_view bytes) override;
  ChunkSnapshot Snapshot() const override;

 private:
  // A push answered later (SSP), with what its answer needs.
  struct Parked {
    uint32_t worker;
    uint64_t step;
    RoundDoneCallback done;
  };
  // One formed answer, delivered after the lock is released.
  struct Answer {
    RoundDoneCallback done;
    absl::Status status;
    std::string update;
    uint64_t step = 0;
    uint64_t slowest = 0;
  };

  // Validates worker `worker`'s push of its step `push_step` and applies it at once: decode,
  // the codec's one-push aggregate scaled by 1 / num_workers, optimizer at `learning_rate`.
  // On error nothing has changed. Requires mu.
  absl::Status Add(uint32_t worker, uint64_t push_step, uint32_t push_round,
                   absl::string_view payload, float learning_rate);
  // SSP: a push of step s may be answered once s < SlowestPushes() + staleness. ASYNC:
  // always. Requires mu.
  bool MayAnswer(uint64_t push_step) const;
  // The fewest pushes of any worker; a restored chunk counts only the workers that pushed
  // since. Requires mu.
  uint64_t SlowestPushes() const;
  // A restored chunk: the first push of `worker` sets its count (see above); a push at or past
  // `run_end` (0: not known) is refused. Requires mu and resuming.
  absl::Status FollowWorker(uint32_t worker, uint64_t push_step, uint64_t run_end);
  // encode(w - view) through the pull codec, and view += decode(that). Requires mu.
  absl::Status AnswerFor(uint32_t worker, uint64_t push_step, std::string* payload);
  // Forms the answer of every parked push that may now be answered, in push order.
  // Requires mu.
  void ReleaseParked(std::vector<Answer>* out);

  const config::RunConfig& config_;
  const Membership& membership_;
  const uint64_t staleness_;  // SSP's tau; 0 for ASYNC (no bound).
  // Guarded by core_->mu. core_->step counts applied pushes.
  std::vector<uint64_t> worker_steps_;     // By worker: its pushes applied (its next step).
  std::vector<std::vector<float>> views_;  // By worker: the weights that worker holds.
  // By worker, while resuming: it has pushed since the restore (FollowWorker()).
  std::vector<bool> followed_;
  std::vector<Parked> parked_;  // SSP: accepted pushes not answered yet.
};

}  // namespace tamp

#endif  // TAMP_SERVER_ASYNC_CHUNK_H_
