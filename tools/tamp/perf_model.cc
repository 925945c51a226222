#include "tools/tamp/perf_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tamp::perf {
namespace {

// One message on the link: a worker's push of (chunk, round), or a shard's answer to it.
struct Message {
  bool to_shard = true;
  int worker = 0;
  uint32_t chunk = 0;
  int round = 0;
  uint64_t bytes = 0;
};

struct Event {
  enum Kind { kBoundary, kLinkReady, kArrive };
  double time = 0;
  uint64_t seq = 0;  // Ties go to the earlier event: the link is first come first served.
  Kind kind = kBoundary;
  int worker = 0;    // kBoundary
  size_t boundary = 0;
  Message message;   // kLinkReady, kArrive
};

struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};

struct WorkerState {
  bool in_compute = true;
  double thread_free = 0;  // When the training thread is next idle (after backward).
  // Work that arrived during backward: rounds to encode at the next tensor boundary, and
  // updates to apply once backward ends.
  std::vector<std::pair<uint32_t, int>> queued_rounds;
  std::vector<uint32_t> queued_applies;
  size_t chunks_left = 0;
  double done = 0;
  double encode_ms = 0, decode_ms = 0, apply_ms = 0;
};

// The links of a topology, each first come first served. A message crosses a path of links
// (the shared one; or its sender's uplink, then its receiver's downlink) with its bytes
// flowing through all of them at once: on each it starts once that link is free and its
// first bytes are there, and ends no sooner than on the link before.
class Links {
 public:
  Links(Topology topology, int workers, int shards)
      : topology_(topology), workers_(workers),
        wires_(topology == Topology::kShared ? 1 : 2 * (workers + shards)) {}

  // When the last byte of `m`, ready to go at `ready`, has crossed its path.
  double Carry(double ready, const Message& m, uint32_t shard, double duration_ms) {
    double start = ready, end = ready;
    const Route route = Path(m, shard);
    for (int i = 0; i < route.size; ++i) {
      Wire* wire = route.wires[i];
      start = std::max(start, wire->free);
      end = std::max(end, start + duration_ms);
      wire->free = end;
      wire->busy += duration_ms;
    }
    return end;
  }

  double BusiestMs() const {
    double busiest = 0;
    for (const Wire& wire : wires_) busiest = std::max(busiest, wire.busy);
    return busiest;
  }

 private:
  struct Wire {
    double free = 0, busy = 0;
  };

  // The wires a message crosses, without allocating (the search of tools/tamp/auto_plan.h
  // runs many simulations).
  struct Route {
    Wire* wires[2];
    int size;
  };

  // Hosts: workers are hosts 0..W-1 and shards W..W+S-1; host h's uplink is wire 2h, its
  // downlink 2h + 1.
  Route Path(const Message& m, uint32_t shard) {
    if (topology_ == Topology::kShared) return {{&wires_[0], nullptr}, 1};
    const int shard_host = workers_ + static_cast<int>(shard);
    const int sender = m.to_shard ? m.worker : shard_host;
    const int receiver = m.to_shard ? shard_host : m.worker;
    return {{&wires_[2 * sender], &wires_[2 * receiver + 1]}, 2};
  }

  Topology topology_;
  int workers_;
  std::vector<Wire> wires_;
};

