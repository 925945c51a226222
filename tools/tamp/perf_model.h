// Performance model: predicts how long one synchronous step of a job takes on a given link.
//
// After Agarwal et al. ("On the Utility of Gradient Compression in Distributed Training
// Systems", MLSys 2022: a step is compute overlapped with communication, and encode/decode
// sit on the critical path) and ByteComp (a per-tensor timeline of each step). The model
// replays one step of the real schedule (worker/trainer.cc, server/sync_chunk.cc) as a discrete
// event simulation of W identical workers and S shards:
//   - each worker computes backward; when tensor t's gradient is final (ready_ms, measured),
//     its training thread encodes the tensor's chunks one by one and sends each push as soon
//     as it is encoded (encode time delays the rest of backward: it runs on that thread);
//   - messages cross the links of the topology, each first come first served, at the link's
//     rate capped by the transport's own throughput, plus a fixed latency per message:
//     kShared, ONE link every message of every process crosses (bench/net/shaped.sh shapes
//     the loopback all processes use); kHosts, every process on a host of its own behind a
//     full-duplex link (bench/net/hosts.sh), so a message occupies its sender's uplink and
//     its receiver's downlink, bytes flowing through both at once;
//   - a shard decodes each push as it arrives, one at a time; when all W pushes of a chunk
//     are in (SYNC), it aggregates, runs the optimizer, encodes the update and sends it to
//     every worker;
//   - multi-round codecs (powersgd) answer each round; the worker encodes the next round
//     when its training thread is free (between tensors during backward, or after it);
//   - after backward, each worker decodes and applies each update as it arrives.
// The step ends when the last worker has applied its last chunk.
//
// The timeline gives every process a core of its own. The job's processes share the
// machine's cores, though, so the step also cannot be shorter than the CPU work of all
// workers, all shards and the transport (gRPC's CPU per message and per byte) spread over
// the cores that can work at once; the prediction is the larger of the two bounds.
//
// The inputs are measured costs (tools/tamp/perf_calibrate.h, tools/tamp/transport_probe.h);
// this module only combines them, so it is deterministic and cheap. Not modelled: how CPU
// contention reorders the timeline (the CPU bound only stretches it), TCP's fair sharing
// between connections (the link serves messages whole, in order), and protocol time other
// than per-message constants.
#ifndef TAMP_TOOLS_TAMP_PERF_MODEL_H_
#define TAMP_TOOLS_TAMP_PERF_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tamp::perf {

// Link
//
// A link's rate: of the one shared link, or of each host's uplink and downlink alike.
// bits_per_second 0 means unshaped: no rate limit, only the transport's own throughput.
struct Link {
  std::string name;  // As given: "1gbit", "unshaped", ...
  double bits_per_second = 0;
};

// Topology
//
// Which links a message crosses (see the top of this file).
enum class Topology { kShared, kHosts };

// ParseTopology()
//
// "shared" or "hosts"; INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<Topology> ParseTopology(absl::string_view text);

// "one shared link" or "a link per host": a topology in the words of headers and files.
const char* DescribeTopology(Topology topology);

// ParseBandwidth()
//
// "1gbit", "10gbit", "500mbit", "100kbit", "2.5gbit", "1000000bit" (tc's decimal units), or
// "unshaped" / "inf" for no limit. INVALID_ARGUMENT naming the text otherwise.
absl::StatusOr<Link> ParseBandwidth(absl::string_view text);

// Transport
//
// gRPC over loopback TCP: per-message constants and a throughput ceiling (its copies and
// framing cost CPU, so even an unshaped link has a rate).
struct Transport {
  double message_latency_ms = 0;      // Fixed delay of each message (one direction).
  double message_overhead_bytes = 0;  // Bytes on the link beyond the payload, per message.
  double max_bytes_per_ms = 0;        // Throughput ceiling; 0: none.
};

// FittedTransport()
//
// The transport on this machine: constants fitted or estimated against measured runs, not
// measured at model time (docs/perf_model.md says which and how).
Transport FittedTransport();

// TransportCpu
//
// The CPU time gRPC spends on one message, sender and receiver together: protobuf, HTTP/2
// framing, the socket copies on both ends and the threads it wakes.
struct TransportCpu {
  double ms_per_message = 0;  // For a message with an empty payload.
  double ms_per_byte = 0;     // For each payload byte on top.
};

// JobCpuCalibration
//
// What short runs of the job itself showed that the measured parts above leave out
// (tamp model --calibration_job, tools/tamp/job_calibration.h): CPU time per step beyond
// them, as a constant plus a cost per payload byte (all workers, both directions), and the
// share of the usable cores the job kept busy; and the fastest payload rate a run moved
// (all workers, both directions, per ms of step), which the transport's ceiling cannot be
// below. The defaults change nothing.
struct JobCpuCalibration {
  double ms_per_step = 0;
  double ms_per_byte = 0;
  double core_utilization = 1;     // In (0, 1].
  double payload_bytes_per_ms = 0;  // 0: none seen.
};

