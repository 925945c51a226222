// Client: one worker's side of a Tamp job, for any model on any front end.
//
// The client owns everything between a gradient and its applied update: local gradient
// clipping, the push codecs with their residuals (error feedback, DGC momentum, sparsity
// warm-up), multi-round codecs, the RPCs to every shard, decoding the shards' answers into
// the caller's weights, the periodic resync with the shards' exact weights, resends after a
// server restart, and rejoining a SYNC run after being dropped from its barriers. The
// caller owns the model: its weights and gradients are flat fp32 buffers in the job
// layout's order, passed as one span per tensor (TensorSpans), in host memory or on a CUDA
// device.
//
// Device tensors (TensorMemory::Cuda(device, stream) on a call; worker/device_backend.h): the
// chunks whose codecs compress/cuda/ has are encoded and decoded on the device, on the
// caller's stream, their push residuals kept there; the others are copied through pinned
// host memory and take the host path, so the wire carries the same bytes either way. The
// first call that passes tensors fixes where they live for the client's life; a call with
// tensors elsewhere is refused (FAILED_PRECONDITION naming the tensor and both places), and
// so is a first CUDA call in a process that cannot use CUDA ('tensor "fc1.weight" is on
// cuda:0 but this process sees no CUDA device (...)'), changing nothing.
//
// One step, as ps-lite's KVWorker (Push ... Wait):
//   BeginStep(step, params)    resyncs when due; starts the step's timeline
//   Push(tensor, gradient)     per tensor, as soon as backward has produced its gradient:
//                              compresses each chunk and sends it (the RPCs overlap the rest
//                              of backward); returns without waiting for an answer
//   Wait(params)               waits for every chunk's answer and adds each decoded update
//                              to `params` as it arrives (server.mode OPTIMIZER), or writes
//                              the decoded mean gradient into the buffers given, e.g. the
//                              gradients, for the caller's own optimizer (AGGREGATE)
//
// Blocking and threading: Connect(), Start(), Rejoin() and Wait() block; Push() blocks only
// for its encoding (and, for device tensors, its copies). Device work is enqueued on the
// call's stream and waited for before the call returns. All calls come from one thread (the
// training thread); gRPC's threads only queue answers, which the caller's thread decodes and
// applies. `params` must not be read or written by anyone else during Wait().
//
// Errors: a refused call (a tensor pushed twice, an unknown tensor, a gradient of the wrong
// size, Wait() before every tensor was pushed) returns INVALID_ARGUMENT or
// FAILED_PRECONDITION naming the tensor, and changes nothing: the step can go on. Wait()
// returns ABORTED when a SYNC barrier dropped this worker (consistency.worker_timeout_ms):
// call Rejoin() and go on from the step it returns. Other errors (a push a server refuses,
// such as one holding NaN under validation.nonfinite_policy REJECT; a shard gone past
// checkpoint.reconnect_timeout_ms; a corrupt answer) end the step too: Rejoin() goes on
// where the servers still answer, otherwise the client is only good for destruction; calls
// that need a step then say which step failed and why. With server.mode AGGREGATE nothing
// rejoins. Start() or Resume() is called once.
//
// SYNC worker failure (docs/consistency.md): a worker whose pushes are refused ABORTED was
// dropped from the barriers; Rejoin() forgets its residuals and takes the others' replica at
// the step they are about to take. A worker started while the run is under way (a
// replacement) does the same in Start().
//
// Server failure (config.checkpoint; README "Checkpoints and failures"): pushes a shard does
// not answer (the server went away: UNAVAILABLE, CANCELLED) are kept with their payloads;
// once that shard's other answers of the step are in (not the other shards': those may wait
// on a worker that waits on these pushes), Wait() reconnects to that shard with backoff
// (PsClient::Reconnect), replaces the shard's chunks of the replica by the shard's exact
// weights and pushes them again, with the step's pushes a restarted shard had answered before
// (it lost them, and the other workers may not have their answers). A restarted shard that
// is already past the step for a chunk answers OUT_OF_RANGE, and the pulled weights stand.
// Push residuals are kept: the payloads pushed again are the same. A multi-round chunk is
// pushed again from its first round (ErrorFeedback::ReplayRounds() encodes round 0 anew from
// what the step began with), also when its last round had been answered.
//
// Ownership: the client keeps copies of the config and the layout. Destruction waits for
// every RPC in flight to call back.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto client, Client::Connect(config, layout, rank, servers, length));
//   std::vector<absl::Span<float>> params = ...;  // Or SplitIntoTensors(layout, flat).
//   TAMP_ASSIGN_OR_RETURN(uint64_t step, client->Start(params));
//   for (; step < length.total_steps; ++step) {
//     TAMP_RETURN_IF_ERROR(client->BeginStep(step, params));
//     // backward, last layer first:
//     TAMP_RETURN_IF_ERROR(client->Push("fc2.weight", grad_fc2_weight));  ...
//     absl::Status done = client->Wait(params);
//     if (absl::IsAborted(done)) { TAMP_ASSIGN_OR_RETURN(step, client->Rejoin(params)); --step; continue; }
//     TAMP_RETURN_IF_ERROR(done);
//   }
#ifndef TAMP_WORKER_CLIENT_H_
#define TAMP_WORKER_CLIENT_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "compress/ratio_warmup.h"
#include "compress/sparse.h"
#include "job/job_layout.h"
#include "proto/config.pb.h"
#include "worker/cuda_backend.h"
#include "worker/device_backend.h"
#include "worker/ps_client.h"
#include "worker/push_fusion.h"
#include "worker/step_timeline.h"

