// Worker events in, run summary out: parsing of the workers' stdout lines and aggregation of
// their DONE events into a tamp.events.RunSummary.
//
// Example:
//   SummaryBuilder builder(/*num_workers=*/2);
//   for each line of worker j:
//     absl::StatusOr<events::WorkerEvent> e = ParseWorkerEvent(line);
//     if (e.ok()) builder.Add(j, *e); else log the line;
//   TAMP_ASSIGN_OR_RETURN(events::RunSummary s, builder.Build("mlp", 1, 12.5));
#ifndef TAMP_TOOLS_TAMP_SUMMARY_H_
#define TAMP_TOOLS_TAMP_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/events.pb.h"

namespace tamp::launcher {

// ParseWorkerEvent()
//
// Parses one line a worker wrote to stdout: a tamp.events.WorkerEvent as base/proto_json.h
// writes it (with protobuf's JSON parser, which also takes older workers' lowerCamelCase names
// and integers as strings; unknown fields ignored). INVALID_ARGUMENT if the line is not JSON,
// not a WorkerEvent, or has no kind or one events.proto does not define; the caller then
// treats it as a log line.
absl::StatusOr<events::WorkerEvent> ParseWorkerEvent(absl::string_view line);

// SummaryBuilder
//
// Collects the events of `num_workers` workers and builds the RunSummary:
//   test_accuracy, steps   worker 0's DONE (its `step`: the number of steps run)
//   start_step             the least start_step of any event (0 if none): where the run
//                          resumed from the servers' checkpoints
//   step_ms_median         median over the workers' DONE step_ms_median (of those that
//                          ran a step: a process restarted at the run's end ran none)
//   bytes_pushed/pulled    sums of the workers' DONE values
//   compression_ratio      sum raw_bytes_pushed / sum bytes_pushed (0 if nothing pushed)
//   final_loss             loss of worker 0's last STEP (0 if none)
//   <x>_ms_median          compute, encode, wire, decode, apply: median over every STEP
//                          of every worker (0 if none)
//   comm_hidden_percent_median  likewise, of comm_hidden_percent
//   epochs                 epochs begun by worker 0's steps (its last STEP's epoch + 1; the
//                          last may be partial, as training.max_steps cuts it); the caller's
//                          (the config's) when worker 0 reported no STEP
//   worker_steps_missed    the steps workers took no part in: what their processes' STEP
//                          events say (steps_missed: a barrier dropped them), and for a
//                          restarted worker, the steps between its predecessor's last STEP and
//                          the step its successor began (start_step)
// name and wall_seconds come from the caller.

// What one STEP event shows a worker missed (SummaryBuilder::Add()).
struct MissedSteps {
  uint64_t count = 0;  // 0: nothing.
  // A restarted worker's: the first step it missed (the run went on without it from there).
  // 0 for steps a barrier dropped it from: its events count them but do not say which.
  uint64_t first = 0;
};

class SummaryBuilder {
 public:
  explicit SummaryBuilder(int num_workers);

  // Records an event of worker `worker` (its rank as the launcher started it; the event's
  // own `worker` field is not trusted), and returns the steps it shows that worker missed.
  // Events of unknown ranks are ignored.
  MissedSteps Add(int worker, const events::WorkerEvent& event);

  // Whether worker `worker` has reported DONE.
  bool done(int worker) const;

  // The step of worker `worker`'s last STEP event (its process's or a predecessor's); 0
  // before any.
  uint64_t last_step(int worker) const { return last_steps_.at(worker); }


  // Worker `worker`'s DONE event, if it reported one.
  const std::optional<events::WorkerEvent>& done_event(int worker) const {
    return done_.at(worker);
  }

  // SummaryBuilder::WorkerRestarted() / ServerRestarted()
  //
  // A process was started again after it died: counted in the summary. A restarted worker's
  // byte counters start at 0, so what its predecessor reported last is kept and added.
  void WorkerRestarted(int worker);
  void ServerRestarted() { ++server_restarts_; }

