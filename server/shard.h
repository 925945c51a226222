// Shard: one parameter-server shard, a router over the chunks JobLayout assigns to its rank.
//
// The shard finds the chunk a push or pull names, checks what every mode checks (the worker's
// rank, the chunk's owner, the schedule and the initial weights ready), and hands the call to
// the chunk. The chunk types hold the modes (docs/consistency.md):
//   server/sync_chunk.h   SYNC (the default): each step (and each round of a multi-round push
//                         codec) waits at a barrier for every live worker's push; every worker
//                         gets the same update. Single-round codecs are round 0 of 1.
//   server/async_chunk.h  ASYNC and SSP: pushes applied on arrival, answered relative to the
//                         weights the worker holds (SSP parks answers to bound staleness).
//   server/chunk.h        What every chunk holds (weights, optimizer, codecs, pull residual).
//   server/membership.h   Which workers SYNC barriers wait for; the run's length.
//   server/shard_state.h  Export and restore of the chunks for checkpoints.
// Chunks advance independently: a worker may push chunk 5 of step 8 while chunk 6 is still
// gathering step 7.
//
// Worker failure (SYNC; docs/consistency.md). The shard keeps which workers each step waits
// for: all of them at first. A chunk whose round has waited consistency.worker_timeout_ms
// since its first push, checked by ExpireBarriers() (the server's BarrierWatchdog calls it),
// drops every worker still missing from the whole shard (logged): the round completes over
// the workers that pushed (mean / vote / aggregate over those), later steps do not wait for
// a dropped worker, and its pushes are refused (ABORTED) until it rejoins: a handshake with
// rejoin_at_step s (Join) counts it again from step s on. When every worker still counted
// rejoins at a later step (the job's only worker, or all of them, restarted), chunks that no
// push has reached skip to that step with their weights as they are: no worker will push the
// steps in between. Each shard decides alone; every worker that stays gets the same bytes for
// every chunk, so the replicas of those agree.
//
// Checkpoints and restarts (server/checkpoint.h, server/shard_state.h, README "Checkpoints
// and failures"). ExportState() copies every chunk's completed-step state; Restore() loads it
// into a new shard before it serves, and each restored chunk then follows the workers. Each
// process run has a random incarnation(); workers send the one their handshake returned with
// every push, and the service refuses other ones (UNAVAILABLE), so a worker never pushes to a
// restarted server before it has pulled that server's weights.
//
// Thread safety: all methods may be called concurrently. Each chunk has its own mutex, so
// pushes to different chunks run in parallel. PushPullRound never waits for other workers: it
// parks `done` and returns; completion callbacks run on the thread of the push that
// completed the step (or of the rejected push), never under a lock, so they may call back
// into the shard. Locks, outermost first: Membership's run-length lock (Join), the chunks'
// locks (a rejoin holds all of them, in chunk id order), Membership's members lock.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(std::unique_ptr<Shard> shard, Shard::Create(config, layout, rank));
//   shard->PushPullRound(worker, step, /*round=*/0, chunk_id, payload,
//                        [](absl::Status status, const Shard::PushAnswer* answer) { ... });
#ifndef TAMP_SERVER_SHARD_H_
#define TAMP_SERVER_SHARD_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/random_id.h"
#include "job/job_layout.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"
#include "proto/tamp.pb.h"
#include "server/chunk.h"
#include "server/membership.h"
#include "server/sync_chunk.h"

namespace tamp {

class Shard {
 public:
  // What an accepted push of any round is answered with (server/chunk.h).
  using PushAnswer = ::tamp::PushAnswer;
  // Called once per push: with OK and the answer, or with an error and null.
  using RoundDoneCallback = ::tamp::RoundDoneCallback;

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

