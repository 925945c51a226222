// Shard: the state of one parameter-server shard: its synchronous (BSP) step, and the
// asynchronous (ASYNC) and stale-synchronous (SSP) modes.
//
// A shard owns the chunks JobLayout assigns to its rank. For each chunk it keeps the exact
// fp32 weights, the optimizer and its state, the push codec and an fp32 accumulator of the
// step's gradients, the set of workers that have pushed this step, the pull codec with the
// server-side residual, and the number of steps the chunk has completed.
//
// Each step of a chunk: every worker pushes its encoded gradient for that step; each push is
// decoded and added to the accumulator. The last push turns the sum into the mean, applies
// the optimizer at the schedule's rate for that step (optim/schedule.h; the run's length it
// needs comes from the first handshake, FixRunLength), encodes the update u = w_new - w_old
// through the pull codec and residual, and answers all the step's pushes with that one
// payload, so every worker applies the same bytes. Chunks advance independently: a worker
// may push chunk 5 of step 8 while chunk 6 is still gathering step 7.
//
// Multi-round push codecs (compress/codec.h Codec::rounds() > 1, e.g. powersgd) split a step
// into rounds 0 .. R-1, each gathered like a step: the chunk accepts pushes for its current
// (step, round) only; the last push of round r < R-1 has the codec aggregate the round
// (FinishRound) and answers every push of the round with the same `aggregate` bytes, and the
// chunk moves to round r + 1; the last push of round R-1 gets the codec's aggregate
// gradient, and the step ends as above, answered with the update and the codec's final
// `aggregate`. Single-round codecs are the case R = 1, with an empty `aggregate`.
//
// Consistency modes (config.consistency; docs/consistency.md). The above is SYNC, the default.
// ASYNC and SSP change only when a push is applied and when it is answered:
//   ASYNC  A push is applied on arrival: the shard decodes that one worker's gradient, takes
//          the codec's aggregate of that single push (the value; its sign for vote codecs),
//          scales it by 1 / num_workers so the learning rate means what it does in SYNC (W
//          pushes of gradient g move the weights as one SYNC step of mean g would with plain
//          SGD), and applies the optimizer at the schedule's rate for the pushing worker's
//          step. The chunk's step() counts applied pushes; each worker keeps its own step
//          counter, and a worker's pushes of a chunk must come in step order 0, 1, 2, ...
//          Workers' replicas differ, so the shard keeps per chunk and worker the weights that
//          worker holds (its "view"): the answer is encode(w - view) through the pull codec,
//          keyed by the push step, and view += decode(answer), so what the pull codec drops is
//          carried into that worker's next answer (the pull_feedback residual is not used in
//          these modes). Memory: num_workers extra copies of every chunk's weights.
//          PullWeights(worker, ...) resets that worker's views to the exact weights.
//   SSP    Stale-synchronous parallel with staleness tau: as ASYNC, but worker w's push for
//          its step s is answered only once every worker has pushed step s - tau of that
//          chunk (s < min over workers of pushes made + tau), so no worker runs more than tau
//          steps ahead of the slowest. The push is applied on arrival; its answer is parked
//          (never blocking the caller) and formed from the weights at release, when a later
//          push (the slowest's) unblocks it.
// Multi-round push codecs are SYNC-only (Create refuses them otherwise).
//
// Worker failure (SYNC; docs/consistency.md). The shard keeps which workers each step waits
// for: all of them at first. A chunk whose round has waited consistency.worker_timeout_ms
// since its first push, checked by ExpireBarriers() (the server's BarrierWatchdog calls it),
// drops every worker still missing from the whole shard (logged): the round completes over
// the workers that pushed (mean / vote / aggregate over those), later steps do not wait for
// a dropped worker, and its pushes are refused (ABORTED) until it rejoins: Rejoin(worker, s)
// counts it again from step s on. When every worker still counted rejoins at a later step
// (the job's only worker, or all of them, restarted), chunks that no push has reached skip to
// that step with their weights as they are: no worker will push the steps in between. Each shard decides alone; every worker that stays gets
// the same bytes for every chunk, so the replicas of those agree.
//
// Checkpoints and restarts (server/checkpoint.h, README "Checkpoints and failures").
// ExportState() copies every chunk's completed-step state (step, weights, optimizer state,
// pull-side memory; in ASYNC / SSP each worker's count of applied pushes; not the pushes
// gathered for the step in progress, nor SSP's parked ones, which the workers push again to
// a restarted server, nor the workers' views, which their resync resets). Restore() loads it
// into a new shard before it serves; each restored chunk then follows the workers. SYNC
// (ChunkState::FollowWorkers in shard.cc): it takes the highest step pushed to it as its
// own, answers pushes of lower steps OUT_OF_RANGE (their workers skip that step after
// pulling the weights), and is back in lock step once it completes a step. ASYNC / SSP
// (ChunkState::FollowWorker): each worker's first push since the restore sets that worker's
// count, older pushes are answered OUT_OF_RANGE, and SSP's bound counts only the workers
// heard from since (a finished worker would otherwise hold the others at the checkpoint's
// count forever). Multi-round push codecs: the checkpoint holds the state after the chunk's
// last completed step (the server's codec keeps nothing from one step to the next); a
// restored chunk follows the workers at round 0 of their step, and each worker pushes the
// step again from its first round (worker/client.h). Each process run has a random
// incarnation(); workers send the one their handshake returned with every push, and the
// service refuses other ones (UNAVAILABLE), so a worker never pushes to a restarted server
// before it has pulled that server's weights.
//
// Thread safety: all methods may be called concurrently. Each chunk has its own mutex, so
// pushes to different chunks run in parallel. PushPull never waits for other workers: it
// parks `done` and returns; completion callbacks run on the thread of the push that
// completed the step (or of the rejected push), never under a lock, so they may call back
// into the shard.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(std::unique_ptr<Shard> shard, Shard::Create(config, layout, rank));
//   shard->PushPull(worker, step, chunk_id, payload,
//                   [](absl::Status status, const std::string* update, uint64_t step) { ... });
//   shard->PushPullRound(worker, step, round, chunk_id, payload,
//                        [](absl::Status status, const Shard::PushAnswer* answer) { ... });
#ifndef TAMP_SERVER_SHARD_H_
#define TAMP_SERVER_SHARD_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "job/job_layout.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"
#include "proto/tamp.pb.h"

