#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "glog/logging.h"

namespace tamp {
namespace {

constexpr double kPi = 3.14159265358979323846;

absl::string_view KindName(config::Schedule::Kind kind) {
  switch (kind) {
    case config::Schedule::CONSTANT:
      return "CONSTANT";
    case config::Schedule::STEP:
      return "STEP";
    case config::Schedule::COSINE:
      return "COSINE";
    default:
      return "unknown";
  }
}

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("optimizer.schedule.", field, ": ", problem));
}

// Fields used by one kind only must be absent for the others.
absl::Status OnlyFor(bool present, absl::string_view field, config::Schedule::Kind owner,
                     config::Schedule::Kind kind) {
  if (!present || kind == owner) return absl::OkStatus();
  return FieldError(field, absl::StrCat("only used by kind ", KindName(owner), " (kind is ",
                                        KindName(kind), ")"));
}

// sched(s) of schedule.h, before warm-up.
double Scheduled(const config::Optimizer& spec, uint64_t step, uint64_t steps_per_epoch,
                 uint64_t total_steps, uint64_t warmup_steps) {
  const double base = spec.learning_rate();
  const config::Schedule& schedule = spec.schedule();
  switch (schedule.kind()) {
    case config::Schedule::STEP: {
      const uint64_t every =
          std::max<uint64_t>(1, EpochsToSteps(schedule.decay_epochs(), steps_per_epoch));
      return base * std::pow(schedule.decay_factor(), static_cast<double>(step / every));
    }
    case config::Schedule::COSINE: {
      double progress = 1;  // A run no longer than its warm-up has no cosine part.
      if (step < warmup_steps) {
        progress = 0;
      } else if (total_steps > warmup_steps) {
        progress = std::min(1.0, static_cast<double>(step - warmup_steps) /
                                     static_cast<double>(total_steps - warmup_steps));
      }
      const double min_lr = schedule.min_lr();
      return min_lr + (base - min_lr) * 0.5 * (1 + std::cos(kPi * progress));
    }
    default:
      return base;
  }
}

}  // namespace

bool ScheduleNeedsRunLength(const config::Schedule& schedule) {
  return schedule.kind() != config::Schedule::CONSTANT || schedule.warmup_epochs() > 0;
}

uint64_t EpochsToSteps(double epochs, uint64_t steps_per_epoch) {
  const double steps = std::round(epochs * static_cast<double>(steps_per_epoch));
  // 2^64 as a double; anything at or above it saturates.
  if (!(steps < 18446744073709551616.0)) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(steps);
}

double LearningRate(const config::Optimizer& spec, uint64_t step, uint64_t steps_per_epoch,
                    uint64_t total_steps) {
  const config::Schedule& schedule = spec.schedule();
  if (!ScheduleNeedsRunLength(schedule)) return spec.learning_rate();
  CHECK_GT(steps_per_epoch, 0u) << "the schedule needs the run's length";
  const uint64_t warmup_steps = EpochsToSteps(schedule.warmup_epochs(), steps_per_epoch);
  const double rate = Scheduled(spec, step, steps_per_epoch, total_steps, warmup_steps);
  if (step >= warmup_steps) return rate;
  return rate * (static_cast<double>(step) + 1) / static_cast<double>(warmup_steps);
}

absl::Status ValidateSchedule(const config::Optimizer& spec) {
  const config::Schedule& schedule = spec.schedule();
  const config::Schedule::Kind kind = schedule.kind();
  if (!config::Schedule::Kind_IsValid(kind)) {
    return FieldError("kind", absl::StrCat("unknown kind ", static_cast<int>(kind),
                                           " (known: CONSTANT, STEP, COSINE)"));
  }
  TAMP_RETURN_IF_ERROR(
      OnlyFor(schedule.has_decay_factor(), "decay_factor", config::Schedule::STEP, kind));
  TAMP_RETURN_IF_ERROR(
      OnlyFor(schedule.has_decay_epochs(), "decay_epochs", config::Schedule::STEP, kind));
  TAMP_RETURN_IF_ERROR(OnlyFor(schedule.has_min_lr(), "min_lr", config::Schedule::COSINE, kind));
  if (kind == config::Schedule::STEP) {
    if (!schedule.has_decay_factor()) return FieldError("decay_factor", "required for kind STEP");
    // Written as !(x > 0) etc. so NaN fails too.
    if (!(schedule.decay_factor() > 0 && schedule.decay_factor() <= 1)) {
      return FieldError("decay_factor",
                        absl::StrCat("must be in (0, 1], got ", schedule.decay_factor()));
    }
    if (!schedule.has_decay_epochs()) return FieldError("decay_epochs", "required for kind STEP");
    if (!(schedule.decay_epochs() > 0) || !std::isfinite(schedule.decay_epochs())) {
      return FieldError("decay_epochs",
                        absl::StrCat("must be > 0 and finite, got ", schedule.decay_epochs()));
    }
  }
  if (kind == config::Schedule::COSINE &&
      !(schedule.min_lr() >= 0 && schedule.min_lr() <= spec.learning_rate())) {
    return FieldError("min_lr", absl::StrCat("must be in [0, optimizer.learning_rate (",
                                             spec.learning_rate(), ")], got ", schedule.min_lr()));
  }
  if (!(schedule.warmup_epochs() >= 0) || !std::isfinite(schedule.warmup_epochs())) {
    return FieldError("warmup_epochs",
                      absl::StrCat("must be >= 0 and finite, got ", schedule.warmup_epochs()));
  }
  return absl::OkStatus();
}

}  // namespace tamp
