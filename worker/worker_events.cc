#include "worker/worker_events.h"

namespace tamp {
namespace {

events::WorkerEvent Event(const WorkerFigures& figures, events::WorkerEvent::Kind kind,
                          uint64_t completed_steps, uint64_t total_steps) {
  events::WorkerEvent event;
  event.set_kind(kind);
  event.set_worker(figures.worker);
  event.set_step(completed_steps);
  event.set_total_steps(total_steps);
  const ClientTotals& totals = figures.totals;
  event.set_bytes_pushed(totals.bytes_pushed);
  event.set_bytes_pulled(totals.bytes_pulled);
  event.set_raw_bytes_pushed(totals.raw_bytes_pushed);
  if (totals.start_step.has_value()) event.set_start_step(*totals.start_step);
  event.set_steps_missed(totals.steps_missed);
  return event;
}

}  // namespace

events::WorkerEvent StepEvent(const WorkerFigures& figures, uint64_t completed_steps,
                              uint64_t total_steps, uint32_t epoch, std::optional<float> loss,
                              double step_ms, double thread_cpu_ms) {
  events::WorkerEvent event =
      Event(figures, events::WorkerEvent::STEP, completed_steps, total_steps);
  event.set_epoch(epoch);
  if (loss) event.set_loss(*loss);
  event.set_step_ms(step_ms);
  event.set_thread_cpu_ms(thread_cpu_ms);
  const StepReport& report = figures.step;
  uint64_t step_pushed = 0;
  for (const uint64_t bytes : report.shard_bytes_pushed) {
    event.add_step_shard_bytes_pushed(bytes);
    step_pushed += bytes;
  }
  for (const uint64_t bytes : report.shard_bytes_pulled) event.add_step_shard_bytes_pulled(bytes);
  event.set_step_raw_bytes_pushed(report.raw_bytes_pushed);
  event.set_step_compression_ratio(
      step_pushed == 0 ? 0.0 : static_cast<double>(report.raw_bytes_pushed) / step_pushed);
  const StepTimeline::Figures& timeline = report.timeline;
  event.set_compute_ms(timeline.compute_ms);
  event.set_encode_ms(timeline.encode_ms);
  event.set_wire_ms(timeline.wire_ms);
  event.set_decode_ms(report.decode_ms);
  event.set_apply_ms(report.apply_ms);
  event.set_other_ms(std::max(0.0, step_ms - timeline.compute_ms - timeline.encode_ms -
                                       timeline.wire_ms - report.decode_ms - report.apply_ms));
  event.set_comm_ms(timeline.comm_ms);
  event.set_comm_hidden_percent(timeline.hidden_percent);
  return event;
}

events::WorkerEvent EvalEvent(const WorkerFigures& figures, uint64_t completed_steps,
                              uint64_t total_steps, uint32_t epoch, double test_accuracy) {
  events::WorkerEvent event =
      Event(figures, events::WorkerEvent::EVAL, completed_steps, total_steps);
  event.set_epoch(epoch);
  event.set_test_accuracy(test_accuracy);
  return event;
}

events::WorkerEvent DoneEvent(const WorkerFigures& figures, uint64_t completed_steps,
                              uint64_t total_steps, uint32_t epoch,
                              std::optional<double> test_accuracy, double step_ms_median) {
  events::WorkerEvent event =
      Event(figures, events::WorkerEvent::DONE, completed_steps, total_steps);
  event.set_epoch(epoch);
  if (test_accuracy) event.set_test_accuracy(*test_accuracy);
  event.set_step_ms_median(step_ms_median);
  return event;
}

}  // namespace tamp