  // SummaryBuilder::Build()
  //
  // The summary of a completed run (outcome "completed"). FAILED_PRECONDITION naming the
  // first worker that has not reported DONE.
  absl::StatusOr<events::RunSummary> Build(const std::string& name, uint32_t epochs,
                                           double wall_seconds) const;

  // SummaryBuilder::BuildEnded()
  //
  // The summary of a job that did not complete (`outcome` "failed" or "interrupted", and
  // why): what the workers had reported, as events.proto's RunSummary.outcome describes.
  events::RunSummary BuildEnded(const std::string& name, uint32_t epochs, double wall_seconds,
                                absl::string_view outcome, absl::string_view failure) const;

 private:
  // What Build() and BuildEnded() share: every figure but steps, test_accuracy and
  // step_ms_median.
  events::RunSummary Common(const std::string& name, uint32_t epochs, double wall_seconds) const;

  std::vector<std::optional<events::WorkerEvent>> done_;
  std::vector<uint64_t> last_steps_;   // By worker, of its last STEP (0: none).
  // By worker: the steps_missed its current process last reported, and whether that
  // process (a restarted one) has reported no STEP yet.
  std::vector<uint64_t> reported_missed_;
  std::vector<bool> restarted_;
  uint64_t steps_missed_ = 0;
  bool synthetic_ = false;             // Worker 0's events say so.
  std::optional<uint32_t> last_epoch_;  // Of worker 0's last STEP.
  // By worker: the byte counters of its latest event, and those of its dead predecessors.
  struct Bytes {
    uint64_t pushed = 0;
    uint64_t pulled = 0;
    uint64_t raw_pushed = 0;
  };
  std::vector<Bytes> latest_, banked_;
  uint32_t server_restarts_ = 0;
  uint32_t worker_restarts_ = 0;
  std::optional<float> final_loss_;  // Worker 0's last reported loss.
  std::optional<uint64_t> start_step_;  // The least start_step of any event.
  // Of every STEP of every worker.
  std::vector<double> compute_ms_, encode_ms_, wire_ms_, decode_ms_, apply_ms_, other_ms_,
      hidden_percent_, step_ms_;
};

// The format_version of the JSON files the launcher writes (RunSummary, StepMetrics,
// EvalMetrics in events.proto; also `tamp model --json`'s ModelPrediction and
// bench/auto_plan_bench's AutoPlanPrediction): 2, snake_case names and integers as JSON
// numbers. Version 1 (no format_version field) printed 64-bit integers as strings; the
// last two had no format_version before 2, and the same fields.
inline constexpr uint32_t kJsonFormatVersion = 2;

// StepMetricsJson()
//
// One line of --metrics_file for a STEP event of worker `worker` (no newline): an
// events::StepMetrics, e.g.
//   {"format_version":2,"worker":1,"step":40,"loss":0.5123,"step_ms":4.1,"bytes_pushed":5120,
//    "bytes_pulled":9000,"shard_bytes_pushed":[2560,2560],"shard_bytes_pulled":[4500,4500],
//    "raw_bytes_pushed":20480,"compression_ratio":4,"compute_ms":2.1,"encode_ms":0.3,
//    "wire_ms":0.8,"decode_ms":0.1,"apply_ms":0.02,"comm_ms":9.5,"comm_hidden_percent":61.2,
//    "other_ms":0.78}
std::string StepMetricsJson(int worker, const events::WorkerEvent& step);

// EvalMetricsJson()
//
// One line of --metrics_file for an EVAL event (no newline): an events::EvalMetrics, e.g.
//   {"format_version":2,"worker":0,"step":400,"epoch":0,"test_accuracy":0.8512}
std::string EvalMetricsJson(int worker, const events::WorkerEvent& eval);

// SummaryToJson()
//
// The summary as one line of JSON (base/proto_json.h), its format_version set to
// kJsonFormatVersion, e.g. {"format_version":2,"name":"mlp","test_accuracy":0.8823,
// "steps":1404,...}.
std::string SummaryToJson(const events::RunSummary& summary);

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_SUMMARY_H_