// RoundCost
//
// One exchange of a chunk's push codec. Single-round codecs have one, whose answer is the
// update alone (answer_bytes 0, server_round_ms 0).
struct RoundCost {
  uint64_t push_bytes = 0;      // Payload one worker sends.
  double encode_ms = 0;         // Worker: encode (with error feedback) of this round.
  double server_decode_ms = 0;  // Shard: decode-and-add of one worker's payload.
  double server_round_ms = 0;   // Shard: finishing a round before the last (multi-round).
  uint64_t answer_bytes = 0;    // Shard -> each worker: the round's aggregate (multi-round).
};

// ChunkCost
//
// What one chunk costs in one step, per worker where it says so.
struct ChunkCost {
  uint32_t tensor = 0;
  uint32_t shard = 0;
  std::vector<RoundCost> rounds;  // At least one.
  double server_update_ms = 0;    // Shard, once all pushes are in: aggregate, optimizer,
                                  // encode the update (pull codec + its memory).
  uint64_t pull_bytes = 0;        // The update payload each worker gets.
  uint64_t raw_bytes = 0;         // Its fp32 bytes (tensor fusion: StepInputs::fusion_bytes).
  double decode_ms = 0;           // Worker: decode the update (and finish the rounds).
  double apply_ms = 0;            // Worker: add it into the replica.
};

// StepInputs
//
// compute_ms is forward + backward of one worker; tensor_ready_ms[t] is when tensor t's
// gradient is final, from the start of the step, in compute time only (no encodes).
struct StepInputs {
  int num_workers = 1;
  int num_shards = 1;
  double compute_ms = 0;
  // false: compute costs the job no CPU (model.kind LAYOUT sleeps through its profile, as a
  // worker waits on its accelerator), so CpuWorkMs() leaves it out.
  bool compute_on_cpu = true;
  std::vector<double> tensor_ready_ms;
  std::vector<ChunkCost> chunks;
  // cluster.fusion_bytes: first-round pushes of chunks below it share their shard's calls
  // (worker/push_fusion.h), which CpuWorkMs() counts; 0: one call per chunk.
  uint64_t fusion_bytes = 0;
  Link link;
  Topology topology = Topology::kShared;
  Transport transport;
  // Cores the job's processes share; 0: as many as they can use (no CPU bound).
  int cores = 0;
  TransportCpu transport_cpu;
  JobCpuCalibration job_cpu;
};

// Bound
//
// What decided a predicted step: the busiest link (kLink), the critical path of compute,
// codecs and shards (kTimeline), or the job's total CPU work on the cores it shares (kCpu).
enum class Bound { kLink, kTimeline, kCpu };

// BoundName()
//
// "link", "timeline" or "cpu".
absl::string_view BoundName(Bound bound);

// StepPrediction
//
// The split follows the trainer's STEP event: compute, encode, decode and apply are one
// worker's own work; wire is the rest of the step, the time it waited on the link and the
// shards. When the CPU bound decides, every part is stretched by the same factor (each
// thread gets the same share of the oversubscribed cores), so the five still add up to the
// step. Bytes are payload bytes of all workers.
struct StepPrediction {
  double step_ms = 0;       // max(timeline_ms, cpu_bound_ms).
  double timeline_ms = 0;   // The simulated step, every process on a core of its own.
  double cpu_work_ms = 0;   // CPU time of the whole job in one step (all processes).
  double cpu_bound_ms = 0;  // cpu_work_ms over the usable cores (times the calibrated
                            // utilisation); 0 without a core count.
  int usable_cores = 0;     // min(cores, workers + shards); 0 without a core count.
  Bound bound = Bound::kTimeline;
  double compute_ms = 0;
  double encode_ms = 0;
  double wire_ms = 0;
  double decode_ms = 0;
  double apply_ms = 0;
  double server_ms = 0;     // One shard's busiest work in the step (part of wire).
  double link_busy_ms = 0;  // Time the busiest link spent sending (part of wire where not
                            // hidden): the shared link, or one host's uplink or downlink.
  uint64_t push_bytes = 0;
  uint64_t pull_bytes = 0;
};

// CpuWorkMs()
//
// The CPU time one step of the whole job takes: every worker's compute, encodes, decodes
// and applies, every shard's decodes, rounds and updates, and the transport's CPU for
// every message (a call and its answer, per worker: one per chunk and round, where fused
// first rounds share their calls, as the workers batch them in the order their tensors'
// gradients are ready) and payload byte; plus inputs.job_cpu's per step and per payload
// byte. The timeline (PredictStep) still sends each chunk alone.
double CpuWorkMs(const StepInputs& inputs);

// PayloadBytesPerStep()
//
// The payload bytes of one step, all workers, both directions (pushes, round answers,
// updates): what CpuWorkMs() charges per byte.
double PayloadBytesPerStep(const StepInputs& inputs);

// PredictStep()
//
// Simulates one step and bounds it by the CPU work (see the top of this file).
// INVALID_ARGUMENT if the inputs are inconsistent (no workers, a chunk
// naming a tensor or shard that does not exist, a chunk with no rounds, negative costs).
absl::StatusOr<StepPrediction> PredictStep(const StepInputs& inputs);

}  // namespace tamp::perf

#endif  // TAMP_TOOLS_TAMP_PERF_MODEL_H_
