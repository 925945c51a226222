// Learning-rate schedules: the rate step `s` of a run uses, from the optimizer's config and the
// run's length.
//
// Schedules are given in epochs (config::Schedule); a run's length is known only to the
// workers (it depends on the data set), so the server learns steps_per_epoch and total_steps
// from the first handshake. Epoch counts convert to steps as round(epochs * steps_per_epoch).
//
// With base = learning_rate, W = warm-up steps, T = total_steps:
//   CONSTANT  sched(s) = base
//   STEP      sched(s) = base * decay_factor^floor(s / D),  D = max(1, decay steps); the
//             boundaries count from step 0, so "every 30 epochs" decays at epochs 30, 60, ...
//             whatever the warm-up
//   COSINE    sched(s) = min_lr + (base - min_lr) * (1 + cos(pi * p)) / 2,
//             p = clamp((s - W) / (T - W), 0, 1): base until warm-up ends, min_lr at step T
//             (the step after the last, as torch's CosineAnnealingLR with T_max = T - W), so
//             the last step still learns when min_lr is 0
//   lr(s) = sched(s) * min(1, (s + 1) / W)   (warm-up composes with every kind; none if W = 0)
//
// Warm-up starts at 1/W of the rate rather than 0 so that no step is wasted on a zero rate.
//
// Example: lr 0.1, schedule { kind: STEP decay_factor: 0.1 decay_epochs: 30 warmup_epochs: 5 },
// 100 steps per epoch: steps 0..499 ramp 0.0002, 0.0004, ..., 0.1; steps 500..2999 use 0.1;
// steps 3000..5999 use 0.01; ...
#ifndef TAMP_OPTIM_SCHEDULE_H_
#define TAMP_OPTIM_SCHEDULE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "proto/config.pb.h"

namespace tamp {

// LearningRate()
//
// The learning rate of step `step` (0-based: the number of updates applied before it). A pure
// function. When the schedule needs the run's length (ScheduleNeedsRunLength()),
// `steps_per_epoch` must be >= 1 (CHECK); otherwise both are ignored. Steps at or past
// `total_steps` keep the rate of the end of the run.
double LearningRate(const config::Optimizer& spec, uint64_t step, uint64_t steps_per_epoch,
                    uint64_t total_steps);

// Whether LearningRate() depends on steps_per_epoch and total_steps: every kind but CONSTANT,
// and any warm-up.
bool ScheduleNeedsRunLength(const config::Schedule& schedule);

// round(epochs * steps_per_epoch), saturating at UINT64_MAX. `epochs` must be finite and >= 0.
uint64_t EpochsToSteps(double epochs, uint64_t steps_per_epoch);

// Checks spec.schedule() (given spec.learning_rate()); errors name the field, e.g.
//   "optimizer.schedule.decay_factor: must be in (0, 1], got 2"
//   "optimizer.schedule.min_lr: only used by kind COSINE (kind is STEP)"
// ValidateOptimizerSpec() calls it.
absl::Status ValidateSchedule(const config::Optimizer& spec);

}  // namespace tamp

#endif  // TAMP_OPTIM_SCHEDULE_H_
