#include "worker/trainer.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/cpu_time.h"
#include "base/median.h"
#include "base/status_macros.h"
#include "job/builtin_trainer_config.h"
#include "job/config.h"
#include "optim/schedule.h"
#include "worker/cpu_models.h"
#include "worker/gpu_model.h"
#include "worker/layout_model.h"

namespace tamp {
namespace {

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Trainer::Trainer(config::RunConfig config, uint32_t rank, EventSink sink)
    : config_(std::move(config)),
      rank_(rank),
      sink_(std::move(sink)),
      synthetic_(config_.model().kind() == config::Model::LAYOUT) {}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(config::RunConfig config, uint32_t rank,
                                                         std::vector<std::string> server_addresses,
                                                         EventSink sink, TrainerParts parts) {
  if (rank >= config.cluster().num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("worker rank ", rank, " is out of range: cluster.num_workers is ",
                                                   config.cluster().num_workers()));
  }
  TAMP_RETURN_IF_ERROR(CheckBuiltInTrainerConfig(config));
  std::unique_ptr<Trainer> trainer(new Trainer(std::move(config), rank, std::move(sink)));
  const config::RunConfig& cfg = trainer->config_;
  TAMP_ASSIGN_OR_RETURN(JobLayout layout, BuildJobLayout(cfg));
  if (trainer->synthetic_) {
    // One epoch of max_steps steps (config validation requires both).
    TAMP_ASSIGN_OR_RETURN(trainer->model_,
                          LoadLayoutModel(cfg.model(), layout.tensors,
                                          cfg.model().init_seed() * 1000003 + rank));
    trainer->steps_per_epoch_ = static_cast<int64_t>(cfg.training().max_steps());
  } else {
    TAMP_RETURN_IF_ERROR(trainer->LoadData(layout, parts.model));
  }
  if (cfg.server().mode() == config::Server::AGGREGATE) {
    TAMP_RETURN_IF_ERROR(trainer->PrepareLocalOptimizer(layout));
  }
  // The shards' learning-rate schedule (in epochs) needs the run's length, which only the
  // workers know: it goes to every shard in the handshake.
  trainer->total_steps_ =
      TotalSteps(cfg.training(), static_cast<uint64_t>(trainer->steps_per_epoch_));
  TAMP_ASSIGN_OR_RETURN(
      trainer->client_,
      Client::Connect(cfg, std::move(layout), rank, std::move(server_addresses),
                      RunLength{static_cast<uint64_t>(trainer->steps_per_epoch_),
                                trainer->total_steps_},
                      std::move(parts.device_backends)));
  trainer->param_tensors_ = SplitIntoTensors(trainer->client_->layout(), trainer->model_->params());
  trainer->memory_ = trainer->model_->memory();
  return trainer;
}

absl::Status Trainer::PrepareLocalOptimizer(const JobLayout& layout) {
  TAMP_ASSIGN_OR_RETURN(local_optimizer_,
                        CreateOptimizer(config_.optimizer(), layout.total_elements));
  mean_gradient_.assign(layout.total_elements, 0.0f);
  mean_gradient_tensors_ = SplitIntoTensors(layout, absl::MakeSpan(mean_gradient_));
  return absl::OkStatus();
}

absl::Status Trainer::LoadData(const JobLayout& layout,
                               const TrainerParts::ModelFactory& make_model) {
  const config::Data& data = config_.data();
  TAMP_ASSIGN_OR_RETURN(train_, LoadFashionMnist(data.dir(), Split::kTrain, data.train_limit()));
  if (rank_ == 0) {
    TAMP_ASSIGN_OR_RETURN(test_, LoadFashionMnist(data.dir(), Split::kTest, data.test_limit()));
  }
  const uint32_t workers = config_.cluster().num_workers();
  if (train_.size / workers < data.batch_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.batch_size: ", data.batch_size(), " is larger than each worker's shard (",
        train_.size, " training examples / ", workers, " workers)"));
  }
  batcher_ = std::make_unique<Batcher>(train_, rank_, workers, data.batch_size(),
                                       data.shuffle_seed());
  TAMP_ASSIGN_OR_RETURN(
      model_,
      make_model ? make_model(config_, layout.tensors, data.batch_size())
      : config_.device() == config::CUDA  // On the GPU SelectCudaDevice() chose.
          ? CreateGpuModel(config_.model(), layout.tensors, data.batch_size())
          : CreateCpuModel(config_.model(), layout.tensors, data.batch_size()));
  batch_x_.resize(size_t{data.batch_size()} * kImageSize);
  batch_labels_.resize(data.batch_size());
  steps_per_epoch_ = batcher_->steps_per_epoch();
  return absl::OkStatus();
}

WorkerFigures Trainer::Figures() const {
  return {rank_, client_->totals(), client_->report()};
}

void Trainer::Emit(events::WorkerEvent event) {
  event.set_synthetic(synthetic_);
  sink_(event);
}