absl::Status CheckInputs(const StepInputs& in) {
  if (in.num_workers < 1) return absl::InvalidArgumentError("num_workers must be at least 1");
  if (in.num_shards < 1) return absl::InvalidArgumentError("num_shards must be at least 1");
  const JobCpuCalibration& job = in.job_cpu;
  if (!(job.ms_per_step >= 0 && job.ms_per_byte >= 0 && job.core_utilization > 0 &&
        job.core_utilization <= 1 && job.payload_bytes_per_ms >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job calibration: per step ", job.ms_per_step, " ms, per byte ", job.ms_per_byte,
        " ms and payload rate ", job.payload_bytes_per_ms,
        " bytes/ms must be >= 0, core utilisation ", job.core_utilization, " in (0, 1]"));
  }
  if (!(in.compute_ms >= 0)) return absl::InvalidArgumentError("compute_ms must be >= 0");
  for (double ready : in.tensor_ready_ms) {
    if (!(ready >= 0 && ready <= in.compute_ms)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ready time ", ready, " ms is outside [0, compute_ms]"));
    }
  }
  for (size_t c = 0; c < in.chunks.size(); ++c) {
    const ChunkCost& chunk = in.chunks[c];
    if (chunk.tensor >= in.tensor_ready_ms.size()) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " names tensor ", chunk.tensor,
                                                     " with no ready time"));
    }
    if (chunk.shard >= static_cast<uint32_t>(in.num_shards)) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " names shard ", chunk.shard));
    }
    if (chunk.rounds.empty()) return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " has no rounds"));
    bool negative = chunk.server_update_ms < 0 || chunk.decode_ms < 0 || chunk.apply_ms < 0;
    for (const RoundCost& r : chunk.rounds) {
      negative |= r.encode_ms < 0 || r.server_decode_ms < 0 || r.server_round_ms < 0;
    }
    if (negative) return absl::InvalidArgumentError(absl::StrCat("chunk ", c, " has a negative cost"));
  }
  const Transport& t = in.transport;
  if (t.message_latency_ms < 0 || t.message_overhead_bytes < 0 || t.max_bytes_per_ms < 0 ||
      in.link.bits_per_second < 0) {
    return absl::InvalidArgumentError("link and transport constants must be >= 0");
  }
  if (in.cores < 0 || in.transport_cpu.ms_per_message < 0 || in.transport_cpu.ms_per_byte < 0) {
    return absl::InvalidArgumentError("cores and transport CPU costs must be >= 0");
  }
  return absl::OkStatus();
}

}  // namespace

Transport FittedTransport() {
  Transport t;
  t.message_latency_ms = 0.05;   // Estimated.
  t.message_overhead_bytes = 200;  // Estimated.
  t.max_bytes_per_ms = 12e9 / 8e3;  // Fitted by bench/fit_transport.py: 12 Gbit/s.
  return t;
}

absl::StatusOr<Topology> ParseTopology(absl::string_view text) {
  if (text == "shared") return Topology::kShared;
  if (text == "hosts") return Topology::kHosts;
  return absl::InvalidArgumentError(
      absl::StrCat("topology \"", text, "\": expected shared or hosts"));
}

const char* DescribeTopology(Topology topology) {
  return topology == Topology::kHosts ? "a link per host" : "one shared link";
}

absl::StatusOr<Link> ParseBandwidth(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "unshaped" || lower == "inf") return Link{std::string(text), 0};
  static const std::regex kRate(R"(^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit)$)");
  std::smatch match;
  double value = 0;
  if (absl::StartsWith(lower, "-") || (std::regex_match(lower, match, kRate) &&
                                       absl::SimpleAtod(match[1].str(), &value) && value <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bandwidth \"", text, "\": a rate must be above 0 (\"unshaped\" for no limit)"));
  }
  if (!std::regex_match(lower, match, kRate) || !absl::SimpleAtod(match[1].str(), &value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bandwidth \"", text,
        "\": expected a rate like 1gbit, 10gbit, 500mbit, 100kbit, or unshaped / inf"));
  }
  const std::string unit = match[3].str();
  const double scale = unit == "gbit" ? 1e9 : unit == "mbit" ? 1e6 : unit == "kbit" ? 1e3 : 1;
  return Link{std::string(text), value * scale};
}

namespace {

// The discrete-event simulation of one step (see the top of perf_model.h), every process
// on a core of its own.
StepPrediction SimulateTimeline(const StepInputs& in) {
  const int workers = in.num_workers;
  const Transport& transport = in.transport;

  // Per byte on the link: the slower of the shaped rate and the transport's ceiling, which
  // is at least the payload rate a calibration run achieved.
  double ms_per_byte = 0;
  if (in.link.bits_per_second > 0) ms_per_byte = 8e3 / in.link.bits_per_second;
  if (transport.max_bytes_per_ms > 0) {
    const double ceiling = std::max(transport.max_bytes_per_ms, in.job_cpu.payload_bytes_per_ms);
    ms_per_byte = std::max(ms_per_byte, 1.0 / ceiling);
  }

  // Tensor boundaries in the order backward finishes them, with their chunks.
  std::vector<uint32_t> order(in.tensor_ready_ms.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return in.tensor_ready_ms[a] < in.tensor_ready_ms[b];
  });
  std::vector<std::vector<uint32_t>> chunks_of(in.tensor_ready_ms.size());
  for (uint32_t c = 0; c < in.chunks.size(); ++c) chunks_of[in.chunks[c].tensor].push_back(c);