  // Shard::PushPullRound()
  //
  // Adds worker `worker`'s encoded gradient for chunk `chunk_id`, step `step` and round
  // `round` of the step (0 for single-round codecs, whose steps are one round). `done` is
  // called exactly once: at once with an error, or with the answer once all num_workers
  // workers have pushed this chunk, step and round (SYNC; ASYNC / SSP as async_chunk.h says).
  // `payload` is only read before PushPullRound returns.
  // Errors (the chunk's state is left bit-for-bit as it was):
  //   INVALID_ARGUMENT     worker >= num_workers; chunk_id out of range; `round` >= the push
  //                        codec's rounds(); a bad payload; with
  //                        config.validation.nonfinite_policy REJECT (the default), a decoded
  //                        gradient holding NaN / Inf or making the step's sum overflow (SKIP
  //                        counts such a push as arrived with a zero contribution; ALLOW
  //                        does not look);
  //   NOT_FOUND            the chunk belongs to another shard;
  //   FAILED_PRECONDITION  `step` is not the chunk's current step, or the chunk is in another
  //                        round of it (e.g. "chunk 3 is at step 4 round 1, push was for step
  //                        4 round 0"); the schedule needs the run's length and no handshake
  //                        has fixed it yet (Join); model.kind REGISTERED and worker
  //                        0 has not set the initial weights yet;
  //   ABORTED              SYNC: the worker was dropped from the barrier, e.g. "worker 1
  //                        was dropped at step 37 after 5000 ms without a push
  //                        (consistency.worker_timeout_ms); rejoin with a handshake", or it
  //                        rejoined at a later step than `step` (see Join);
  //   ALREADY_EXISTS       this worker already pushed this chunk, step and round;
  //   OUT_OF_RANGE         a chunk restored from a checkpoint is at a later step than `step`
  //                        (see "Checkpoints and restarts" above): skip this step;
  //   UNAVAILABLE          the shard is closed (Close()).
  void PushPullRound(uint32_t worker, uint64_t step, uint32_t round, uint32_t chunk_id,
                     absl::string_view payload, RoundDoneCallback done);

  // Shard::Join()
  //
  // What an accepted handshake changes, all or nothing. The run's length: steps per epoch and
  // steps in the whole run, which the learning-rate schedule needs (schedules are given in
  // epochs; only workers know the data set). The first handshake fixes both; a later one with
  // the same values is OK, one with other values is FAILED_PRECONDITION naming both, e.g.
  //   "steps_per_epoch: worker says 64, server 0 has 32 from the first handshake"
  // INVALID_ARGUMENT when the pair cannot be this job's (Membership::FixRunLength).
  //
  // Then, unless `rejoin_at_step` is 0 (SYNC): worker `worker` (dropped, or a replacement
  // process with its rank) will push from step `rejoin_at_step` on: its pushes of earlier
  // steps are refused and earlier steps stop waiting for it (completing those that waited
  // only for it), and from that step on every chunk waits for it again. FAILED_PRECONDITION
  // when a chunk has already passed the step (its step is higher, or it is at the step beyond
  // round 0 or with this worker's push) or in ASYNC / SSP; INVALID_ARGUMENT when the worker is
  // out of range, or when the step is further ahead than a worker can announce: past the
  // run's end (once fixed), or more than kRejoinLead steps past the shard's latest_step()
  // (unless a chunk restored from a checkpoint has not caught up with the workers yet, whose
  // step it cannot know).
  //
  // On any error nothing has changed: a refused rejoin leaves the run's length unfixed.
  absl::Status Join(uint32_t worker, uint64_t steps_per_epoch, uint64_t total_steps,
                    uint64_t rejoin_at_step);

