// Trainer: the training loop of the built-in models (MLP, CNN on Fashion-MNIST), a thin user
// of the worker client (worker/client.h), which owns everything between a gradient and its
// applied update.
//
// Each step: fill a batch, run forward/backward; as backward finishes a layer (last layer
// first) push its gradient through the client, so communication overlaps the rest of
// backward; then wait for the answers, which the client decodes into the replica. A worker
// that a SYNC barrier dropped (Wait() answers ABORTED) rejoins and goes on from the step the
// others are about to take. Worker 0 evaluates test accuracy after each epoch (and every
// training.eval_every_steps, and after the last step).
//
// model.kind LAYOUT (worker/layout_model.h): no data set and no evaluation; the model sleeps
// for its profile's compute and writes synthetic gradients; every event says `synthetic`.
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
#include "proto/config.pb.h"
#include "proto/events.pb.h"
#include "worker/batcher.h"
#include "worker/client.h"
#include "worker/fashion_mnist.h"
#include "worker/model.h"

namespace tamp {

class Trainer {
 public:
  using EventSink = std::function<void(const events::WorkerEvent&)>;

  // Loads data, builds the model, connects the client to every shard.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(config::RunConfig config, uint32_t rank,
                                                         std::vector<std::string> server_addresses,
                                                         EventSink sink);

  // Trains to the end; the first error (data, RPC, codec) stops it. `resume`: this process
  // replaces a dead worker of its rank and rejoins the run (Client::Resume()) instead of
  // starting it (Client::Start()).
  absl::Status Run(bool resume = false);

  // The replica's parameters (flat, layout order).
  absl::Span<const float> params() { return model_->params(); }

 private:
  Trainer(config::RunConfig config, uint32_t rank, EventSink sink);
  // The built-in models' data, batcher and CPU model.
  absl::Status LoadData(const JobLayout& layout);
  // One step: the batch, forward/backward pushing each tensor as it is ready, the answers.
  absl::Status Step(uint64_t step, int64_t index, float* loss);
  absl::StatusOr<double> Evaluate();
  void Emit(events::WorkerEvent event);

  const config::RunConfig config_;
  const uint32_t rank_;
  const EventSink sink_;
  const bool synthetic_;  // model.kind LAYOUT.
  Dataset train_;
  Dataset test_;  // Loaded by worker 0 only.
  std::unique_ptr<Batcher> batcher_;  // Null for LAYOUT.
  int64_t steps_per_epoch_ = 0;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Client> client_;
  std::vector<absl::Span<float>> param_tensors_;  // The model's weights, tensor by tensor.
  uint64_t total_steps_ = 0;  // Of the whole run; computed before connecting (handshake).
  std::vector<float> batch_x_;
  std::vector<uint8_t> batch_labels_;
};

}  // namespace tamp

#endif  // TAMP_WORKER_TRAINER_H_