namespace tamp {

// The run's length, which the shards' learning-rate schedule needs (it is given in epochs)
// and which only the workers know: it goes to every shard in the handshake.
struct RunLength {
  uint64_t steps_per_epoch = 0;  // >= 1
  uint64_t total_steps = 0;      // >= 1
};

// The caller's tensors: one span per tensor of the layout, in layout order, each holding that
// tensor's elements (row major). The spans may lie anywhere (one flat buffer, or a
// framework's separate tensors), in the memory the call's TensorMemory says.
using TensorSpans = absl::Span<const absl::Span<float>>;

// The spans of each tensor of `layout` in one flat buffer of layout.total_elements values
// (a shorter buffer is a programming error: CHECK-fails naming both sizes).
std::vector<absl::Span<float>> SplitIntoTensors(const JobLayout& layout, absl::Span<float> flat);

// What one step moved and where its time went (Wait() fills it).
struct StepReport {
  std::vector<uint64_t> shard_bytes_pushed;  // Wire bytes by shard.
  std::vector<uint64_t> shard_bytes_pulled;
  uint64_t raw_bytes_pushed = 0;  // fp32 bytes the step's pushes stood for.
  StepTimeline::Figures timeline;
  double decode_ms = 0;
  double apply_ms = 0;
};

// Whole-run byte counts, of this client's steps only.
struct ClientTotals {
  uint64_t bytes_pushed = 0;
  uint64_t bytes_pulled = 0;
  uint64_t raw_bytes_pushed = 0;
  // The first step this client began: 0 in a fresh run; later where the run resumed from
  // the servers' checkpoints or this process replaced a dead worker. None before a step.
  std::optional<uint64_t> start_step;
  // The steps this client took no part in: between the last it completed and the one
  // Rejoin() returned (a barrier dropped it); 0 for a process that never completed one.
  uint64_t steps_missed = 0;
};

class Client {
 public:
  // Waits for every RPC in flight.
  ~Client();

  // Client::Connect()
  //
  // Builds the codecs of every chunk of `layout` and handshakes with every shard
  // (`servers[s]` is shard s, "host:port"); `config` must be validated. `device_backends`
  // makes the device path when the first call passes device tensors.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      config::RunConfig config, JobLayout layout, uint32_t rank,
      std::vector<std::string> servers, RunLength length,
      DeviceBackendFactory device_backends = CreateCudaBackend);

  const JobLayout& layout() const { return layout_; }

  // Whether the servers answer the mean gradient (server.mode AGGREGATE) rather than the
  // weight update: then the caller runs its own optimizer on what Wait() wrote.
  bool aggregates() const { return config_.server().mode() == config::Server::AGGREGATE; }

  // Client::Start()
  //
  // The replica to start from, copied into `params`, and the step to take first: the shards'
  // weights at step 0 (model.kind REGISTERED: worker 0's `params` become them; the other
  // workers wait for them); in a SYNC run already under way (a replacement worker), the
  // replica the other workers hold, at the step they are about to take (Rejoin()).
  // FAILED_PRECONDITION when the run is over, or when an ASYNC/SSP or AGGREGATE run is under
  // way.
  absl::StatusOr<uint64_t> Start(TensorSpans params,
                                 const TensorMemory& memory = TensorMemory::Host());