namespace tamp {

class Shard {
 public:
  // Called once per push. On success `update_payload` is the pull codec's encoding of the
  // chunk's update and `step` the number of steps the chunk has now completed (push step + 1);
  // the payload is valid only during the call. On error both are null/0.
  using DoneCallback =
      std::function<void(absl::Status status, const std::string* update_payload, uint64_t step)>;

  // What an accepted push of any round is answered with; valid only during the callback.
  struct PushAnswer {
    // Steps the chunk has completed: push step + 1 after the step's last round, else the
    // push step.
    uint64_t step = 0;
    // True when the answer ends the step (always, for single-round codecs).
    bool last_round = true;
    // The pull codec's encoding of the chunk's update; empty before the last round.
    const std::string* update = nullptr;
    // The push codec's answer to the round (Codec::FinishRound()); empty for single-round
    // codecs.
    const std::string* aggregate = nullptr;
    // ASYNC / SSP: the fewest pushes of this chunk any worker had made when the answer was
    // formed (SSP guarantees push step < slowest_pushes + tau). 0 in SYNC.
    uint64_t slowest_pushes = 0;
  };
  // Called once per push: with OK and the answer, or with an error and null.
  using RoundDoneCallback = std::function<void(absl::Status status, const PushAnswer* answer)>;

