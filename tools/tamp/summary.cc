#include "tools/tamp/summary.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/median.h"
#include "base/proto_json.h"
#include "glog/logging.h"
#include "google/protobuf/util/json_util.h"

namespace tamp::launcher {

absl::StatusOr<events::WorkerEvent> ParseWorkerEvent(absl::string_view line) {
  // Cheap pre-check: most non-event lines are plain text.
  const size_t first = line.find_first_not_of(" \t\r");
  if (first == absl::string_view::npos || line[first] != '{') {
    return absl::InvalidArgumentError("not a JSON object");
  }
  events::WorkerEvent event;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(line.data(), line.size()), &event, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not a WorkerEvent: ", status.ToString()));
  }
  if (event.kind() == events::WorkerEvent::KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError("WorkerEvent without kind");
  }
  // A number is a valid JSON enum value, so {"kind": 42} parses; a worker never writes it.
  if (!events::WorkerEvent::Kind_IsValid(event.kind())) {
    return absl::InvalidArgumentError(absl::StrCat("WorkerEvent of unknown kind ", event.kind()));
  }
  return event;
}

SummaryBuilder::SummaryBuilder(int num_workers)
    : done_(num_workers),
      last_steps_(num_workers),
      reported_missed_(num_workers),
      restarted_(num_workers),
      latest_(num_workers),
      banked_(num_workers) {
  CHECK_GE(num_workers, 1);
}

MissedSteps SummaryBuilder::Add(int worker, const events::WorkerEvent& event) {
  MissedSteps missed;
  if (worker < 0 || worker >= static_cast<int>(done_.size())) return missed;
  latest_[worker] = {event.bytes_pushed(), event.bytes_pulled(), event.raw_bytes_pushed()};
  if (worker == 0) synthetic_ = event.synthetic();
  if (event.has_start_step() && !(start_step_ && *start_step_ <= event.start_step())) {
    start_step_ = event.start_step();
  }
  switch (event.kind()) {
    case events::WorkerEvent::STEP:
      if (worker == 0 && event.has_loss()) final_loss_ = event.loss();
      if (worker == 0) last_epoch_ = event.epoch();
      if (restarted_[worker]) {  // Its successor's first: it began where the run was.
        restarted_[worker] = false;
        // STEP's `step` counts the steps done, so its predecessor's last STEP, n, means
        // steps 0 to n - 1 (0-based, as start_step): it missed steps n to began - 1.
        const uint64_t began = event.has_start_step() ? event.start_step() : event.step() - 1;
        if (last_steps_[worker] > 0 && began > last_steps_[worker]) {
          missed = {began - last_steps_[worker], last_steps_[worker]};
        }
      }
      if (event.steps_missed() > reported_missed_[worker]) {
        missed.count += event.steps_missed() - reported_missed_[worker];
        missed.first = 0;  // Not all of them after the restart: which ones is not known.
        reported_missed_[worker] = event.steps_missed();
      }
      steps_missed_ += missed.count;
      last_steps_[worker] = std::max(last_steps_[worker], event.step());
      step_ms_.push_back(event.step_ms());
      compute_ms_.push_back(event.compute_ms());
      encode_ms_.push_back(event.encode_ms());
      wire_ms_.push_back(event.wire_ms());
      decode_ms_.push_back(event.decode_ms());
      apply_ms_.push_back(event.apply_ms());
      other_ms_.push_back(event.other_ms());
      hidden_percent_.push_back(event.comm_hidden_percent());
      break;
    case events::WorkerEvent::DONE:
      done_[worker] = event;
      break;
    default:
      break;
  }
  return missed;
}

bool SummaryBuilder::done(int worker) const { return done_.at(worker).has_value(); }

void SummaryBuilder::WorkerRestarted(int worker) {
  ++worker_restarts_;
  if (worker < 0 || worker >= static_cast<int>(done_.size())) return;
  banked_[worker].pushed += latest_[worker].pushed;
  banked_[worker].pulled += latest_[worker].pulled;
  banked_[worker].raw_pushed += latest_[worker].raw_pushed;
  latest_[worker] = {};
  done_[worker].reset();
  reported_missed_[worker] = 0;
  restarted_[worker] = true;
}

absl::StatusOr<events::RunSummary> SummaryBuilder::Build(const std::string& name, uint32_t epochs,
                                                         double wall_seconds) const {
  for (size_t j = 0; j < done_.size(); ++j) {
    if (!done_[j]) {
      return absl::FailedPreconditionError(absl::StrCat("worker ", j, " reported no DONE event"));
    }
  }
  events::RunSummary summary = Common(name, epochs, wall_seconds);
  summary.set_outcome("completed");
  if (done_[0]->has_test_accuracy()) summary.set_test_accuracy(done_[0]->test_accuracy());
  summary.set_steps(done_[0]->step());  // DONE carries the final step count in `step`.
  std::vector<double> medians;
  for (const std::optional<events::WorkerEvent>& done : done_) {
    // 0: the process ran no step (one restarted at the run's end), a median of nothing.
    if (done->step_ms_median() > 0) medians.push_back(done->step_ms_median());
  }
  summary.set_step_ms_median(Median(std::move(medians)));
  return summary;
}