  // Client::Resume()
  //
  // Start() for a process that replaces a dead worker of this rank (tamp run
  // --restart_workers, a restart loop under Slurm): it rejoins the run (Rejoin()) at the step
  // the other workers are about to take, even before the first step has completed (the dead
  // process may have pushed part of step 0, which a fresh start would push again and be
  // refused). When the run is already over, `params` get the final weights and the step
  // returned is total_steps: nothing is left to train. FAILED_PRECONDITION outside SYNC and
  // with server.mode AGGREGATE (Rejoin()).
  //
  // Example (worker_main.cc: --resume):
  //   TAMP_ASSIGN_OR_RETURN(uint64_t step, restarted ? client->Resume(params)
  //                                                  : client->Start(params));
  absl::StatusOr<uint64_t> Resume(TensorSpans params,
                                  const TensorMemory& memory = TensorMemory::Host());

  // Client::Broadcast()
  //
  // Before the job's first step (Start() returned 0; step 0 begun or not, nothing pushed),
  // every worker calls it (a collective): worker 0's `params` replace the shards' weights,
  // whatever the model kind (a checkpoint loaded after Start()), and every worker's
  // `params` get them. Worker 0 blocks until every worker has the weights the broadcast
  // replaces (their Start() or previous Broadcast()), so each worker gets each broadcast,
  // however many come in a row. FAILED_PRECONDITION later; DEADLINE_EXCEEDED naming the
  // workers that did not take part (or worker 0) within cluster.rpc_timeout_ms.
  absl::Status Broadcast(TensorSpans params, const TensorMemory& memory = TensorMemory::Host());

  // Client::BeginStep()
  //
  // Starts step `step`; every training.resync_steps steps, first replaces `params` with the
  // shards' exact weights. OUT_OF_RANGE past the run's last step; FAILED_PRECONDITION for a
  // step other than the next one (what Start() or Rejoin() returned, or the one after the
  // step Wait() completed).
  absl::Status BeginStep(uint64_t step, TensorSpans params,
                         const TensorMemory& memory = TensorMemory::Host());

  // Client::Push()
  //
  // Pushes tensor `tensor` (layout index) or `name`: `gradient` holds its elements, row
  // major. Encodes every chunk on the calling thread and sends it.
  absl::Status Push(int tensor, absl::Span<const float> gradient,
                    const TensorMemory& memory = TensorMemory::Host());
  absl::Status Push(absl::string_view name, absl::Span<const float> gradient,
                    const TensorMemory& memory = TensorMemory::Host());

  // Client::Wait()
  //
  // Waits for the answers of the step's pushes and adds each decoded update to `params`
  // (server.mode OPTIMIZER), or writes the mean gradient into them (AGGREGATE). Then the step is over: report() describes it.
  absl::Status Wait(TensorSpans params, const TensorMemory& memory = TensorMemory::Host());

  // Client::Rejoin()
  //
  // After Wait() returned ABORTED (or `cause` otherwise, logged): forgets the push residuals
  // and copies the replica the other workers hold into `params`. Returns the step to take next.
  absl::StatusOr<uint64_t> Rejoin(TensorSpans params, absl::string_view cause,
                                  const TensorMemory& memory = TensorMemory::Host());

  const StepReport& report() const { return report_; }
  const ClientTotals& totals() const { return totals_; }

  // Bytes of wire payloads the client holds between steps (call it between steps only): the
  // pushes kept for resending after a server failure (config.checkpoint), none otherwise.
  // A step's answers are freed once applied, so this does not grow with the model.
  uint64_t HeldPayloadBytes() const;

 private:
  // Per-chunk codecs of this worker: the push side keeps its residual.
  struct ChunkCodecs {
    std::unique_ptr<compress::Codec> push;
    // Sparsity warm-up's push codecs (compress/ratio_warmup.h); null without ratio_warmup.
    std::unique_ptr<compress::RatioWarmup> push_warmup;
    std::unique_ptr<compress::ErrorFeedback> push_memory;
    std::unique_ptr<compress::Codec> pull;
  };
  // A multi-round chunk whose next round the training thread must encode and push.
  struct NextRound {
    uint32_t id;
    uint32_t round;
    std::string answer;  // The shard's answer to round `round` - 1.
  };
  // A push its shard did not answer (the server went away), kept to be pushed again.
  struct LostPush {
    uint32_t id;
    std::string payload;
    absl::Status status;
    // A multi-round chunk: the step is pushed again from round 0, encoded anew
    // (ErrorFeedback::ReplayRounds()); `payload` is empty.
    bool rounds = false;
  };

