#include "worker/trainer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compress/registry.h"
#include "worker/grad_clip.h"
#include "worker/cpu_models.h"
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

// Steps in the whole run: `epochs` passes of `per_epoch` steps, cut at max_steps when set.
uint64_t TotalSteps(const config::Training& training, int64_t per_epoch) {
  const uint64_t total = static_cast<uint64_t>(per_epoch) * training.epochs();
  return training.max_steps() != 0 ? std::min<uint64_t>(total, training.max_steps()) : total;
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
  TAMP_ASSIGN_OR_RETURN(trainer->model_,
                        CreateCpuModel(cfg.model(), layout.tensors, data.batch_size()));
  trainer->batch_x_.resize(size_t{data.batch_size()} * kImageSize);
  trainer->batch_labels_.resize(data.batch_size());

  trainer->tensor_chunks_.resize(layout.tensors.size());
  for (const ChunkPlan& plan : layout.chunks) {
    ChunkCodecs codecs;
    // Codecs that view a chunk as a matrix see its rows in the tensor, as the shard's do.
    const compress::ChunkShape shape = compress::ChunkShapeInTensor(
        layout.tensor_of(plan).shape, plan.chunk.offset, plan.chunk.length);
    absl::StatusOr<std::unique_ptr<compress::Codec>> push =
        compress::CreateCodec(plan.compression.push(), shape);
    if (!push.ok()) {
      return absl::Status(push.status().code(),
                          absl::StrCat("chunk ", plan.chunk.id, " (", layout.tensor_of(plan).name,
                                       "): ", push.status().message()));
    }
    codecs.push = *std::move(push);
    TAMP_ASSIGN_OR_RETURN(codecs.push_warmup,
                          compress::RatioWarmup::Create(plan.compression.push(), shape));
    TAMP_ASSIGN_OR_RETURN(codecs.push_memory, compress::ErrorFeedback::Create(
                                                  plan.compression.push_feedback(), plan.chunk.length));
    TAMP_ASSIGN_OR_RETURN(codecs.pull, compress::CreateCodec(plan.compression.pull(), shape));
    trainer->codecs_.push_back(std::move(codecs));
    trainer->tensor_chunks_[plan.chunk.tensor].push_back(plan.chunk.id);
  }
  if (cfg.compression().has_clip_norm()) {
    trainer->clip_threshold_ = LocalClipThreshold(cfg.compression().clip_norm(), workers);
  }
  trainer->updates_.resize(layout.chunks.size());
  trainer->pushed_.resize(layout.chunks.size());
  trainer->aggregates_.resize(layout.chunks.size());
  // The shards' learning-rate schedule (in epochs) needs the run's length, which only the
  // workers know: it goes to every shard in the handshake.
  const int64_t per_epoch = trainer->batcher_->steps_per_epoch();
  trainer->total_steps_ = TotalSteps(cfg.training(), per_epoch);
  TAMP_ASSIGN_OR_RETURN(trainer->client_,
                        PsClient::Connect(cfg, layout, rank, server_addresses,
                                          static_cast<uint64_t>(per_epoch), trainer->total_steps_));
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
  using Clock = StepTimeline::Clock;
  timeline_.Reset();
  step_shard_pushed_.assign(layout_.shard_bytes.size(), 0);
  step_shard_pulled_.assign(layout_.shard_bytes.size(), 0);
  step_raw_pushed_ = 0;
  decode_ms_ = 0;
  apply_ms_ = 0;

  // std::mutex, not absl::Mutex: Debian's Abseil is not built for ThreadSanitizer.
  std::mutex mu;
  std::condition_variable progress;  // An answer or a queued round arrived.
  int outstanding = 0;  // Chunks whose step has not been answered (or failed) yet.
  absl::Status first_error;
  absl::Status encode_error;
  // Multi-round push codecs (compress/codec.h): a round's answer, before the last, queues the
  // chunk's next round here; the training thread encodes and pushes it (from push_tensor
  // between layers, and while it waits below), so codecs are only ever touched by this
  // thread and gRPC's callbacks never block or compute. Guarded by mu.
  struct NextRound {
    uint32_t id;
    uint32_t round;
    std::string answer;  // The shard's answer to round `round` - 1.
  };
  std::vector<NextRound> next_rounds;
  // Chunks whose final answer arrived and that the training thread has not applied yet.
  // Guarded by mu.
  std::vector<uint32_t> answered;
  const absl::Span<const float> grads = model_->grads();

  // Pushes round `round` of multi-round chunk `id`, already counted in `outstanding`.
  auto push_round = [&](uint32_t id, uint32_t round, std::string payload) {
    bytes_pushed_ += payload.size();
    step_shard_pushed_[layout_.chunks[id].chunk.shard] += payload.size();
    const bool last = static_cast<int>(round) + 1 == codecs_[id].push->rounds();
    const Clock::time_point sent = Clock::now();
    client_->PushPullRound(step, round, id, std::move(payload),
                           [&, id, round, last, sent](absl::Status status, PsClient::RoundAnswer answer) {
                             std::lock_guard<std::mutex> lock(mu);
                             timeline_.AddRpc(sent, Clock::now());
                             if (!status.ok() || last) {
                               if (!status.ok() && first_error.ok()) first_error = status;
                               updates_[id] = std::move(answer.update);
                               aggregates_[id] = std::move(answer.aggregate);
                               if (status.ok()) answered.push_back(id);
                               --outstanding;
                               progress.notify_one();
                               return;
                             }
                             next_rounds.push_back({id, round + 1, std::move(answer.aggregate)});
                             progress.notify_one();
                           });
  };
  // On the training thread: the next round of every chunk whose last round was answered.
  auto continue_rounds = [&] {
    std::vector<NextRound> ready;
    absl::Status failed;
    {
      std::lock_guard<std::mutex> lock(mu);
      ready.swap(next_rounds);
      failed = first_error;
    }
    for (NextRound& next : ready) {
      bytes_pulled_ += next.answer.size();
      step_shard_pulled_[layout_.chunks[next.id].chunk.shard] += next.answer.size();
      std::string payload;
      if (failed.ok() && encode_error.ok()) {
        ChunkCodecs& codecs = codecs_[next.id];
        const Clock::time_point encode_start = Clock::now();
        encode_error = codecs.push_memory->NextRound(*codecs.push, static_cast<int>(next.round),
                                                     next.answer,
                                                     PushKey(config_, step, next.id, rank_), &payload);
        timeline_.AddEncode(Clock::now() - encode_start);
        if (!encode_error.ok()) {
          encode_error = absl::Status(
              encode_error.code(),
              absl::StrCat("round ", next.round, " of chunk ", next.id, " step ", step,
                           " (answer from shard ", layout_.chunks[next.id].chunk.shard,
                           "): ", encode_error.message()));
        }
      }
      if (!failed.ok() || !encode_error.ok()) {  // The step fails: stop this chunk here.
        std::lock_guard<std::mutex> lock(mu);
        if (--outstanding == 0) progress.notify_one();
        continue;
      }
      push_round(next.id, next.round, std::move(payload));
    }
  };
  // Server failure (config.checkpoint): a push its shard did not answer (IsServerGone():
  // gone, or restarted since this worker's handshake) is kept, with its payload, until every other
  // answer of the step is in; then the shard is reconnected and resynced and the push sent
  // again (see the wait below), with every push of the step that shard had answered before
  // it restarted. A restarted shard may be past this step for a chunk (OUT_OF_RANGE): the
  // weights pulled at the resync stand for that chunk's update.
  const bool ride_out_restarts =
      config_.has_checkpoint() && config_.checkpoint().reconnect_timeout_ms() != 0;
  struct LostPush {
    uint32_t id;
    std::string payload;
    absl::Status status;
  };
  std::vector<LostPush> lost;  // Guarded by mu.
  // Chunks whose push of this step was answered; their payloads are in pushed_. Filled only
  // while restarts are ridden out. Guarded by mu.
  std::vector<uint32_t> answered_pushes;
  // Pushes single-round chunk `id`, already counted in `outstanding`.
  auto push_single = [&](uint32_t id, std::string payload) {
    bytes_pushed_ += payload.size();
    step_shard_pushed_[layout_.chunks[id].chunk.shard] += payload.size();
    const Clock::time_point sent = Clock::now();
    client_->PushPullRound(
        step, 0, id, std::move(payload),
        [&, id, sent](absl::Status status, PsClient::RoundAnswer answer) {
          std::lock_guard<std::mutex> lock(mu);
          timeline_.AddRpc(sent, Clock::now());
          if (ride_out_restarts && IsServerGone(status)) {
            lost.push_back({id, std::move(answer.pushed), std::move(status)});
          } else if (!(ride_out_restarts && absl::IsOutOfRange(status))) {
            if (!status.ok() && first_error.ok()) first_error = status;
            updates_[id] = std::move(answer.update);
            if (status.ok()) answered.push_back(id);
            if (status.ok() && ride_out_restarts) {
              pushed_[id] = std::move(answer.pushed);
              answered_pushes.push_back(id);
            }
          }
          --outstanding;
          progress.notify_one();
        });
  };
  // Reconnects each shard of `pushes` (waiting for a restarted server), replaces its chunks
  // of the replica by its exact weights, then pushes them again. A restarted shard also gets
  // the step's pushes it had answered before: it lost them with its state, and a worker that
  // did not get those answers waits there for them. Without them two workers can each wait
  // on a push the other has already completed. The resync replaced what those answers had
  // applied; the new answers apply again.
  auto resend = [&](std::vector<LostPush>& pushes) -> absl::Status {
    std::vector<bool> resynced(layout_.shard_bytes.size(), false);
    std::vector<bool> restarted(layout_.shard_bytes.size(), false);
    for (const LostPush& push : pushes) {
      const uint32_t shard = layout_.chunks[push.id].chunk.shard;
      if (resynced[shard]) continue;
      TAMP_ASSIGN_OR_RETURN(const bool new_process,
                            client_->Reconnect(shard, push.status.message()));
      TAMP_ASSIGN_OR_RETURN(const uint64_t shard_step,
                            client_->PullShardWeights(shard, model_->params()));
      LOG(WARNING) << "worker " << rank_ << ": resynced with shard " << shard << " (its step "
                   << shard_step << "); pushing its chunks of step " << step << " again";
      resynced[shard] = true;
      restarted[shard] = new_process;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      std::vector<uint32_t> still_answered;
      for (uint32_t id : answered_pushes) {
        if (restarted[layout_.chunks[id].chunk.shard]) {
          pushes.push_back({id, std::move(pushed_[id]), absl::OkStatus()});
        } else {
          still_answered.push_back(id);
        }
      }
      answered_pushes.swap(still_answered);
    }
    for (LostPush& push : pushes) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++outstanding;
      }
      push_single(push.id, std::move(push.payload));
    }
    return absl::OkStatus();
  };
  auto push_tensor = [&](int tensor) {
    continue_rounds();
    // Local gradient clipping, once per tensor: its chunks are one contiguous slice of grads.
    absl::Span<const float> tensor_grads;  // Clipped, when clipping scaled it; else empty.
    if (clip_threshold_ > 0 && !tensor_chunks_[tensor].empty()) {
      const uint64_t begin = layout_.tensor_offsets[tensor];
      const absl::Span<const float> all =
          grads.subspan(begin, static_cast<size_t>(layout_.tensors[tensor].elements()));
      if (const float scale = ClipScale(all, clip_threshold_); scale != 1.0f) {
        clipped_.resize(all.size());
        for (size_t i = 0; i < all.size(); ++i) clipped_[i] = scale * all[i];
        tensor_grads = clipped_;
      }
    }
    for (uint32_t id : tensor_chunks_[tensor]) {
      if (!encode_error.ok()) return;
      const ChunkPlan& plan = layout_.chunks[id];
      std::string payload;
      ChunkCodecs& codecs = codecs_[id];
      const bool multi_round = codecs.push->rounds() > 1;
      const absl::Span<const float> gradient =
          tensor_grads.empty() ? grads.subspan(layout_.flat_offset(plan), plan.chunk.length)
                               : tensor_grads.subspan(plan.chunk.offset, plan.chunk.length);
      // Sparsity warm-up: this epoch's k, as the shard decodes it.
      compress::Codec& push_codec =
          codecs.push_warmup ? codecs.push_warmup->CodecFor(epoch, *codecs.push) : *codecs.push;
      const Clock::time_point encode_start = Clock::now();
      encode_error =
          multi_round
              ? codecs.push_memory->BeginRounds(*codecs.push, gradient,
                                                PushKey(config_, step, id, rank_), &payload)
              : codecs.push_memory->Compress(push_codec, gradient,
                                             PushKey(config_, step, id, rank_), &payload);
      timeline_.AddEncode(Clock::now() - encode_start);
      if (!encode_error.ok()) return;
      raw_bytes_pushed_ += plan.chunk.length * sizeof(float);
      step_raw_pushed_ += plan.chunk.length * sizeof(float);
      {
        std::lock_guard<std::mutex> lock(mu);
        ++outstanding;
      }
      if (multi_round) {
        push_round(id, 0, std::move(payload));
        continue;
      }
      push_single(id, std::move(payload));
    }
  };
  // Compute is TrainStep minus its callbacks (which encode and push).
  auto on_tensor_ready = [&](int tensor) {
    timeline_.ComputeEnd(Clock::now());
    push_tensor(tensor);
    timeline_.ComputeBegin(Clock::now());
  };
  timeline_.ComputeBegin(Clock::now());
  *loss = model_->TrainStep(batch_x_.data(), batch_labels_.data(), batcher_->batch_size(),
                            on_tensor_ready);
  timeline_.ComputeEnd(Clock::now());
  // Backward no longer reads the replica's weights: apply each chunk's update as soon as
  // its shard answers, while the other answers are still on the wire.
  const absl::Span<float> params = model_->params();
  auto apply_chunk = [&](uint32_t id) -> absl::Status {
    const ChunkPlan& plan = layout_.chunks[id];
    bytes_pulled_ += updates_[id].size();
    step_shard_pulled_[plan.chunk.shard] += updates_[id].size();
    ChunkCodecs& codecs = codecs_[id];
    const Clock::time_point decode_start = Clock::now();
    if (codecs.push->rounds() > 1) {
      // The push codec's final answer readies it for the next step, and the residual.
      bytes_pulled_ += aggregates_[id].size();
      step_shard_pulled_[plan.chunk.shard] += aggregates_[id].size();
      absl::Status finished = codecs.push_memory->FinishRounds(*codecs.push, aggregates_[id],
                                                                PushKey(config_, step, id, rank_));
      if (!finished.ok()) {
        return absl::Status(finished.code(), absl::StrCat("aggregate of chunk ", id, " step ", step,
                                                          " from shard ", plan.chunk.shard, ": ",
                                                          finished.message()));
      }
    }
    // Decode, then add (what DecodeAdd does), timed apart: decode_ms, apply_ms. A pull
    // codec that names its entries (topk, dgc, threshold) is decoded as those entries and
    // added in O(k); any other is decoded whole and added in one pass.
    const RandomKey key = PullKey(config_, step, id);
    absl::StatusOr<bool> sparse = codecs.pull->DecodeSparse(updates_[id], key, &pulled_entries_);
    absl::Span<float> update;
    absl::Status decoded = sparse.status();
    if (sparse.ok() && !*sparse) {
      if (decoded_.size() < plan.chunk.length) decoded_.resize(plan.chunk.length);
      update = absl::MakeSpan(decoded_.data(), plan.chunk.length);
      decoded = codecs.pull->Decode(updates_[id], key, update);
    }
    const Clock::time_point apply_start = Clock::now();
    decode_ms_ += std::chrono::duration<double, std::milli>(apply_start - decode_start).count();
    if (!decoded.ok()) {
      return absl::Status(decoded.code(), absl::StrCat("update of chunk ", id, " step ", step,
                                                       " from shard ", plan.chunk.shard, ": ",
                                                       decoded.message()));
    }
    float* weights = params.data() + layout_.flat_offset(plan);
    if (*sparse) {
      compress::AddSparseEntries(pulled_entries_, absl::MakeSpan(weights, plan.chunk.length));
    } else {
      for (size_t i = 0; i < update.size(); ++i) weights[i] += update[i];
    }
    apply_ms_ += MillisecondsSince(apply_start);
    return absl::OkStatus();
  };
  // Every callback must have run before this frame ends (they use its locals), so after a
  // failure keep waiting, but stop applying.
  absl::Status apply_error;
  std::vector<uint32_t> to_apply;
  std::vector<LostPush> to_resend;
  std::unique_lock<std::mutex> lock(mu);
  while (true) {
    progress.wait(lock, [&] {
      return outstanding == 0 || !next_rounds.empty() || !answered.empty();
    });
    to_apply.swap(answered);
    const bool rounds_queued = !next_rounds.empty();
    const bool settled = outstanding == 0 && to_apply.empty() && !rounds_queued;
    // Lost pushes go again only once nothing else is in flight: the resync overwrites
    // the replica, and no answer of another chunk may land on it meanwhile.
    if (settled && first_error.ok()) to_resend.swap(lost);
    lock.unlock();
    if (settled && to_resend.empty()) break;
    for (uint32_t id : to_apply) {
      if (apply_error.ok()) apply_error = apply_chunk(id);
    }
    to_apply.clear();
    if (rounds_queued) continue_rounds();
    if (!to_resend.empty()) {
      const absl::Status resent = resend(to_resend);
      to_resend.clear();
      if (!resent.ok()) {
        lock.lock();
        if (first_error.ok()) first_error = resent;
        continue;
      }
    }
    lock.lock();
  }
  TAMP_RETURN_IF_ERROR(encode_error);
  TAMP_RETURN_IF_ERROR(first_error);
  return apply_error;
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