  // Shard::PullWeights()
  //
  // Exact weights of every chunk of the shard (little-endian fp32, chunk id order) for worker
  // `worker` (INVALID_ARGUMENT when out of range), and the smallest step of any of them.
  // Chunks are copied one at a time, so while a step is in flight they may come from
  // different steps; workers pull between steps. SYNC: the step is the steps completed, and
  // the pull residual is dropped (every worker then holds the exact weights). ASYNC / SSP:
  // also resets the worker's view of every chunk to the weights returned (its next answers are
  // relative to them), and the step is the fewest pushes of any chunk this worker has had
  // applied (its own step counter).
  // `min_generation` > 0: answers awaiting_initial_weights until worker 0 has set the
  // weights that many times (InitWeights()), so that the workers of a broadcast get its
  // weights.
  absl::Status PullWeights(uint32_t worker, rpc::PullWeightsResponse* response,
                           uint32_t min_generation = 0);

  // Shard::PullReplica()
  //
  // For worker `worker` rejoining mid-run (SYNC): the weights the other workers hold, which
  // is the exact weights less what the pull residual still owes them; the residual is left
  // alone (PullWeights resets it, as every worker then holds the exact weights). Same step
  // and errors as PullWeights(); ASYNC / SSP: PullWeights().
  absl::Status PullReplica(uint32_t worker, rpc::PullWeightsResponse* response);

  // Shard::InitWeights()
  //
  // Worker 0's weights, every chunk of the shard exactly once with its exact length
  // (rpc::InitWeightsRequest). Generation 0: model.kind REGISTERED's initial weights; until
  // they are set, PullWeights() and PullReplica() answer awaiting_initial_weights with no
  // chunks and pushes are refused FAILED_PRECONDITION; ALREADY_EXISTS once set, and for
  // another model kind FAILED_PRECONDITION. Generation g >= 1 (a broadcast of worker 0's
  // weights before the first step, whatever the kind): replaces the weights the shard holds
  // as generation g - 1 (the initial ones are 1); ALREADY_EXISTS for g itself again,
  // FAILED_PRECONDITION for another g or once a step has completed. FAILED_PRECONDITION for
  // another worker; INVALID_ARGUMENT for a malformed request. A refusal changes nothing.
  // A broadcast before every worker has pulled generation g - 1 (PullWeights()) sets
  // nothing either and answers OK with `response` awaiting_readers, naming them: otherwise
  // a slow worker waiting for g - 1 would get g.
  absl::Status InitWeights(uint32_t worker, const rpc::InitWeightsRequest& request,
                           rpc::InitWeightsResponse* response);

  // Shard::ExpireBarriers()
  //
  // SYNC with a worker timeout: drops every worker that a chunk's current round has waited
  // for for at least consistency.worker_timeout_ms by time `now` (LOG(WARNING) naming it,
  // the step and chunk, and the wait), then completes every round that waits for nobody
  // else. Callbacks run on the calling thread. A no-op when the timeout is 0 or in ASYNC /
  // SSP. Tests pass a `now` in the future instead of sleeping.
  void ExpireBarriers(std::chrono::steady_clock::time_point now);

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
  // Every chunk's state after its last completed step (server/shard_state.h), chunk id
  // order. Each chunk is copied under its own lock, so chunks may be one step apart while
  // steps are in flight; each is consistent on its own, which is all Restore() needs.
  checkpoint::ShardState ExportState() const;

  // Shard::Restore()
  //
  // Loads `state` (from ExportState() of this shard of the same job; server/checkpoint.h
  // checks the job) into this shard before it serves; its chunks then follow the workers.
  // INVALID_ARGUMENT naming the chunk and field when the state does not fit (chunk ids,
  // value counts, optimizer or feedback buffers, the workers' counts of ASYNC / SSP);
  // nothing changes then. Workers that count the run's epochs in other steps than the
  // state's are refused (Membership::RestoreStepsPerEpoch).
  absl::Status Restore(const checkpoint::ShardState& state);

  // This process's random, non-zero id of the shard; a restarted server has another one.
  uint64_t incarnation() const { return incarnation_; }

  // Steps completed by every chunk of the shard (0 when the shard has no chunks).
  uint64_t step() const;
  // The most steps any chunk of the shard has completed: step() or, mid-step, step() + 1.
  uint64_t latest_step() const;
  // SYNC: whether a step in progress on some chunk holds a push of worker `worker` (a process
  // of that rank pushed part of it); false in ASYNC / SSP, and for an unknown worker.
  bool HoldsPushOf(uint32_t worker) const;

