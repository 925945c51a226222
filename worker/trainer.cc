#include "worker/trainer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compress/registry.h"
#include "glog/logging.h"

namespace tamp {
namespace {

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  return values[mid];
}

}  // namespace

Trainer::Trainer(config::RunConfig config, uint32_t rank, EventSink sink)
    : config_(std::move(config)), rank_(rank), sink_(std::move(sink)) {}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(config::RunConfig config, uint32_t rank,
                                                         std::vector<std::string> server_addresses,
                                                         EventSink sink) {
  if (rank >= config.cluster().num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("worker rank ", rank, " is out of range: cluster.num_workers is ",
                                                   config.cluster().num_workers()));
  }
  std::unique_ptr<Trainer> trainer(new Trainer(std::move(config), rank, std::move(sink)));
  const config::RunConfig& cfg = trainer->config_;
  TAMP_ASSIGN_OR_RETURN(trainer->layout_, BuildJobLayout(cfg));
  const JobLayout& layout = trainer->layout_;

  const config::Data& data = cfg.data();
  TAMP_ASSIGN_OR_RETURN(trainer->train_, LoadFashionMnist(data.dir(), Split::kTrain, data.train_limit()));
  if (rank == 0) {
    TAMP_ASSIGN_OR_RETURN(trainer->test_, LoadFashionMnist(data.dir(), Split::kTest, data.test_limit()));
  }
  const uint32_t workers = cfg.cluster().num_workers();
  if (trainer->train_.size / workers < data.batch_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.batch_size: ", data.batch_size(), " is larger than each worker's shard (",
        trainer->train_.size, " training examples / ", workers, " workers)"));
  }
  trainer->batcher_ = std::make_unique<Batcher>(trainer->train_, rank, workers, data.batch_size(),
                                                data.shuffle_seed());
  TAMP_ASSIGN_OR_RETURN(trainer->model_, MlpCpu::Create(layout.tensors, data.batch_size()));
  trainer->batch_x_.resize(size_t{data.batch_size()} * kImageSize);
  trainer->batch_labels_.resize(data.batch_size());

  trainer->tensor_chunks_.resize(layout.tensors.size());
  for (const ChunkPlan& plan : layout.chunks) {
    ChunkCodecs codecs;
    TAMP_ASSIGN_OR_RETURN(codecs.push, compress::CreateCodec(plan.compression.push(), plan.chunk.length));
    TAMP_ASSIGN_OR_RETURN(codecs.push_memory, compress::ErrorFeedback::Create(
                                                  plan.compression.push_feedback(), plan.chunk.length));
    TAMP_ASSIGN_OR_RETURN(codecs.pull, compress::CreateCodec(plan.compression.pull(), plan.chunk.length));
    trainer->codecs_.push_back(std::move(codecs));
    trainer->tensor_chunks_[plan.chunk.tensor].push_back(plan.chunk.id);
  }
  trainer->updates_.resize(layout.chunks.size());
  TAMP_ASSIGN_OR_RETURN(trainer->client_,
                        PsClient::Connect(cfg, layout, rank, server_addresses));
  return trainer;
}

void Trainer::Emit(events::WorkerEvent event) {
  event.set_worker(rank_);
  event.set_bytes_pushed(bytes_pushed_);
  event.set_bytes_pulled(bytes_pulled_);
  event.set_raw_bytes_pushed(raw_bytes_pushed_);
  sink_(event);
}