  Client(config::RunConfig config, JobLayout layout, uint32_t rank, RunLength length,
         DeviceBackendFactory device_backends);
  absl::Status BuildCodecs();
  // model.kind REGISTERED, worker 0, at a run's start: `params` become every shard's initial
  // weights (PsClient::InitWeights). A no-op otherwise.
  absl::Status SetInitialWeights(TensorSpans params, const TensorMemory& memory);
  // Copies `params` into the flat scratch Pulled(), layout order.
  absl::Status ReadParams(TensorSpans params, const TensorMemory& memory);
  // Pushes round `round` of multi-round chunk `id`, already counted in `outstanding_`.
  void PushRound(uint32_t id, uint32_t round, std::string payload);
  // Pushes single-round chunk `id`, already counted in `outstanding_`.
  void PushSingle(uint32_t id, std::string payload);
  // Encodes and pushes the next round of every chunk whose last round was answered.
  void ContinueRounds(const TensorMemory& memory);
  // Whether chunk `id`'s push goes through the device backend for tensors in `memory`.
  bool PushesOnDevice(uint32_t id, const TensorMemory& memory) const {
    return memory.kind == TensorMemory::Kind::kCuda && device_plan_[id].push_on_device();
  }
  // Reconnects the shards of `pushes`, resyncs their chunks of `params`, pushes them again.
  absl::Status Resend(std::vector<LostPush>& pushes, TensorSpans params,
                      const TensorMemory& memory);
  // Whether some lost push's shard has nothing in flight (and no step error stops resends);
  // TakeResendableLocked() moves those pushes from lost_ to *out. Require mu_.
  bool ShardIdleLocked(uint32_t shard) const;
  bool ResendableLocked() const;
  void TakeResendableLocked(std::vector<LostPush>* out);
  // Decodes chunk `id`'s answer and adds it to `params`.
  absl::Status ApplyChunk(uint32_t id, TensorSpans params, const TensorMemory& memory);
  // The first call with tensors fixes their memory (making the device backend for a device);
  // later calls must pass the same. Errors name `call` and tensor `tensor` (layout index).
  absl::Status UseMemory(absl::string_view call, int tensor, const TensorMemory& memory);
  // `count` values from `from` in the caller's memory to host `to`, and back.
  absl::Status ReadTensor(const float* from, float* to, size_t count, const TensorMemory& memory);
  absl::Status WriteTensor(const float* from, float* to, size_t count,
                           const TensorMemory& memory);
  // INVALID_ARGUMENT naming `call` and the first tensor whose span does not fit the layout.
  absl::Status CheckTensors(absl::string_view call, TensorSpans tensors) const;
  // FAILED_PRECONDITION naming `call` (Start(), Resume()) once the client has started.
  absl::Status StartedOnce(absl::string_view call) const;
  // What a call refused for want of a step says after failed_step_: why, and the way on.
  std::string AfterFailedStep() const;
  // The way on for a Push() outside a step: after a failed step, before Start(), after the
  // run's last step, or the BeginStep() due.
  std::string OutsideStepHint() const;
  // pulled_, sized to the whole model: the scratch the exact weights are pulled into. It is
  // freed by the next BeginStep(), so it is held only around Start(), resyncs and recovery.
  absl::Span<float> Pulled();
  // Copies the chunks of `shard` (all chunks: -1) from pulled_ into `params`.
  absl::Status CopyPulled(int shard, TensorSpans params, const TensorMemory& memory);

  const config::RunConfig config_;
  const JobLayout layout_;
  const uint32_t rank_;
  const RunLength length_;
  const bool ride_out_restarts_;  // config.checkpoint with a reconnect timeout.
  absl::flat_hash_map<std::string, int> tensor_index_;  // By tensor name.
  std::vector<ChunkCodecs> codecs_;                    // By chunk id.
  std::vector<std::vector<uint32_t>> tensor_chunks_;  // Chunk ids of each tensor.
  // Local gradient clipping (compression.clip_norm, worker/grad_clip.h): the per-tensor
  // threshold (0: off) and this step's clipped gradient of the tensor being pushed.
  double clip_threshold_ = 0;
  std::vector<float> clipped_;