  // The run's length as fixed by the first accepted handshake (Join), {0, 0} before.
  using RunLength = ::tamp::Membership::RunLength;
  RunLength run_length() const { return membership_.run_length(); }

  // By worker (SYNC): the step from which the barriers wait for it (Join) and whether a
  // barrier timeout dropped it. For tests and diagnostics.
  using Membership = ::tamp::Membership::Entry;
  std::vector<Membership> members() const { return membership_.members(); }

  uint32_t rank() const { return rank_; }
  const config::RunConfig& config() const { return config_; }
  const JobLayout& layout() const { return layout_; }
  // Ids of the shard's chunks, ascending.
  const std::vector<uint32_t>& chunk_ids() const { return chunk_ids_; }

  // Copies of one chunk's state, for tests and diagnostics. NOT_FOUND for a chunk that is
  // not on this shard.
  using ChunkSnapshot = ::tamp::ChunkSnapshot;
  absl::StatusOr<ChunkSnapshot> Snapshot(uint32_t chunk_id) const;

 private:
  Shard(const config::RunConfig& config, const JobLayout& layout, uint32_t rank);

  // The chunk `id` for the consistency mode, in its initial state.
  absl::StatusOr<std::unique_ptr<ShardChunk>> NewChunk(uint32_t id);
  // The chunk `chunk_id` if this shard owns it, else the error PushPullRound reports.
  absl::StatusOr<ShardChunk*> Find(uint32_t chunk_id) const;
  // INVALID_ARGUMENT unless `worker` is one of the job's.
  absl::Status CheckWorker(uint32_t worker) const;
  // PullWeights() and PullReplica(): every chunk's Pull() of `kind` for `worker`.
  absl::Status Pull(uint32_t worker, PullKind kind, uint32_t min_generation,
                    rpc::PullWeightsResponse* response);
  // Join()'s rejoin up to completing the barriers that no longer wait for `worker`: checks,
  // then counts the worker from `step` on. Nothing changes on error.
  absl::Status AdmitRejoin(uint32_t worker, uint64_t step);
  // Completes every SYNC chunk whose round no longer waits for anyone (after a drop or
  // rejoin). Takes each chunk's lock in turn.
  void CompleteBarriers();
  // The shard's chunks in chunk id order.
  std::vector<ShardChunk*> OwnChunks() const;

  const config::RunConfig config_;
  const JobLayout layout_;
  // How many times the weights were set: 0 until worker 0 has set the initial weights
  // (model.kind REGISTERED); 1 from the start for the built-in models, which the shard
  // initialises from model.init_seed; one more per broadcast (InitWeights()).
  std::atomic<uint32_t> weights_generation_;
  std::mutex init_mu_;  // Serialises InitWeights().
  // By worker, the latest generation of the weights it has (what PullWeights() handed it;
  // worker 0: also what it set). Guarded by init_mu_.
  std::vector<uint32_t> generation_held_;
  const uint32_t rank_;
  std::vector<uint32_t> chunk_ids_;
  const uint64_t incarnation_ = RandomNonZeroId();
  const std::chrono::milliseconds worker_timeout_;
  // Workers and the run's length; its locks are described in server/membership.h.
  ::tamp::Membership membership_;
  // Indexed by chunk id; null for chunks of other shards. Set up in Create(), then fixed.
  std::vector<std::unique_ptr<ShardChunk>> chunks_;
  // SYNC: the shard's chunks (those of chunks_), in chunk id order, for the barrier's
  // timeouts and rejoins; empty in ASYNC / SSP. Set up in Create(), then fixed.
  std::vector<SyncChunk*> sync_chunks_;
};

}  // namespace tamp

#endif  // TAMP_SERVER_SHARD_H_
