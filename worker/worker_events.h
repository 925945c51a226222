// The progress a worker reports to its launcher, as events::WorkerEvent (proto/events.proto):
// one STEP per step (loss, time, the step's bytes per shard and the client's timeline), EVAL
// per test evaluation, DONE at the end. `tamp run` shows them as its progress line and
// makes the run summary of them; `tamp summarize` reads them from saved output. tamp_worker
// and the Python front end (tamp.torch.report_*) build them here, so both report the same.
//
// Each event carries the worker's rank and its client's running byte totals
// (Client::totals()); a STEP also the step's own figures (Client::report() after Wait(),
// before the next BeginStep() clears them).
//
// Example:
//   const WorkerFigures figures{client.rank(), client.totals(), client.report()};
//   WriteLine(ProtoToJson(StepEvent(figures, step + 1, total_steps, epoch, loss, step_ms,
//                                   thread_cpu_ms)));
#ifndef TAMP_WORKER_WORKER_EVENTS_H_
#define TAMP_WORKER_WORKER_EVENTS_H_

#include <cstdint>
#include <optional>

#include "proto/events.pb.h"
#include "worker/client.h"

namespace tamp {

// What the events report of a worker's client (references: they must outlive the call).
struct WorkerFigures {
  uint32_t worker;
  const ClientTotals& totals;
  const StepReport& step;  // Of the step just completed; read by StepEvent() only.
};

// The step that has just completed (`completed_steps` counted from 1); `loss`: none when the
// worker does not know it; `thread_cpu_ms`: the training thread's CPU time in it (0: not
// measured).
events::WorkerEvent StepEvent(const WorkerFigures& figures, uint64_t completed_steps,
                              uint64_t total_steps, uint32_t epoch, std::optional<float> loss,
                              double step_ms, double thread_cpu_ms);

// A test evaluation after `completed_steps` steps.
events::WorkerEvent EvalEvent(const WorkerFigures& figures, uint64_t completed_steps,
                              uint64_t total_steps, uint32_t epoch, double test_accuracy);

// The end of the worker's run: its last step and that step's epoch, final accuracy (none:
// not evaluated) and median step time.
events::WorkerEvent DoneEvent(const WorkerFigures& figures, uint64_t completed_steps,
                              uint64_t total_steps, uint32_t epoch,
                              std::optional<double> test_accuracy, double step_ms_median);

}  // namespace tamp

#endif  // TAMP_WORKER_WORKER_EVENTS_H_