absl::Status Trainer::Step(uint64_t step, int64_t index, float* loss) {
  if (batcher_) {
    batcher_->Fill(static_cast<uint32_t>(step / steps_per_epoch_), index, batch_x_.data(),
                   batch_labels_.data());
  }
  TAMP_RETURN_IF_ERROR(client_->BeginStep(step, param_tensors_, memory_));
  const JobLayout& layout = client_->layout();
  // A push error ends the step; Wait() returns it once every RPC in flight has called back.
  // On a device the gradient is final on memory_.stream, where the client's work goes.
  auto on_tensor_ready = [&](int tensor) {
    client_->Push(tensor,
                  model_->gradient(tensor, layout.tensor_offsets[tensor],
                                   static_cast<size_t>(layout.tensors[tensor].elements())),
                  memory_)
        .IgnoreError();
  };
  *loss = model_->TrainStep(batch_x_.data(), batch_labels_.data(),
                            static_cast<int>(config_.data().batch_size()), on_tensor_ready);
  TAMP_RETURN_IF_ERROR(model_->status());
  if (local_optimizer_ == nullptr) {
    // Backward no longer reads the replica's weights: the client applies each chunk's update
    // as soon as its shard answers, while the other answers are still on the wire.
    return client_->Wait(param_tensors_, memory_);
  }
  TAMP_RETURN_IF_ERROR(client_->Wait(mean_gradient_tensors_, memory_));
  const double learning_rate = LearningRate(config_.optimizer(), step,
                                            static_cast<uint64_t>(steps_per_epoch_), total_steps_);
  local_optimizer_->Apply(model_->params(), mean_gradient_, static_cast<int64_t>(step),
                          static_cast<float>(learning_rate));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Trainer::Params() {
  std::vector<float> params(model_->params().size());
  TAMP_RETURN_IF_ERROR(model_->ReadParams(absl::MakeSpan(params)));
  return params;
}

absl::StatusOr<double> Trainer::Evaluate() {
  const int64_t batch = batcher_->batch_size();
  const int64_t pixels = int64_t{test_.rows} * test_.cols;
  int64_t correct = 0;
  for (int64_t first = 0; first < test_.size; first += batch) {
    const int64_t count = std::min(batch, test_.size - first);
    NormalizeImages(&test_.images[first * pixels], count * pixels, batch_x_.data());
    correct += model_->CountCorrect(batch_x_.data(), &test_.labels[first], static_cast<int>(count));
  }
  TAMP_RETURN_IF_ERROR(model_->status());
  return test_.size == 0 ? 0.0 : static_cast<double>(correct) / test_.size;
}

absl::Status Trainer::Run(bool resume) {
  const bool sync = config_.consistency().mode() == config::Consistency::SYNC;
  TAMP_ASSIGN_OR_RETURN(uint64_t step, resume ? client_->Resume(param_tensors_, memory_)
                                              : client_->Start(param_tensors_, memory_));
  const config::Training& training = config_.training();
  const int64_t per_epoch = steps_per_epoch_;
  const uint64_t total_steps = total_steps_;  // As sent in the handshake.

  std::vector<double> step_ms;
  step_ms.reserve(total_steps);
  double accuracy = 0;
  bool evaluated_last_step = false;
  for (; step < total_steps; ++step) {
    const uint32_t epoch = static_cast<uint32_t>(step / per_epoch);
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ThreadCpuMs();
    float loss = 0;
    const absl::Status stepped = Step(step, static_cast<int64_t>(step % per_epoch), &loss);
    if (sync && absl::IsAborted(stepped)) {  // Dropped from the barriers.
      TAMP_ASSIGN_OR_RETURN(const uint64_t next,
                            client_->Rejoin(param_tensors_, stepped.message(), memory_));
      step = next - 1;  // The loop's ++step makes it `next` (>= 1).
      continue;
    }
    TAMP_RETURN_IF_ERROR(stepped);
    step_ms.push_back(MillisecondsSince(start));

    Emit(StepEvent(Figures(), step + 1, total_steps, epoch, loss, step_ms.back(),
                   ThreadCpuMs() - cpu_start));

    const bool last_step = step + 1 == total_steps;
    const bool epoch_done = (step + 1) % per_epoch == 0 || last_step;
    const bool step_eval_due =
        training.eval_every_steps() != 0 && (step + 1) % training.eval_every_steps() == 0;
    const bool eval_due =
        (epoch_done && training.eval_every_epoch()) || step_eval_due || last_step;
    if (rank_ == 0 && eval_due && !synthetic_) {
      TAMP_ASSIGN_OR_RETURN(accuracy, Evaluate());
      Emit(EvalEvent(Figures(), step + 1, total_steps, epoch, accuracy));
      evaluated_last_step = last_step;
    }
  }
  // Resumed after the last step, or dropped and the run ended without this worker: the
  // final weights' accuracy.
  if (rank_ == 0 && !evaluated_last_step && !synthetic_) {
    TAMP_ASSIGN_OR_RETURN(accuracy, Evaluate());
  }
  // Only worker 0 evaluates (a synthetic model's 0 is documented as meaning nothing).
  const std::optional<double> final_accuracy =
      rank_ == 0 ? std::optional<double>(accuracy) : std::nullopt;
  // The epoch of the last step, as its STEP event said (0 when none ran).
  const auto last_epoch = static_cast<uint32_t>((step == 0 ? 0 : step - 1) / per_epoch);
  Emit(DoneEvent(Figures(), step, total_steps, last_epoch, final_accuracy, Median(step_ms)));
  return absl::OkStatus();
}

}  // namespace tamp