absl::Status Trainer::Step(uint64_t step, uint32_t epoch, int64_t index, float* loss) {
  batcher_->Fill(epoch, index, batch_x_.data(), batch_labels_.data());

  // std::mutex, not absl::Mutex: Debian's Abseil is not built for ThreadSanitizer.
  std::mutex mu;
  std::condition_variable all_answered;
  int outstanding = 0;
  absl::Status first_error;
  absl::Status encode_error;
  const absl::Span<const float> grads = model_->grads();
  auto push_tensor = [&](int tensor) {
    for (uint32_t id : tensor_chunks_[tensor]) {
      if (!encode_error.ok()) return;
      const ChunkPlan& plan = layout_.chunks[id];
      std::string payload;
      ChunkCodecs& codecs = codecs_[id];
      encode_error = codecs.push_memory->Compress(
          *codecs.push, grads.subspan(layout_.flat_offset(plan), plan.chunk.length),
          PushKey(config_, step, id, rank_), &payload);
      if (!encode_error.ok()) return;
      bytes_pushed_ += payload.size();
      raw_bytes_pushed_ += plan.chunk.length * sizeof(float);
      {
        std::lock_guard<std::mutex> lock(mu);
        ++outstanding;
      }
      client_->PushPull(step, id, std::move(payload),
                        [&, id](absl::Status status, std::string update) {
                          std::lock_guard<std::mutex> lock(mu);
                          if (!status.ok() && first_error.ok()) first_error = status;
                          updates_[id] = std::move(update);
                          if (--outstanding == 0) all_answered.notify_one();
                        });
    }
  };
  *loss = model_->TrainStep(batch_x_.data(), batch_labels_.data(), batcher_->batch_size(), push_tensor);
  {
    std::unique_lock<std::mutex> lock(mu);
    all_answered.wait(lock, [&] { return outstanding == 0; });
  }
  TAMP_RETURN_IF_ERROR(encode_error);
  TAMP_RETURN_IF_ERROR(first_error);

  // All shards answered: the replica's weights are no longer read by backward.
  const absl::Span<float> params = model_->params();
  for (const ChunkPlan& plan : layout_.chunks) {
    const uint32_t id = plan.chunk.id;
    bytes_pulled_ += updates_[id].size();
    absl::Status decoded = codecs_[id].pull->DecodeAdd(
        updates_[id], PullKey(config_, step, id),
        params.subspan(layout_.flat_offset(plan), plan.chunk.length));
    if (!decoded.ok()) {
      return absl::Status(decoded.code(), absl::StrCat("update of chunk ", id, " step ", step,
                                                       " from shard ", plan.chunk.shard, ": ",
                                                       decoded.message()));
    }
  }
  return absl::OkStatus();
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
  return test_.size == 0 ? 0.0 : static_cast<double>(correct) / test_.size;
}

absl::Status Trainer::Run() {
  TAMP_ASSIGN_OR_RETURN(uint64_t step, client_->PullWeights(model_->params()));
  if (step != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the servers are at step ", step, "; a worker can only join a job at step 0"));
  }
  const config::Training& training = config_.training();
  const int64_t per_epoch = batcher_->steps_per_epoch();
  uint64_t total_steps = per_epoch * training.epochs();
  if (training.max_steps() != 0) total_steps = std::min<uint64_t>(total_steps, training.max_steps());

  std::vector<double> step_ms;
  step_ms.reserve(total_steps);
  double accuracy = 0;
  for (; step < total_steps; ++step) {
    const uint32_t epoch = static_cast<uint32_t>(step / per_epoch);
    const auto start = std::chrono::steady_clock::now();
    if (training.resync_steps() != 0 && step != 0 && step % training.resync_steps() == 0) {
      TAMP_RETURN_IF_ERROR(client_->PullWeights(model_->params()).status());
    }
    float loss = 0;
    TAMP_RETURN_IF_ERROR(Step(step, epoch, static_cast<int64_t>(step % per_epoch), &loss));
    step_ms.push_back(MillisecondsSince(start));

    events::WorkerEvent event;
    event.set_kind(events::WorkerEvent::STEP);
    event.set_step(step + 1);
    event.set_total_steps(total_steps);
    event.set_epoch(epoch);
    event.set_loss(loss);
    event.set_step_ms(step_ms.back());
    Emit(event);

    const bool epoch_done = (step + 1) % per_epoch == 0 || step + 1 == total_steps;
    if (rank_ == 0 && epoch_done && (training.eval_every_epoch() || step + 1 == total_steps)) {
      TAMP_ASSIGN_OR_RETURN(accuracy, Evaluate());
      events::WorkerEvent eval;
      eval.set_kind(events::WorkerEvent::EVAL);
      eval.set_step(step + 1);
      eval.set_total_steps(total_steps);
      eval.set_epoch(epoch);
      eval.set_test_accuracy(accuracy);
      Emit(eval);
    }
  }
  events::WorkerEvent done;
  done.set_kind(events::WorkerEvent::DONE);
  done.set_step(step);
  done.set_total_steps(total_steps);
  done.set_test_accuracy(accuracy);
  done.set_step_ms_median(Median(step_ms));
  Emit(done);
  return absl::OkStatus();
}

}  // namespace tamp
