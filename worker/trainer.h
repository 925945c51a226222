// Trainer: one worker's synchronous training loop.
//
// Each step: fill a batch, run forward/backward; as backward finishes a layer (last layer
// first) compress each of its chunks (push codec + the worker's residual) and push it, so
// communication overlaps the rest of backward; once every chunk's update has come back,
// decode each into the replica. A chunk whose push codec takes several rounds per step
// (powersgd) pushes round r + 1 once the shard has answered round r; the training thread
// encodes it, between layers of backward or while it waits, so other chunks keep flowing.
// Every `training.resync_steps` (and at start) the replica is replaced by the shards' exact
// weights. Worker 0 evaluates test accuracy after each epoch.
//
// SYNC worker failure (docs/consistency.md): a worker whose pushes are refused ABORTED was
// dropped from the barriers (consistency.worker_timeout_ms); it forgets its residuals,
// rejoins (PsClient::Rejoin: the others' replica, at the step they are about to take) and
// goes on from there. A worker started while the run is under way (a replacement) does
// the same before its first step.
//
// Server failure (config.checkpoint; README "Checkpoints and failures"): pushes a shard
// does not answer (the server went away: UNAVAILABLE, CANCELLED) are kept with their
// payloads; once the step's other answers are in, the worker reconnects to that shard with
// backoff (PsClient::Reconnect), replaces the shard's chunks of its replica by the shard's
// exact weights and pushes them again, with the step's pushes a restarted shard had
// answered before (it lost them, and the other workers may not have their answers). A
// restarted shard that is already past the step for a chunk answers OUT_OF_RANGE, and the
// pulled weights stand. Push residuals are kept: the payloads pushed again are the same.
//
// Progress goes to `sink` as tamp.events.WorkerEvent (STEP each step, EVAL, DONE at the end).
#ifndef TAMP_WORKER_TRAINER_H_
#define TAMP_WORKER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/job_layout.h"
#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "compress/ratio_warmup.h"
#include "proto/config.pb.h"
#include "proto/events.pb.h"
#include "worker/batcher.h"
#include "worker/fashion_mnist.h"
#include "worker/model.h"
#include "worker/ps_client.h"
#include "worker/step_timeline.h"

namespace tamp {

class Trainer {
 public:
  using EventSink = std::function<void(const events::WorkerEvent&)>;

  // Loads data, builds the model and codecs, connects to every shard.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(config::RunConfig config, uint32_t rank,
                                                         std::vector<std::string> server_addresses,
                                                         EventSink sink);

  // Trains to the end; the first error (data, RPC, codec) stops it.
  absl::Status Run();

  // The replica's parameters (flat, layout order).
  absl::Span<const float> params() { return model_->params(); }

 private:
  // Per-chunk codecs of this worker: the push side keeps its residual.
  struct ChunkCodecs {
    std::unique_ptr<compress::Codec> push;
    // Sparsity warm-up's push codecs (compress/ratio_warmup.h); null without ratio_warmup.
    std::unique_ptr<compress::RatioWarmup> push_warmup;
    std::unique_ptr<compress::ErrorFeedback> push_memory;
    std::unique_ptr<compress::Codec> pull;
  };

  Trainer(config::RunConfig config, uint32_t rank, EventSink sink);
  absl::Status Step(uint64_t step, uint32_t epoch, int64_t index, float* loss);
  absl::StatusOr<double> Evaluate();
  // Rejoins the run after `cause` (logged): resets the push residuals and pulls the others'
  // replica. Returns the step to take next.
  absl::StatusOr<uint64_t> Rejoin(absl::string_view cause);
  void Emit(events::WorkerEvent event);

  const config::RunConfig config_;
  const uint32_t rank_;
  const EventSink sink_;
  JobLayout layout_;
  Dataset train_;
  Dataset test_;  // Loaded by worker 0 only.
  std::unique_ptr<Batcher> batcher_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<PsClient> client_;
  uint64_t total_steps_ = 0;  // Of the whole run; computed before connecting (handshake).
  std::vector<ChunkCodecs> codecs_;                   // By chunk id.
  // Local gradient clipping (compression.clip_norm, worker/grad_clip.h): the per-tensor
  // threshold (0: off) and this step's clipped gradient of the tensor being pushed.
  double clip_threshold_ = 0;
  std::vector<float> clipped_;
  std::vector<std::vector<uint32_t>> tensor_chunks_;  // Chunk ids of each tensor.
  std::vector<float> batch_x_;
  std::vector<uint8_t> batch_labels_;
  std::vector<std::string> updates_;                  // By chunk id, this step's pulls.
  // By chunk id, this step's single-round push payloads that their shard answered, kept
  // while server restarts are ridden out (checkpoint.reconnect_timeout_ms): a shard that
  // restarts lost those steps and needs the pushes again (Step()).
  std::vector<std::string> pushed_;
  // By chunk id, this step's last answer of a multi-round push codec (compress/codec.h).
  std::vector<std::string> aggregates_;
  uint64_t bytes_pushed_ = 0;
  uint64_t bytes_pulled_ = 0;
  uint64_t raw_bytes_pushed_ = 0;
  // This step's figures: Step() fills them, Run() puts them in the STEP event.
  std::vector<uint64_t> step_shard_pushed_;  // Wire bytes by shard.
  std::vector<uint64_t> step_shard_pulled_;
  uint64_t step_raw_pushed_ = 0;
  StepTimeline timeline_;
  double decode_ms_ = 0;
  double apply_ms_ = 0;
  std::vector<float> decoded_;  // Scratch: one chunk's decoded update.
  compress::SparseEntries pulled_entries_;  // Scratch: one sparse update's entries.
};

}  // namespace tamp

#endif  // TAMP_WORKER_TRAINER_H_