  // Shard::Create()
  //
  // Builds the state of shard `rank` and initialises its weights from
  // config.model().init_seed(), exactly as every other process would. `config` must be
  // validated and `layout` built from it.
  static absl::StatusOr<std::unique_ptr<Shard>> Create(const config::RunConfig& config,
                                                       const JobLayout& layout, uint32_t rank);

  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Shard::PushPull()
  //
  // Adds worker `worker`'s encoded gradient for chunk `chunk_id` and step `step`. `done` is
  // called exactly once: at once with an error, or with the update once all num_workers
  // workers have pushed this chunk and step. `payload` is only read before PushPull returns.
  // Errors (the chunk's state is left bit-for-bit as it was):
  //   INVALID_ARGUMENT     worker >= num_workers; chunk_id out of range; a bad payload; with
  //                        config.validation.nonfinite_policy REJECT (the default), a decoded
  //                        gradient holding NaN / Inf or making the step's sum overflow (SKIP
  //                        counts such a push as arrived with a zero contribution; ALLOW
  //                        does not look);
  //   NOT_FOUND            the chunk belongs to another shard;
  //   FAILED_PRECONDITION  `step` is not the chunk's current step; the schedule needs the
  //                        run's length and no handshake has fixed it yet (FixRunLength);
  //   ABORTED              SYNC: the worker was dropped from the barrier, e.g. "worker 1
  //                        was dropped at step 37 after 5000 ms without a push
  //                        (consistency.worker_timeout_ms); rejoin with a handshake", or it
  //                        rejoined at a later step than `step` (see Rejoin);
  //   ALREADY_EXISTS       this worker already pushed this chunk and step;
  //   OUT_OF_RANGE         a chunk restored from a checkpoint is at a later step than `step`
  //                        (see "Checkpoints and restarts" above): skip this step;
  //   UNAVAILABLE          the shard is closed (Close()).
  // For a chunk whose push codec takes several rounds, INVALID_ARGUMENT (use PushPullRound).
  void PushPull(uint32_t worker, uint64_t step, uint32_t chunk_id, absl::string_view payload,
                DoneCallback done);

  // Shard::PushPullRound()
  //
  // PushPull() for round `round` of the step (0 for single-round codecs). `done` is called
  // exactly once: at once with an error, or once all num_workers workers have pushed this
  // chunk, step and round. The errors of PushPull(), and:
  //   INVALID_ARGUMENT     `round` >= the push codec's rounds();
  //   FAILED_PRECONDITION  the chunk is in another round of `step` (e.g. "chunk 3 is at step
  //                        4 round 1, push was for step 4 round 0");
  //   ALREADY_EXISTS       this worker already pushed this chunk, step and round.
  void PushPullRound(uint32_t worker, uint64_t step, uint32_t round, uint32_t chunk_id,
                     absl::string_view payload, RoundDoneCallback done);

  // Shard::FixRunLength()
  //
  // Records the run's length from a worker's handshake: steps per epoch and steps in the whole
  // run, which the learning-rate schedule needs (schedules are given in epochs; only workers
  // know the data set). The first call fixes both; a later call with the same values is OK,
  // one with other values is FAILED_PRECONDITION naming both, e.g.
  //   "steps_per_epoch: worker says 64, server 0 has 32 from the first handshake"
  // INVALID_ARGUMENT, fixing nothing, when the pair cannot be this job's (CheckRunLength).
  absl::Status FixRunLength(uint64_t steps_per_epoch, uint64_t total_steps);

  // Shard::Join()
  //
  // What an accepted handshake changes, all or nothing: FixRunLength(steps_per_epoch,
  // total_steps), then, unless `rejoin_at_step` is 0, Rejoin(worker, rejoin_at_step). On any
  // error nothing has changed: a refused rejoin leaves the run's length unfixed.
  absl::Status Join(uint32_t worker, uint64_t steps_per_epoch, uint64_t total_steps,
                    uint64_t rejoin_at_step);

  // Shard::PullWeights()
  //
  // Exact weights of every chunk of the shard (little-endian fp32, chunk id order) and the
  // smallest number of steps any of them has completed. Chunks are copied one at a time, so
  // while a step is in flight they may come from different steps; workers pull between steps.
  absl::Status PullWeights(rpc::PullWeightsResponse* response) const;

