#include "worker/step_timeline.h"

#include <algorithm>

namespace tamp {
namespace {

double Ms(StepTimeline::Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

void StepTimeline::Reset() {
  compute_.clear();
  rpcs_.clear();
  encode_ = Clock::duration{0};
}

void StepTimeline::ComputeBegin(Clock::time_point t) { compute_begin_ = t; }

void StepTimeline::ComputeEnd(Clock::time_point t) {
  if (t > compute_begin_) compute_.push_back({compute_begin_, t});
}

void StepTimeline::AddRpc(Clock::time_point sent, Clock::time_point answered) {
  rpcs_.push_back({sent, std::max(sent, answered)});
}

StepTimeline::Clock::duration StepTimeline::Covered(Clock::time_point begin,
                                                    Clock::time_point end) const {
  Clock::duration covered{0};
  for (const Interval& c : compute_) {
    const Clock::time_point from = std::max(begin, c.begin);
    const Clock::time_point to = std::min(end, c.end);
    if (to > from) covered += to - from;
  }
  return covered;
}

StepTimeline::Figures StepTimeline::Summarize() const {
  Figures f;
  Clock::duration compute{0};
  for (const Interval& c : compute_) compute += c.end - c.begin;
  f.compute_ms = Ms(compute);
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
