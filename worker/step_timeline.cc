#include "worker/step_timeline.h"

#include <algorithm>
#include <iterator>

namespace tamp {
namespace {

double Ms(StepTimeline::Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

void StepTimeline::Reset() {
  compute_.clear();
  compute_before_.assign(1, Clock::duration{0});
  rpcs_.clear();
  encode_ = Clock::duration{0};
}

void StepTimeline::ComputeBegin(Clock::time_point t) { compute_begin_ = t; }

void StepTimeline::ComputeEnd(Clock::time_point t) {
  if (t <= compute_begin_) return;
  compute_.push_back({compute_begin_, t});
  compute_before_.push_back(compute_before_.back() + (t - compute_begin_));
}

void StepTimeline::AddRpc(Clock::time_point sent, Clock::time_point answered) {
  rpcs_.push_back({sent, std::max(sent, answered)});
}

StepTimeline::Clock::duration StepTimeline::Covered(Clock::time_point begin,
                                                    Clock::time_point end) const {
  if (end <= begin) return Clock::duration{0};
  // The intervals [first, last) meet [begin, end): whole, less what lies outside at the ends.
  const auto first = std::partition_point(compute_.begin(), compute_.end(),
                                          [&](const Interval& c) { return c.end <= begin; });
  const auto last = std::partition_point(first, compute_.end(),
                                         [&](const Interval& c) { return c.begin < end; });
  if (first == last) return Clock::duration{0};
  Clock::duration covered =
      compute_before_[last - compute_.begin()] - compute_before_[first - compute_.begin()];
  if (first->begin < begin) covered -= begin - first->begin;
  if (std::prev(last)->end > end) covered -= std::prev(last)->end - end;
  return covered;
}

StepTimeline::Figures StepTimeline::Summarize() const {
  Figures f;
  f.compute_ms = Ms(compute_before_.back());
  f.encode_ms = Ms(encode_);
  if (rpcs_.empty()) return f;
  Clock::duration comm{0}, hidden{0};
  Clock::time_point last_sent = rpcs_.front().begin, last_answer = rpcs_.front().end;
  for (const Interval& r : rpcs_) {
    comm += r.end - r.begin;
    hidden += Covered(r.begin, r.end);
    last_sent = std::max(last_sent, r.begin);
    last_answer = std::max(last_answer, r.end);
  }
  f.comm_ms = Ms(comm);
  f.hidden_ms = Ms(hidden);
  f.hidden_percent = comm.count() > 0 ? 100.0 * f.hidden_ms / f.comm_ms : 0;
  if (last_answer > last_sent) {
    f.wire_ms = Ms((last_answer - last_sent) - Covered(last_sent, last_answer));
  }
  return f;
}

}  // namespace tamp