  std::vector<Event> storage;
  storage.reserve(4 * in.chunks.size() * workers + workers);
  std::priority_queue<Event, std::vector<Event>, Later> events(Later(), std::move(storage));
  uint64_t seq = 0;
  auto schedule = [&](Event e) {
    e.seq = seq++;
    events.push(std::move(e));
  };
  auto send = [&](double time, Message m) {
    Event e;
    e.time = time;
    e.kind = Event::kLinkReady;
    e.message = m;
    schedule(e);
  };
  auto boundary_event = [&](int worker, size_t boundary, double time) {
    Event e;
    e.time = time;
    e.kind = Event::kBoundary;
    e.worker = worker;
    e.boundary = boundary;
    schedule(e);
  };

  std::vector<WorkerState> state(workers);
  for (int w = 0; w < workers; ++w) {
    state[w].chunks_left = in.chunks.size();
    boundary_event(w, 0, order.empty() ? in.compute_ms : in.tensor_ready_ms[order[0]]);
  }
  std::vector<double> shard_free(in.num_shards, 0), shard_busy(in.num_shards, 0);
  // Pushes arrived, by (chunk, round): chunk c's rounds start at first_round[c].
  std::vector<size_t> first_round(in.chunks.size() + 1, 0);
  for (size_t c = 0; c < in.chunks.size(); ++c) {
    first_round[c + 1] = first_round[c] + in.chunks[c].rounds.size();
  }
  std::vector<int> arrived(first_round.back(), 0);
  Links links(in.topology, workers, in.num_shards);
  uint64_t push_bytes = 0, pull_bytes = 0;

  // The training thread of `w`, from time `t`: encode round `round` of `chunk` and send it.
  auto encode_and_send = [&](int w, double t, uint32_t chunk, int round) {
    const RoundCost& cost = in.chunks[chunk].rounds[round];
    state[w].encode_ms += cost.encode_ms;
    t += cost.encode_ms;
    send(t, Message{true, w, chunk, round, cost.push_bytes});
    return t;
  };
  auto apply = [&](int w, double t, uint32_t chunk) {
    WorkerState& s = state[w];
    s.decode_ms += in.chunks[chunk].decode_ms;
    s.apply_ms += in.chunks[chunk].apply_ms;
    t += in.chunks[chunk].decode_ms + in.chunks[chunk].apply_ms;
    if (--s.chunks_left == 0) s.done = t;
    return t;
  };

