// Membership: which workers a shard's SYNC barriers wait for, and the run's length that the
// learning-rate schedule and the push codecs' sparsity warm-up need.
//
// Workers. The barriers wait for every worker at first. ExpireBarriers (server/shard.h)
// drops a worker a barrier waited for too long (DropMissing); its pushes are then refused
// ABORTED until it rejoins at a step (Admit), from which on it is waited for again.
//
// The run's length. Only workers know the data set, so the first accepted handshake fixes
// steps per epoch and total steps (FixRunLength); later handshakes must agree. Until it is
// fixed, schedules that need it and ratio warm-ups refuse to step (CheckScheduleReady).
//
// Threading: every method may be called from any thread. Two locks, in this order:
// run_length_mu_ (FixRunLength, held while the `admit` it is given runs, which takes chunk
// locks), then a chunk's mu (server/chunk.h), then members_mu_ (every method on the workers
// takes it, often under a chunk's mu; it is the innermost lock). The run's length, once fixed
// (release of run_length_fixed_), never changes and is read without a lock.
//
// Example:
//   Membership members(config, rank);
//   TAMP_RETURN_IF_ERROR(members.FixRunLength(64, 640, nullptr));
//   TAMP_RETURN_IF_ERROR(members.CheckMember(worker, step));  // Under the chunk's lock.
#ifndef TAMP_SERVER_MEMBERSHIP_H_
#define TAMP_SERVER_MEMBERSHIP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "proto/config.pb.h"

namespace tamp {

class Membership {
 public:
  // By worker (SYNC): the step from which the barriers wait for it and whether a barrier
  // timeout dropped it. For tests and diagnostics (Shard::members()).
  struct Entry {
    uint64_t from_step = 0;
    bool dropped = false;
    bool operator==(const Entry& other) const {
      return from_step == other.from_step && dropped == other.dropped;
    }
  };
  // The run's length as fixed by the first accepted handshake, {0, 0} before.
  struct RunLength {
    uint64_t steps_per_epoch = 0;
    uint64_t total_steps = 0;
    bool operator==(const RunLength& other) const {
      return steps_per_epoch == other.steps_per_epoch && total_steps == other.total_steps;
    }
  };

  // `config` (validated) outlives this.
  Membership(const config::RunConfig& config, uint32_t rank);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // ---- Workers (SYNC). Each takes members_mu_. ----

  // Membership::CheckMember()
  //
  // ABORTED when `worker` may not push `step`: dropped (naming the step, the wait and
  // consistency.worker_timeout_ms), or it rejoined at a later step.
  absl::Status CheckMember(uint32_t worker, uint64_t step) const;

  // Every worker the barrier of `step` waits for has `arrived` (by worker).
  bool AllLiveArrived(const std::vector<bool>& arrived, uint64_t step) const;

  // The first step any worker that is not dropped pushes (its from_step); none: UINT64_MAX.
  uint64_t FirstLiveStep() const;

  // Drops every worker the barrier of `step` waits for that has not `arrived`, after a wait
  // of `waited_ms`; returns them (the caller logs them).
  std::vector<uint32_t> DropMissing(const std::vector<bool>& arrived, uint64_t step,
                                    int64_t waited_ms);

  // Counts `worker` (in range) from `step` on, not dropped. The caller has checked that no
  // barrier has passed `step` (Shard's rejoin).
  void Admit(uint32_t worker, uint64_t step);

  std::vector<Entry> members() const;

  // ---- The run's length. ----

  // Membership::FixRunLength()
  //
  // Records the run's length from a worker's handshake. The first call fixes both values; a
  // later call with the same ones is OK, one with others FAILED_PRECONDITION naming both,
  // e.g. "steps_per_epoch: worker says 64, server 0 has 32 from the first handshake".
  // INVALID_ARGUMENT when either is 0, or when the pair cannot be this job's: total_steps =
  // min(training.epochs * steps_per_epoch, training.max_steps when set) (proto/tamp.proto
  // HandshakeRequest), and steps_per_epoch no more than the training set (data.train_limit
  // when set, else the most an IDX file holds) gives each worker in whole batches.
  // `admit`, when set, runs after the checks and before the length is fixed, under
  // run_length_mu_: its error is returned and nothing is fixed (a handshake's rejoin).
  absl::Status FixRunLength(uint64_t steps_per_epoch, uint64_t total_steps,
                            const std::function<absl::Status()>& admit);

  // Membership::RestoreStepsPerEpoch()
  //
  // For a shard restored from its checkpoint, before it serves: the steps per epoch the
  // checkpoint's shard had fixed (0: none). The first handshake then fixes the run's length
  // as usual, but must count the same steps per epoch (FAILED_PRECONDITION otherwise, e.g.
  // "steps_per_epoch: worker says 333, but server 0's checkpoint was written with 500 steps per
  // epoch ..."): another
  // data.batch_size, train_limit or cluster.num_workers would put the checkpoint's steps in
  // other epochs. total_steps may differ: a run resumed to train longer.
  void RestoreStepsPerEpoch(uint64_t steps_per_epoch);

  // The run's total_steps once fixed, else 0.
  uint64_t KnownTotalSteps() const;
  RunLength run_length() const;
  // What ChunkCore's warm-up reads as steps per epoch once CheckScheduleReady() passed.
  const uint64_t* steps_per_epoch() const { return &steps_per_epoch_; }
  // Some chunk's push codec has a sparsity warm-up, which cannot step before the run's
  // length is fixed. Only while the shard is built, before it serves.
  void NeedRunLengthForWarmup() { has_ratio_warmup_ = true; }

  // Membership::CheckScheduleReady()
  //
  // OK when the schedule can be evaluated and the push codecs picked: the run's length is
  // fixed, or neither the schedule nor a push codec's ratio_warmup needs it; else
  // FAILED_PRECONDITION saying what waits for the first handshake.
  absl::Status CheckScheduleReady() const;
  // The schedule's rate for `step`; requires CheckScheduleReady().
  float LearningRateAt(uint64_t step) const;

 private:
  struct Member {
    uint64_t from_step = 0;
    bool dropped = false;
    uint64_t dropped_at_step = 0;  // What a dropped worker's pushes are refused with.
    int64_t waited_ms = 0;
  };
  // Requires members_mu_.
  bool Live(uint32_t worker, uint64_t step) const;
  // CheckRunLength()/SetRunLength(): FixRunLength's check and change. Require run_length_mu_.
  absl::Status CheckRunLength(uint64_t steps_per_epoch, uint64_t total_steps) const;
  void SetRunLength(uint64_t steps_per_epoch, uint64_t total_steps);

  const config::RunConfig& config_;
  const uint32_t rank_;
  bool has_ratio_warmup_ = false;  // Fixed once the shard serves.

  mutable std::mutex members_mu_;
  std::vector<Member> members_;  // By worker; guarded by members_mu_.

  // Written once under run_length_mu_, before run_length_fixed_ is set (release); readers
  // that see the flag (acquire) read them without the lock, since they never change again.
  std::mutex run_length_mu_;
  std::atomic<bool> run_length_fixed_{false};
  uint64_t restored_steps_per_epoch_ = 0;  // RestoreStepsPerEpoch()'s; 0: none.
  uint64_t steps_per_epoch_ = 0;
  uint64_t total_steps_ = 0;
};

}  // namespace tamp

#endif  // TAMP_SERVER_MEMBERSHIP_H_
