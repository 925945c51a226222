// StepTimeline: where one synchronous training step's time goes, and how much of its
// communication was hidden behind compute.
//
// The trainer records, on one clock, the compute intervals of the step (forward/backward
// with the on_tensor_ready callbacks cut out), the time spent in push encoders, and one
// interval per RPC (push sent -> answer received; one per chunk and round). From these:
//   compute_ms  sum of the compute intervals: forward/backward excluding the callbacks
//               (which encode and send pushes).
//   encode_ms   sum of AddEncode() (push-side codec work: Compress / rounds of multi-round
//               codecs), wherever it ran.
//   wire_ms     the part of [last push sent, last answer received] that no compute interval
//               covers: how long the step waited on the network after its last send.
//   comm_ms     sum over RPCs of (answer - push); RPCs in flight together each count.
//   hidden_ms   sum over RPCs of the part of (push, answer) covered by compute intervals.
//   hidden_percent = 100 * hidden_ms / comm_ms (0 when there was no RPC).
// Decode and apply times are measured directly by the trainer.
//
// Not thread-safe: the trainer calls AddRpc() from gRPC callbacks under its own mutex.
#ifndef TAMP_WORKER_STEP_TIMELINE_H_
#define TAMP_WORKER_STEP_TIMELINE_H_

#include <chrono>
#include <vector>

namespace tamp {

class StepTimeline {
 public:
  using Clock = std::chrono::steady_clock;

  // Forgets the previous step.
  void Reset();

  // StepTimeline::ComputeBegin() / ComputeEnd()
  //
  // Bracket one stretch of compute; stretches must not overlap and come in time order.
  void ComputeBegin(Clock::time_point t);
  void ComputeEnd(Clock::time_point t);

  // Time spent in a push encoder.
  void AddEncode(Clock::duration d) { encode_ += d; }

  // One RPC: push sent at `sent`, answer received at `answered`.
  void AddRpc(Clock::time_point sent, Clock::time_point answered);

  struct Figures {
    double compute_ms = 0;
    double encode_ms = 0;
    double wire_ms = 0;
    double comm_ms = 0;
    double hidden_ms = 0;
    double hidden_percent = 0;
  };
  Figures Summarize() const;

 private:
  struct Interval {
    Clock::time_point begin, end;
  };
  // Length of [begin, end) covered by compute_: a binary search, as a step holds one compute
  // interval per push (O(tensors^2) per step by a scan).
  Clock::duration Covered(Clock::time_point begin, Clock::time_point end) const;

  std::vector<Interval> compute_;  // In time order, disjoint (one thread opens and closes).
  // compute_before_[k]: the length of compute_[0, k); one more entry than compute_.
  std::vector<Clock::duration> compute_before_{Clock::duration{0}};
  Clock::time_point compute_begin_;
  std::vector<Interval> rpcs_;
  Clock::duration encode_{0};
};

}  // namespace tamp

#endif  // TAMP_WORKER_STEP_TIMELINE_H_