  // Where the caller's tensors live, fixed by the first call that passes them (unset
  // before); for a device, its backend and which chunks run there (by chunk id).
  std::optional<TensorMemory> memory_;
  DeviceBackendFactory device_backends_;
  std::unique_ptr<DeviceBackend> device_;
  std::vector<DeviceChunkPlan> device_plan_;

  // The step under way, written by the training thread.
  bool in_step_ = false;
  uint64_t step_ = 0;
  // The step BeginStep() must begin: Start()'s or Rejoin()'s, or the one after the step
  // Wait() completed; unknown after a step that ended in an error.
  std::optional<uint64_t> next_step_;
  std::optional<uint64_t> last_completed_step_;  // The last step Wait() completed.
  bool started_ = false;  // Start() or Resume() succeeded: neither is called again.
  // Why the last step ended in an error (Wait()'s, naming the step), until Rejoin(): what a
  // call refused for want of a step says.
  absl::Status failed_step_;
  // How many times the job's weights were set (the shards' count): the initial ones are 1,
  // each Broadcast() one more.
  uint32_t weights_generation_ = 1;
  uint32_t epoch_ = 0;
  std::vector<bool> pushed_tensors_;  // By tensor: pushed in this step.
  size_t tensors_pushed_ = 0;         // How many are.
  absl::Status encode_error_;
  StepReport report_;
  ClientTotals totals_;
  StepTimeline timeline_;
  std::vector<float> decoded_;              // Scratch: one chunk's decoded update.
  std::vector<float> pulled_;               // Exact weights pulled (flat); see Pulled().
  compress::SparseEntries pulled_entries_;  // Scratch: one sparse update's entries.

  // Shared with gRPC's callbacks, guarded by mu_ (std::mutex, not absl::Mutex: Debian's
  // Abseil is not built for ThreadSanitizer).
  std::mutex mu_;
  std::condition_variable progress_;  // An answer or a queued round arrived.
  int outstanding_ = 0;  // Chunks whose step has not been answered (or failed) yet.
  absl::Status first_error_;
  // Multi-round push codecs (compress/codec.h): a round's answer, before the last, queues
  // the chunk's next round here; the training thread encodes and pushes it (from Push(),
  // between layers, and while it waits), so codecs are only ever touched by that thread and
  // gRPC's callbacks never block or compute.
  std::vector<NextRound> next_rounds_;
  // Chunks whose final answer arrived and that the training thread has not applied yet.
  std::vector<uint32_t> answered_;
  std::vector<std::string> updates_;     // By chunk id, this step's pulls, until applied.
  std::vector<std::string> aggregates_;  // By chunk id, a multi-round codec's last answer.
  // Server failure (config.checkpoint): a push its shard did not answer (IsServerGone()) is
  // kept, with its payload, until every other push to its shard has called back; then the
  // shard is reconnected and resynced and the push sent again (Wait()), with every push of
  // the step that shard had answered before it restarted. A restarted shard may be past this
  // step for a chunk (OUT_OF_RANGE): the weights pulled at the resync stand for that update.
  std::vector<LostPush> lost_;
  // By chunk id, this step's single-round push payloads that their shard answered, kept
  // while server restarts are ridden out: a shard that restarts lost those steps.
  std::vector<std::string> pushed_;
  // Chunks whose payload is in pushed_, and multi-round chunks whose last round was answered
  // (a restarted shard gets their step again from round 0).
  std::vector<uint32_t> answered_pushes_;
  // By shard: pushes sent and not called back yet. A shard's lost pushes go again only once
  // it has none (Wait()), without waiting for the other shards.
  std::vector<int> in_flight_by_shard_;

  // Destroyed first (~Client()), so its callbacks have all run before the state above goes.
  std::unique_ptr<PsClient> ps_client_;
  // Small chunks' pushes, held until their shard's batch is full or the step's pushes end
  // (cluster.fusion_bytes); flushed by Push() after the step's last tensor, Wait(), Rejoin()
  // and Resend(). Made with ps_client_, destroyed before it.
  std::unique_ptr<PushFusion> fusion_;
};

}  // namespace tamp

#endif  // TAMP_WORKER_CLIENT_H_
