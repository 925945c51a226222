#include "server/membership.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "job/config.h"
#include "optim/schedule.h"

namespace tamp {

Membership::Membership(const config::RunConfig& config, uint32_t rank)
    : config_(config), rank_(rank), members_(config.cluster().num_workers()) {}

bool Membership::Live(uint32_t worker, uint64_t step) const {
  const Member& member = members_[worker];
  return !member.dropped && step >= member.from_step;
}

absl::Status Membership::CheckMember(uint32_t worker, uint64_t step) const {
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

bool Membership::AllLiveArrived(const std::vector<bool>& arrived, uint64_t step) const {
  std::lock_guard<std::mutex> lock(members_mu_);
  for (uint32_t worker = 0; worker < arrived.size(); ++worker) {
    if (!arrived[worker] && Live(worker, step)) return false;
  }
  return true;
}

uint64_t Membership::FirstLiveStep() const {
  std::lock_guard<std::mutex> lock(members_mu_);
  uint64_t first_live = std::numeric_limits<uint64_t>::max();
  for (const Member& member : members_) {
    if (!member.dropped) first_live = std::min(first_live, member.from_step);
  }
  return first_live;
}

std::vector<uint32_t> Membership::DropMissing(const std::vector<bool>& arrived, uint64_t step,
                                              int64_t waited_ms) {
  std::lock_guard<std::mutex> lock(members_mu_);
  std::vector<uint32_t> dropped;
  for (uint32_t worker = 0; worker < arrived.size(); ++worker) {
    if (arrived[worker] || !Live(worker, step)) continue;
    Member& member = members_[worker];
    member.dropped = true;
    member.dropped_at_step = step;
    member.waited_ms = waited_ms;
    dropped.push_back(worker);
  }
  return dropped;
}

void Membership::Admit(uint32_t worker, uint64_t step) {
  std::lock_guard<std::mutex> lock(members_mu_);
  members_[worker] = Member{step};
}

std::vector<Membership::Entry> Membership::members() const {
  std::lock_guard<std::mutex> lock(members_mu_);
  std::vector<Entry> out;
  for (const Member& member : members_) out.push_back({member.from_step, member.dropped});
  return out;
}

absl::Status Membership::FixRunLength(uint64_t steps_per_epoch, uint64_t total_steps,
                                      const std::function<absl::Status()>& admit) {
  std::lock_guard<std::mutex> lock(run_length_mu_);
  TAMP_RETURN_IF_ERROR(CheckRunLength(steps_per_epoch, total_steps));
  // `admit` is the last thing that can fail; the run's length is fixed only after it.
  // Meanwhile no other handshake can fix another one (run_length_mu_), and a barrier that
  // `admit` lets complete before then does not need it (CheckScheduleReady() passed).
  if (admit) TAMP_RETURN_IF_ERROR(admit());
  SetRunLength(steps_per_epoch, total_steps);
  return absl::OkStatus();
}

void Membership::RestoreStepsPerEpoch(uint64_t steps_per_epoch) {
  std::lock_guard<std::mutex> lock(run_length_mu_);
  restored_steps_per_epoch_ = steps_per_epoch;
}

absl::Status Membership::CheckRunLength(uint64_t steps_per_epoch, uint64_t total_steps) const {
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
  if (restored_steps_per_epoch_ != 0 && steps_per_epoch != restored_steps_per_epoch_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "steps_per_epoch: worker says ", steps_per_epoch, ", but server ", rank_,
        "'s checkpoint was written with ", restored_steps_per_epoch_,
        " steps per epoch (changed since: data.batch_size, data.train_limit or "
        "cluster.num_workers?); resume with the settings it was written with, or remove it to "
        "start the run again"));
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

void Membership::SetRunLength(uint64_t steps_per_epoch, uint64_t total_steps) {
  if (run_length_fixed_.load(std::memory_order_relaxed)) return;  // Checked equal.
  steps_per_epoch_ = steps_per_epoch;
  total_steps_ = total_steps;
  run_length_fixed_.store(true, std::memory_order_release);
}

uint64_t Membership::KnownTotalSteps() const {
  return run_length_fixed_.load(std::memory_order_acquire) ? total_steps_ : 0;
}

Membership::RunLength Membership::run_length() const {
  if (!run_length_fixed_.load(std::memory_order_acquire)) return {};
  return {steps_per_epoch_, total_steps_};
}

absl::Status Membership::CheckScheduleReady() const {
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

float Membership::LearningRateAt(uint64_t step) const {
  // 0, 0 before a handshake: only for schedules that ignore them (CheckScheduleReady).
  const bool fixed = run_length_fixed_.load(std::memory_order_acquire);
  return static_cast<float>(LearningRate(config_.optimizer(), step, fixed ? steps_per_epoch_ : 0,
                                         fixed ? total_steps_ : 0));
}

}  // namespace tamp