events::RunSummary SummaryBuilder::BuildEnded(const std::string& name, uint32_t epochs,
                                              double wall_seconds, absl::string_view outcome,
                                              absl::string_view failure) const {
  events::RunSummary summary = Common(name, epochs, wall_seconds);
  summary.set_outcome(std::string(outcome));
  summary.set_failure(std::string(failure));
  if (done_[0] && done_[0]->has_test_accuracy()) {
    summary.set_test_accuracy(done_[0]->test_accuracy());
  }
  summary.set_steps(done_[0] ? done_[0]->step() : last_steps_[0]);
  if (summary.steps() == 0) summary.set_epochs(0);  // Ended before its first step.
  summary.set_step_ms_median(Median(step_ms_));
  return summary;
}

events::RunSummary SummaryBuilder::Common(const std::string& name, uint32_t epochs,
                                          double wall_seconds) const {
  events::RunSummary summary;
  summary.set_name(name);
  // Worker 0's DONE says; before it, its events do (each carries the flag).
  summary.set_synthetic(done_[0] ? done_[0]->synthetic() : synthetic_);
  summary.set_start_step(start_step_.value_or(0));
  summary.set_epochs(last_epoch_ ? *last_epoch_ + 1 : epochs);
  summary.set_wall_seconds(wall_seconds);
  // Each worker's last event (its DONE, where it sent one) holds its totals.
  uint64_t pushed = 0, pulled = 0, raw_pushed = 0;
  for (size_t j = 0; j < latest_.size(); ++j) {
    pushed += banked_[j].pushed + latest_[j].pushed;
    pulled += banked_[j].pulled + latest_[j].pulled;
    raw_pushed += banked_[j].raw_pushed + latest_[j].raw_pushed;
  }
  summary.set_bytes_pushed(pushed);
  summary.set_bytes_pulled(pulled);
  summary.set_compression_ratio(
      pushed == 0 ? 0.0 : static_cast<double>(raw_pushed) / static_cast<double>(pushed));
  if (final_loss_) summary.set_final_loss(*final_loss_);
  summary.set_server_restarts(server_restarts_);
  summary.set_worker_restarts(worker_restarts_);
  summary.set_worker_steps_missed(steps_missed_);
  summary.set_compute_ms_median(Median(compute_ms_));
  summary.set_encode_ms_median(Median(encode_ms_));
  summary.set_wire_ms_median(Median(wire_ms_));
  summary.set_decode_ms_median(Median(decode_ms_));
  summary.set_apply_ms_median(Median(apply_ms_));
  summary.set_other_ms_median(Median(other_ms_));
  summary.set_comm_hidden_percent_median(Median(hidden_percent_));
  return summary;
}

std::string StepMetricsJson(int worker, const events::WorkerEvent& step) {
  events::StepMetrics metrics;
  metrics.set_format_version(kJsonFormatVersion);
  metrics.set_worker(worker);
  metrics.set_step(step.step());
  if (step.has_loss()) metrics.set_loss(step.loss());
  metrics.set_step_ms(step.step_ms());
  uint64_t pushed = 0, pulled = 0;
  for (uint64_t bytes : step.step_shard_bytes_pushed()) pushed += bytes;
  for (uint64_t bytes : step.step_shard_bytes_pulled()) pulled += bytes;
  metrics.set_bytes_pushed(pushed);
  metrics.set_bytes_pulled(pulled);
  *metrics.mutable_shard_bytes_pushed() = step.step_shard_bytes_pushed();
  *metrics.mutable_shard_bytes_pulled() = step.step_shard_bytes_pulled();
  metrics.set_raw_bytes_pushed(step.step_raw_bytes_pushed());
  metrics.set_compression_ratio(step.step_compression_ratio());
  metrics.set_compute_ms(step.compute_ms());
  metrics.set_encode_ms(step.encode_ms());
  metrics.set_wire_ms(step.wire_ms());
  metrics.set_decode_ms(step.decode_ms());
  metrics.set_apply_ms(step.apply_ms());
  metrics.set_other_ms(step.other_ms());
  metrics.set_comm_ms(step.comm_ms());
  metrics.set_comm_hidden_percent(step.comm_hidden_percent());
  metrics.set_thread_cpu_ms(step.thread_cpu_ms());
  return ProtoToJson(metrics);
}

std::string EvalMetricsJson(int worker, const events::WorkerEvent& eval) {
  events::EvalMetrics metrics;
  metrics.set_format_version(kJsonFormatVersion);
  metrics.set_worker(worker);
  metrics.set_step(eval.step());
  metrics.set_epoch(eval.epoch());
  metrics.set_test_accuracy(eval.test_accuracy());
  return ProtoToJson(metrics);
}

std::string SummaryToJson(const events::RunSummary& summary) {
  events::RunSummary versioned = summary;
  versioned.set_format_version(kJsonFormatVersion);
  return ProtoToJson(versioned);
}

}  // namespace tamp::launcher