  while (!events.empty()) {
    const Event e = events.top();
    events.pop();
    switch (e.kind) {
      case Event::kBoundary: {
        WorkerState& s = state[e.worker];
        double t = e.time;
        if (e.boundary < order.size()) {
          std::vector<std::pair<uint32_t, int>> rounds;
          rounds.swap(s.queued_rounds);
          for (const auto& [chunk, round] : rounds) t = encode_and_send(e.worker, t, chunk, round);
          const uint32_t tensor = order[e.boundary];
          for (uint32_t chunk : chunks_of[tensor]) t = encode_and_send(e.worker, t, chunk, 0);
          const double next_ready = e.boundary + 1 < order.size()
                                        ? in.tensor_ready_ms[order[e.boundary + 1]]
                                        : in.compute_ms;
          boundary_event(e.worker, e.boundary + 1, t + next_ready - in.tensor_ready_ms[tensor]);
          break;
        }
        // Backward is over: what arrived meanwhile, updates first (as the trainer does).
        s.in_compute = false;
        for (uint32_t chunk : s.queued_applies) t = apply(e.worker, t, chunk);
        s.queued_applies.clear();
        for (const auto& [chunk, round] : s.queued_rounds) t = encode_and_send(e.worker, t, chunk, round);
        s.queued_rounds.clear();
        s.thread_free = t;
        if (s.chunks_left == 0) s.done = t;
        break;
      }
      case Event::kLinkReady: {
        const double duration =
            (static_cast<double>(e.message.bytes) + transport.message_overhead_bytes) * ms_per_byte;
        const double through =
            links.Carry(e.time, e.message, in.chunks[e.message.chunk].shard, duration);
        (e.message.to_shard ? push_bytes : pull_bytes) += e.message.bytes;
        Event arrive = e;
        arrive.kind = Event::kArrive;
        arrive.time = through + transport.message_latency_ms;
        schedule(arrive);
        break;
      }
      case Event::kArrive: {
        const Message& m = e.message;
        const ChunkCost& chunk = in.chunks[m.chunk];
        const int last_round = static_cast<int>(chunk.rounds.size()) - 1;
        if (m.to_shard) {
          const RoundCost& round = chunk.rounds[m.round];
          double& free = shard_free[chunk.shard];
          free = std::max(free, e.time) + round.server_decode_ms;
          shard_busy[chunk.shard] += round.server_decode_ms;
          if (++arrived[first_round[m.chunk] + m.round] < workers) break;
          const double finish = m.round < last_round ? round.server_round_ms : chunk.server_update_ms;
          free += finish;
          shard_busy[chunk.shard] += finish;
          const uint64_t answer = round.answer_bytes + (m.round == last_round ? chunk.pull_bytes : 0);
          for (int w = 0; w < workers; ++w) send(free, Message{false, w, m.chunk, m.round, answer});
          break;
        }
        WorkerState& s = state[m.worker];
        if (m.round < last_round) {
          if (s.in_compute) {
            s.queued_rounds.push_back({m.chunk, m.round + 1});
          } else {
            s.thread_free = encode_and_send(m.worker, std::max(e.time, s.thread_free), m.chunk, m.round + 1);
          }
        } else if (s.in_compute) {
          s.queued_applies.push_back(m.chunk);
        } else {
          s.thread_free = apply(m.worker, std::max(e.time, s.thread_free), m.chunk);
        }
        break;
      }
    }
  }

  StepPrediction p;
  for (const WorkerState& s : state) p.step_ms = std::max(p.step_ms, s.done);
  const WorkerState& first = state[0];
  p.compute_ms = in.compute_ms;
  p.encode_ms = first.encode_ms;
  p.decode_ms = first.decode_ms;
  p.apply_ms = first.apply_ms;
  p.wire_ms = std::max(0.0, p.step_ms - p.compute_ms - p.encode_ms - p.decode_ms - p.apply_ms);
  p.server_ms = *std::max_element(shard_busy.begin(), shard_busy.end());
  p.link_busy_ms = links.BusiestMs();
  p.push_bytes = push_bytes;
  p.pull_bytes = pull_bytes;
  return p;
}

// The time one worker's training thread spends on its own work in a step.
double WorkerOwnMs(const StepPrediction& p) {
  return p.compute_ms + p.encode_ms + p.decode_ms + p.apply_ms;
}

// What decided a timeline step: the link when the busiest link carried more than the
// workers' own work and the busiest shard's (the link, not the critical path of computing,
// is then what the step waits on); the timeline otherwise.
Bound TimelineBound(const StepPrediction& p) {
  return p.link_busy_ms > std::max(WorkerOwnMs(p), p.server_ms) ? Bound::kLink
                                                                : Bound::kTimeline;
}

// The step when the cores run out first: the timeline's parts, each stretched by the same
// factor up to `cpu_bound_ms`.
void StretchTo(double cpu_bound_ms, StepPrediction* p) {
  const double factor = p->step_ms > 0 ? cpu_bound_ms / p->step_ms : 1.0;
  for (double* part : {&p->compute_ms, &p->encode_ms, &p->wire_ms, &p->decode_ms, &p->apply_ms}) {
    *part *= factor;
  }
  // A timeline of zero length has no parts to stretch: the whole step waited on the CPU.
  if (p->step_ms == 0) p->wire_ms = cpu_bound_ms;
  p->step_ms = cpu_bound_ms;
}

}  // namespace

absl::string_view BoundName(Bound bound) {
  switch (bound) {
    case Bound::kLink: return "link";
    case Bound::kTimeline: return "timeline";
    case Bound::kCpu: return "cpu";
  }
  return "?";
}