  // Shard::PullWeights(worker, ...)
  //
  // PullWeights() for worker `worker` (INVALID_ARGUMENT when out of range), which the service
  // calls. SYNC: the same as above. ASYNC / SSP: also resets the worker's view of every chunk
  // to the weights returned (its next answers are relative to them), and the step is the
  // fewest pushes of any chunk this worker has had applied (its own step counter).
  absl::Status PullWeights(uint32_t worker, rpc::PullWeightsResponse* response);

  // Shard::PullReplica()
  //
  // For worker `worker` rejoining mid-run (SYNC): the weights the other workers hold, which
  // is the exact weights less what the pull residual still owes them; the residual is left
  // alone (PullWeights resets it, as every worker then holds the exact weights). Same step
  // and errors as PullWeights(worker, ...); ASYNC / SSP: PullWeights(worker, ...).
  absl::Status PullReplica(uint32_t worker, rpc::PullWeightsResponse* response);

  // Shard::InitWeights()
  //
  // model.kind REGISTERED: worker 0's initial weights, every chunk of the shard exactly once
  // with its exact length (rpc::InitWeightsRequest). Until they are set, PullWeights() and
  // PullReplica() answer awaiting_initial_weights with no chunks and pushes are refused
  // FAILED_PRECONDITION. FAILED_PRECONDITION for another worker or model kind; ALREADY_EXISTS
  // once set; INVALID_ARGUMENT for a malformed request. A refusal changes nothing.
  absl::Status InitWeights(uint32_t worker, const rpc::InitWeightsRequest& request);

  // Shard::ExpireBarriers()
  //
  // SYNC with a worker timeout: drops every worker that a chunk's current round has waited
  // for for at least consistency.worker_timeout_ms by time `now` (LOG(WARNING) naming it,
  // the step and chunk, and the wait), then completes every round that waits for nobody
  // else. Callbacks run on the calling thread. A no-op when the timeout is 0 or in ASYNC /
  // SSP. Tests pass a `now` in the future instead of sleeping.
  void ExpireBarriers(std::chrono::steady_clock::time_point now);

  // Shard::Rejoin()
  //
  // Worker `worker` (dropped, or a replacement process with its rank) will push from step
  // `step` on: its pushes of earlier steps are refused and earlier steps stop waiting for it
  // (completing those that waited only for it), and from `step` on every chunk waits for it
  // again. FAILED_PRECONDITION when a chunk has already passed `step` (its step is higher,
  // or it is at `step` beyond round 0 or with this worker's push) or in ASYNC / SSP;
  // INVALID_ARGUMENT when the worker is out of range, or when `step` is further ahead than a
  // worker can announce: past the run's end (once fixed), or more than kRejoinLead steps past
  // the shard's latest_step() (unless a chunk restored from a checkpoint has not caught up
  // with the workers yet, whose step it cannot know).
  absl::Status Rejoin(uint32_t worker, uint64_t step);

  // How far past latest_step() a rejoining worker may announce. It announces one past the
  // latest step of every shard, and no chunk of any shard is more than one step ahead of this
  // shard's latest (a step completes only once every live worker pushed it, and a worker
  // pushes a step only once every chunk completed the one before).
  static constexpr uint64_t kRejoinLead = 2;

  // How long a barrier waits for a missing push before ExpireBarriers() drops the worker
  // (consistency.worker_timeout_ms or its default); 0: forever.
  std::chrono::milliseconds worker_timeout() const { return worker_timeout_; }

  // Shard::Close()
  //
  // Fails every parked push with `reason` (an error, e.g. UNAVAILABLE "server shutting down")
  // and every later one too. Call it before shutting the RPC server down: shutdown waits for
  // every call to be answered, and a step that can no longer complete would never answer.
  void Close(const absl::Status& reason);

  // Shard::ExportState()
  //
  // Every chunk's state after its last completed step (proto/checkpoint.proto), chunk id
  // order. Each chunk is copied under its own lock, so chunks may be one step apart while
  // steps are in flight; each is consistent on its own, which is all Restore() needs.
  checkpoint::ShardState ExportState() const;

