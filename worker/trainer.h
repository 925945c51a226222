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
//
// The model's weights and gradients stay where the model keeps them (Model::memory()): with
// `device: CUDA` on the GPU, where the client encodes each gradient and applies each answer
// (worker/gpu_model.h); the trainer hands the client the model's spans and memory.
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
#include "job/model_layout.h"
#include "optim/optimizer.h"
#include "proto/config.pb.h"
#include "proto/events.pb.h"
#include "worker/batcher.h"
#include "worker/client.h"
#include "worker/cuda_backend.h"
#include "worker/device_backend.h"
#include "worker/fashion_mnist.h"
#include "worker/model.h"
#include "worker/worker_events.h"

namespace tamp {

// How a Trainer makes its built-in model and the client's device backend. The defaults
// follow config.device (worker/cpu_models.h, worker/gpu_model.h, worker/cuda_backend.h);
// tests put stand-ins here (worker/trainer_device_test.cc).
struct TrainerParts {
  using ModelFactory = std::function<absl::StatusOr<std::unique_ptr<Model>>(
      const config::RunConfig& config, std::vector<TensorSpec> tensors, int max_batch)>;
  ModelFactory model;  // Null: the CPU or GPU model, as config.device says.
  DeviceBackendFactory device_backends = CreateCudaBackend;
};

class Trainer {
 public:
  using EventSink = std::function<void(const events::WorkerEvent&)>;

  // Loads data, builds the model, connects the client to every shard. With server.mode
  // AGGREGATE the trainer steps the answered mean gradient with the config's optimizer (and
  // learning-rate schedule) itself, on the CPU (job/builtin_trainer_config.h).
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(config::RunConfig config, uint32_t rank,
                                                         std::vector<std::string> server_addresses,
                                                         EventSink sink, TrainerParts parts = {});

  // Trains to the end; the first error (data, RPC, codec) stops it. `resume`: this process
  // replaces a dead worker of its rank and rejoins the run (Client::Resume()) instead of
  // starting it (Client::Start()).
  absl::Status Run(bool resume = false);

  // A host copy of the replica's parameters (flat, layout order), wherever the model keeps
  // them.
  absl::StatusOr<std::vector<float>> Params();

 private:
  Trainer(config::RunConfig config, uint32_t rank, EventSink sink);
  // server.mode AGGREGATE: the optimizer this worker steps with, and the answers' buffer.
  absl::Status PrepareLocalOptimizer(const JobLayout& layout);
  // The built-in models' data, batcher and model.
  absl::Status LoadData(const JobLayout& layout, const TrainerParts::ModelFactory& make_model);
  // One step: the batch, forward/backward pushing each tensor as it is ready, the answers.
  absl::Status Step(uint64_t step, int64_t index, float* loss);
  absl::StatusOr<double> Evaluate();
  // What the events report of the client (worker/worker_events.h).
  WorkerFigures Figures() const;
  // Marks `event` synthetic (model.kind LAYOUT) or not and hands it to the sink.
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
  // server.mode AGGREGATE: the servers answer the workers' mean gradient, which this worker
  // steps with the config's optimizer (as every worker does, so the replicas stay equal).
  std::unique_ptr<Optimizer> local_optimizer_;    // Null in OPTIMIZER mode.
  std::vector<float> mean_gradient_;              // The answers, flat.
  std::vector<absl::Span<float>> mean_gradient_tensors_;
  TensorMemory memory_;                           // Where they and the gradients live.
  uint64_t total_steps_ = 0;  // Of the whole run; computed before connecting (handshake).
  std::vector<float> batch_x_;
  std::vector<uint8_t> batch_labels_;
};

}  // namespace tamp

#endif  // TAMP_WORKER_TRAINER_H_