double PayloadBytesPerStep(const StepInputs& in) {
  double bytes = 0;
  for (const ChunkCost& chunk : in.chunks) {
    for (const RoundCost& round : chunk.rounds) bytes += round.push_bytes + round.answer_bytes;
    bytes += chunk.pull_bytes;
  }
  return in.num_workers * bytes;
}

namespace {

// Calls per worker for the first round of every chunk: one per chunk at or above
// fusion_bytes; the smaller ones batched per shard as worker/push_fusion does, in the order
// their tensors are ready (backward's), each batch sent once its fp32 bytes or its payloads
// reach fusion_bytes and the rest after the last push.
double FirstRoundCalls(const StepInputs& in) {
  if (in.fusion_bytes == 0) return static_cast<double>(in.chunks.size());
  std::vector<size_t> order(in.chunks.size());
  for (size_t c = 0; c < order.size(); ++c) order[c] = c;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return in.tensor_ready_ms[in.chunks[a].tensor] < in.tensor_ready_ms[in.chunks[b].tensor];
  });
  // By shard: the held chunks' fp32 bytes and payload bytes, and whether any is held.
  std::vector<uint64_t> held(in.num_shards, 0), held_payload(in.num_shards, 0);
  std::vector<bool> holds(in.num_shards, false);
  double calls = 0;
  for (size_t c : order) {
    const ChunkCost& chunk = in.chunks[c];
    const uint32_t s = chunk.shard;
    if (chunk.raw_bytes >= in.fusion_bytes) {
      ++calls;
      continue;
    }
    held[s] += chunk.raw_bytes;
    held_payload[s] += chunk.rounds[0].push_bytes;
    holds[s] = true;
    if (held[s] >= in.fusion_bytes || held_payload[s] >= in.fusion_bytes) {
      ++calls;
      held[s] = held_payload[s] = 0;
      holds[s] = false;
    }
  }
  for (bool held_some : holds) calls += held_some ? 1 : 0;
  return calls;
}

}  // namespace

double CpuWorkMs(const StepInputs& in) {
  const double workers = in.num_workers;
  double worker_ms = in.compute_on_cpu ? in.compute_ms : 0, shard_ms = 0, messages = 0;
  for (const ChunkCost& chunk : in.chunks) {
    const size_t rounds = chunk.rounds.size();
    for (size_t r = 0; r < rounds; ++r) {
      const RoundCost& round = chunk.rounds[r];
      worker_ms += round.encode_ms;
      shard_ms += workers * round.server_decode_ms + (r + 1 < rounds ? round.server_round_ms : 0);
    }
    worker_ms += chunk.decode_ms + chunk.apply_ms;
    shard_ms += chunk.server_update_ms;
    messages += 2 * workers * static_cast<double>(rounds - 1);  // Later rounds: alone.
  }
  messages += 2 * workers * FirstRoundCalls(in);  // Each call and its answer.
  const double bytes = PayloadBytesPerStep(in);
  return workers * worker_ms + shard_ms + messages * in.transport_cpu.ms_per_message +
         bytes * in.transport_cpu.ms_per_byte + in.job_cpu.ms_per_step +
         bytes * in.job_cpu.ms_per_byte;
}

absl::StatusOr<StepPrediction> PredictStep(const StepInputs& in) {
  if (absl::Status valid = CheckInputs(in); !valid.ok()) return valid;
  StepPrediction p = SimulateTimeline(in);
  p.timeline_ms = p.step_ms;
  p.bound = TimelineBound(p);
  p.cpu_work_ms = CpuWorkMs(in);
  if (in.cores == 0) return p;
  // Each process does its part of a step mostly on one thread at a time (a worker's training
  // thread, a shard's reactions one after another), so a job of W workers and S shards keeps
  // at most W + S cores busy however many the machine has.
  p.usable_cores = std::min(in.cores, in.num_workers + in.num_shards);
  p.cpu_bound_ms = p.cpu_work_ms / (p.usable_cores * in.job_cpu.core_utilization);
  if (p.cpu_bound_ms > p.timeline_ms) {
    StretchTo(p.cpu_bound_ms, &p);
    p.bound = Bound::kCpu;
  }
  return p;
}

}  // namespace tamp::perf