  // Shard::Restore()
  //
  // Loads `state` (from ExportState() of this shard of the same job; server/checkpoint.h
  // checks the job) into this shard before it serves; its chunks then follow the workers
  // (above). INVALID_ARGUMENT naming the chunk and field when the state does not fit (chunk
  // ids, value counts, optimizer or feedback buffers, the workers' counts of ASYNC / SSP);
  // nothing changes then.
  absl::Status Restore(const checkpoint::ShardState& state);

  // This process's random, non-zero id of the shard; a restarted server has another one.
  uint64_t incarnation() const { return incarnation_; }

  // Steps completed by every chunk of the shard (0 when the shard has no chunks).
  uint64_t step() const;
  // The most steps any chunk of the shard has completed: step() or, mid-step, step() + 1.
  uint64_t latest_step() const;

  // The run's length as fixed by the first accepted handshake (FixRunLength), {0, 0} before.
  struct RunLength {
    uint64_t steps_per_epoch = 0;
    uint64_t total_steps = 0;
    bool operator==(const RunLength& other) const {
      return steps_per_epoch == other.steps_per_epoch && total_steps == other.total_steps;
    }
  };
  RunLength run_length() const;

  // By worker (SYNC): the step from which the barriers wait for it (Rejoin) and whether a
  // barrier timeout dropped it. For tests and diagnostics.
  struct Membership {
    uint64_t from_step = 0;
    bool dropped = false;
    bool operator==(const Membership& other) const {
      return from_step == other.from_step && dropped == other.dropped;
    }
  };
  std::vector<Membership> members() const;

  uint32_t rank() const { return rank_; }
  const config::RunConfig& config() const { return config_; }
  const JobLayout& layout() const { return layout_; }
  // Ids of the shard's chunks, ascending.
  const std::vector<uint32_t>& chunk_ids() const { return chunk_ids_; }

  // Copies of one chunk's state, for tests and diagnostics. NOT_FOUND for a chunk that is
  // not on this shard.
  struct ChunkSnapshot {
    uint64_t step = 0;
    uint32_t round = 0;                // Within the step (multi-round push codecs).
    std::vector<float> weights;
    std::vector<float> accumulator;    // Of the current round.
    std::vector<bool> arrived;         // By worker, this round.
    std::vector<float> pull_residual;  // Empty when the pull side keeps no memory.
    // ASYNC / SSP (empty in SYNC): by worker, its pushes applied and its view of the chunk.
    std::vector<uint64_t> worker_steps;
    std::vector<std::vector<float>> views;
    // Pushes of this chunk that config.validation.nonfinite_policy SKIP counted as zero.
    uint64_t nonfinite_skipped = 0;
  };
  absl::StatusOr<ChunkSnapshot> Snapshot(uint32_t chunk_id) const;

 private:
  struct ChunkState;
  // The answer to every push of one completed round, delivered after the lock is released.
  struct Completion;

  Shard(const config::RunConfig& config, const JobLayout& layout, uint32_t rank);