absl::StatusOr<uint64_t> Trainer::Rejoin(absl::string_view cause) {
  LOG(WARNING) << "worker " << rank_ << ": " << cause << "; rejoining";
  // What the residuals held belonged to the replica this worker had; it now takes the
  // others' replica, as if it had been resynced.
  for (ChunkCodecs& codecs : codecs_) codecs.push_memory->Reset();
  TAMP_ASSIGN_OR_RETURN(const uint64_t step, client_->Rejoin(model_->params()));
  LOG(WARNING) << "worker " << rank_ << " rejoined at step " << step;
  return step;
}

absl::Status Trainer::Run() {
  const bool sync = config_.consistency().mode() == config::Consistency::SYNC;
  uint64_t step = 0;
  if (sync && client_->latest_step_at_connect() != 0) {
    if (client_->latest_step_at_connect() >= total_steps_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the run is over: the servers have completed step ", client_->latest_step_at_connect(),
          " of ", total_steps_));
    }
    TAMP_ASSIGN_OR_RETURN(step, Rejoin(absl::StrCat("the run is at step ",
                                                    client_->latest_step_at_connect())));
  } else {
    TAMP_ASSIGN_OR_RETURN(step, client_->PullWeights(model_->params()));
  }
  if (!sync && step != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the servers are at step ", step, "; a worker can only join a job at step 0"));
  }
  const config::Training& training = config_.training();
  const int64_t per_epoch = batcher_->steps_per_epoch();
  const uint64_t total_steps = total_steps_;  // As sent in the handshake.

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
    const absl::Status stepped = Step(step, epoch, static_cast<int64_t>(step % per_epoch), &loss);
    if (sync && absl::IsAborted(stepped)) {  // Dropped from the barriers.
      TAMP_ASSIGN_OR_RETURN(const uint64_t next, Rejoin(stepped.message()));
      step = next - 1;  // The loop's ++step makes it `next` (>= 1).
      continue;
    }
    TAMP_RETURN_IF_ERROR(stepped);
    step_ms.push_back(MillisecondsSince(start));

    events::WorkerEvent event;
    event.set_kind(events::WorkerEvent::STEP);
    event.set_step(step + 1);
    event.set_total_steps(total_steps);
    event.set_epoch(epoch);
    event.set_loss(loss);
    event.set_step_ms(step_ms.back());
    for (uint64_t bytes : step_shard_pushed_) event.add_step_shard_bytes_pushed(bytes);
    for (uint64_t bytes : step_shard_pulled_) event.add_step_shard_bytes_pulled(bytes);
    uint64_t step_pushed = 0;
    for (uint64_t bytes : step_shard_pushed_) step_pushed += bytes;
    event.set_step_raw_bytes_pushed(step_raw_pushed_);
    event.set_step_compression_ratio(
        step_pushed == 0 ? 0.0 : static_cast<double>(step_raw_pushed_) / step_pushed);
    const StepTimeline::Figures figures = timeline_.Summarize();
    event.set_compute_ms(figures.compute_ms);
    event.set_encode_ms(figures.encode_ms);
    event.set_wire_ms(figures.wire_ms);
    event.set_decode_ms(decode_ms_);
    event.set_apply_ms(apply_ms_);
    event.set_comm_ms(figures.comm_ms);
    event.set_comm_hidden_percent(figures.hidden_percent);
    Emit(event);

    const bool last_step = step + 1 == total_steps;
    const bool epoch_done = (step + 1) % per_epoch == 0 || last_step;
    const bool step_eval_due =
        training.eval_every_steps() != 0 && (step + 1) % training.eval_every_steps() == 0;
    const bool eval_due =
        (epoch_done && training.eval_every_epoch()) || step_eval_due || last_step;
    if (rank_ == 0 && eval_due) {
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