  // The initial state of chunk `id` (weights initialised, optimizer and codecs created).
  absl::StatusOr<std::unique_ptr<ChunkState>> NewChunk(uint32_t id) const;
  // Which steps a worker's pushes are waited for (SYNC): from `from_step` on, unless dropped.
  struct Member {
    uint64_t from_step = 0;
    bool dropped = false;
    uint64_t dropped_at_step = 0;  // What a dropped worker's pushes are refused with.
    int64_t waited_ms = 0;
  };
  // Requires members_mu_.
  bool Live(uint32_t worker, uint64_t step) const;
  // ABORTED when `worker` may not push `step` (dropped, or it rejoined at a later step).
  absl::Status CheckMember(uint32_t worker, uint64_t step) const;
  // Rejoin() up to completing the barriers that no longer wait for `worker`: checks, then
  // counts the worker from `step` on. Nothing changes on error.
  absl::Status AdmitRejoin(uint32_t worker, uint64_t step);
  // OK when (steps_per_epoch, total_steps) may be fixed or is the length fixed already.
  // INVALID_ARGUMENT when either is 0; once a length is fixed, FAILED_PRECONDITION for any
  // other; before, INVALID_ARGUMENT unless the pair can be this job's: total_steps =
  // min(training.epochs * steps_per_epoch, training.max_steps when set) (proto/tamp.proto
  // HandshakeRequest), and steps_per_epoch no more than the training set (data.train_limit
  // when set, else the most an IDX file holds) gives each worker in whole batches. Requires
  // run_length_mu_.
  absl::Status CheckRunLength(uint64_t steps_per_epoch, uint64_t total_steps) const;
  // Fixes the run's length once CheckRunLength() passed. Requires run_length_mu_.
  void SetRunLength(uint64_t steps_per_epoch, uint64_t total_steps);
  // The run's total_steps once fixed, else 0.
  uint64_t KnownTotalSteps() const;
  // Every live worker has pushed the chunk's current round (and someone has). Requires
  // chunk.mu.
  bool BarrierComplete(const ChunkState& chunk) const;
  // Ends the chunk's complete round: FinishRound, or FinishStep after the last round.
  // Requires chunk.mu.
  Completion Finish(ChunkState& chunk) const;
  // Calls the completion's callbacks (outside any lock: a callback may push again).
  static void Deliver(Completion& completion);
  // Completes every SYNC chunk whose round no longer waits for anyone (after a drop or
  // rejoin). Takes each chunk's lock in turn.
  void CompleteBarriers();
  // A chunk that no push has reached in its step, where no worker is live (every one that
  // is not dropped rejoins at a later step: the only worker of the job, or all of them, died
  // and rejoined), moves to the first step a worker will push, applying nothing: no one
  // would ever complete the steps in between. Requires chunk.mu.
  void SkipStepsNoOneTakes(ChunkState& chunk) const;
  // PushPullRound() of an ASYNC / SSP chunk.
  void PushAsync(ChunkState& chunk, uint32_t worker, uint64_t step, uint32_t round,
                 absl::string_view payload, RoundDoneCallback done);
  // The chunk `chunk_id` if this shard owns it, else the error PushPull reports.
  absl::StatusOr<ChunkState*> Find(uint32_t chunk_id) const;
  // OK when the schedule can be evaluated and the push codecs picked: the run's length is
  // fixed, or neither the schedule nor a push codec's ratio_warmup needs it.
  absl::Status CheckScheduleReady() const;
  // The schedule's rate for `step`; requires CheckScheduleReady().
  float LearningRateAt(uint64_t step) const;

  const config::RunConfig config_;
  const JobLayout layout_;
  // False until worker 0 has set the initial weights (model.kind REGISTERED); true from the
  // start for the built-in models, which the shard initialises from model.init_seed.
  std::atomic<bool> weights_ready_;
  std::mutex init_mu_;  // Serialises InitWeights().
  const uint32_t rank_;
  std::vector<uint32_t> chunk_ids_;
  // Indexed by chunk id; null for chunks of other shards. Set up in Create(), then fixed.
  std::vector<std::unique_ptr<ChunkState>> chunks_;
  // Some chunk's push codec has a sparsity warm-up, which needs steps_per_epoch. Set in
  // Create(), then fixed.
  bool has_ratio_warmup_ = false;
  const uint64_t incarnation_ = NewIncarnation();
  static uint64_t NewIncarnation();

  // The run's length (FixRunLength). Written once under run_length_mu_, before
  // run_length_fixed_ is set (release); readers that see the flag (acquire) read them
  // without the lock, since they never change again. Lock order: run_length_mu_, then the
  // chunks' mu (Join).
  std::mutex run_length_mu_;
  std::atomic<bool> run_length_fixed_{false};
  uint64_t steps_per_epoch_ = 0;
  uint64_t total_steps_ = 0;

  const std::chrono::milliseconds worker_timeout_;
  // Lock order: a chunk's mu, then members_mu_.
  mutable std::mutex members_mu_;
  std::vector<Member> members_;  // By worker; guarded by members_mu_.
};

}  // namespace tamp

#endif  // TAMP_SERVER_SHARD_H_
