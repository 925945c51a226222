#include "worker/client.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/registry.h"
#include "glog/logging.h"
#include "protocol/keys.h"
#include "worker/grad_clip.h"

namespace tamp {
namespace {

using Clock = StepTimeline::Clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace

std::vector<absl::Span<float>> SplitIntoTensors(const JobLayout& layout, absl::Span<float> flat) {
  CHECK_GE(flat.size(), layout.total_elements)
      << "SplitIntoTensors: the buffer holds " << flat.size() << " floats; the layout's "
      << layout.tensors.size() << " tensors hold " << layout.total_elements;
  std::vector<absl::Span<float>> tensors;
  tensors.reserve(layout.tensors.size());
  for (size_t t = 0; t < layout.tensors.size(); ++t) {
    tensors.push_back(flat.subspan(layout.tensor_offsets[t],
                                   static_cast<size_t>(layout.tensors[t].elements())));
  }
  return tensors;
}

Client::Client(config::RunConfig config, JobLayout layout, uint32_t rank, RunLength length,
               DeviceBackendFactory device_backends)
    : config_(std::move(config)),
      layout_(std::move(layout)),
      rank_(rank),
      length_(length),
      ride_out_restarts_(config_.has_checkpoint() &&
                         config_.checkpoint().reconnect_timeout_ms() != 0),
      device_backends_(std::move(device_backends)) {}

Client::~Client() {
  // PsClient's destructor waits for the callbacks, which touch the state below.
  fusion_.reset();
  ps_client_.reset();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(config::RunConfig config,
                                                        JobLayout layout, uint32_t rank,
                                                        std::vector<std::string> servers,
                                                        RunLength length,
                                                        DeviceBackendFactory device_backends) {
  if (rank >= config.cluster().num_workers()) {
    return absl::InvalidArgumentError(absl::StrCat("worker rank ", rank,
                                                   " is out of range: cluster.num_workers is ",
                                                   config.cluster().num_workers()));
  }
  if (length.steps_per_epoch == 0 || length.total_steps == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the run's length must be at least one step: steps_per_epoch ", length.steps_per_epoch,
        ", total_steps ", length.total_steps));
  }
  std::unique_ptr<Client> client(new Client(std::move(config), std::move(layout), rank, length,
                                            std::move(device_backends)));
  TAMP_RETURN_IF_ERROR(client->BuildCodecs());
  TAMP_ASSIGN_OR_RETURN(client->ps_client_,
                        PsClient::Connect(client->config_, client->layout_, rank, servers,
                                          length.steps_per_epoch, length.total_steps));
  client->fusion_ = std::make_unique<PushFusion>(client->ps_client_.get(),
                                                 client->config_.cluster().fusion_bytes(),
                                                 client->layout_.shard_bytes.size());
  return client;
}

absl::Status Client::BuildCodecs() {
  const size_t chunks = layout_.chunks.size();
  tensor_chunks_.resize(layout_.tensors.size());
  pushed_tensors_.assign(layout_.tensors.size(), false);
  for (size_t t = 0; t < layout_.tensors.size(); ++t) {
    tensor_index_.emplace(layout_.tensors[t].name, static_cast<int>(t));
  }
  for (const ChunkPlan& plan : layout_.chunks) {
    ChunkCodecs codecs;
    // Codecs that view a chunk as a matrix see its rows in the tensor, as the shard's do.
    const compress::ChunkShape shape = compress::ChunkShapeInTensor(
        layout_.tensor_of(plan).shape, plan.chunk.offset, plan.chunk.length);
    absl::StatusOr<std::unique_ptr<compress::Codec>> push =
        compress::CreateCodec(plan.compression.push(), shape);
    if (!push.ok()) {
      return absl::Status(push.status().code(),
                          absl::StrCat("chunk ", plan.chunk.id, " (", layout_.tensor_of(plan).name,
                                       "): ", push.status().message()));
    }
    codecs.push = *std::move(push);
    TAMP_ASSIGN_OR_RETURN(codecs.push_warmup,
                          compress::RatioWarmup::Create(plan.compression.push(), shape));
    TAMP_ASSIGN_OR_RETURN(codecs.push_memory,
                          compress::ErrorFeedback::Create(plan.compression.push_feedback(),
                                                          plan.chunk.length));
    TAMP_ASSIGN_OR_RETURN(codecs.pull, compress::CreateCodec(plan.compression.pull(), shape));
    codecs_.push_back(std::move(codecs));
    tensor_chunks_[plan.chunk.tensor].push_back(plan.chunk.id);
  }
  if (config_.compression().has_clip_norm()) {
    clip_threshold_ =
        LocalClipThreshold(config_.compression().clip_norm(), config_.cluster().num_workers());
  }
  updates_.resize(chunks);
  pushed_.resize(chunks);
  aggregates_.resize(chunks);
  in_flight_by_shard_.assign(layout_.shard_bytes.size(), 0);
  return absl::OkStatus();
}

absl::Status Client::CheckTensors(absl::string_view call, TensorSpans tensors) const {
  if (tensors.size() != layout_.tensors.size()) {
    return absl::InvalidArgumentError(absl::StrCat(call, ": got ", tensors.size(),
                                                   " tensors; the layout has ",
                                                   layout_.tensors.size()));
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    const TensorSpec& spec = layout_.tensors[t];
    if (tensors[t].size() != static_cast<size_t>(spec.elements())) {
      return absl::InvalidArgumentError(absl::StrCat(call, ": tensor \"", spec.name, "\" has ",
                                                     spec.elements(), " elements, got ",
                                                     tensors[t].size()));
    }
  }
  return absl::OkStatus();
}

absl::Status Client::UseMemory(absl::string_view call, int tensor, const TensorMemory& memory) {
  const std::string& name = layout_.tensors[tensor].name;
  if (memory_.has_value()) {
    if (memory_->SameDevice(memory)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        call, ": tensor \"", name, "\" is on ", memory.Name(), " but the client's tensors are on ",
        memory_->Name(), " (where the first call's were)"));
  }
  if (memory.kind == TensorMemory::Kind::kCuda) {
    std::vector<DeviceChunkPlan> plan = PlanDeviceChunks(config_, layout_);
    absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
        device_backends_(layout_, plan, memory.device);
    if (!backend.ok()) {
      return absl::Status(backend.status().code(),
                          absl::StrCat(call, ": tensor \"", name, "\" is on ", memory.Name(),
                                       " but ", backend.status().message()));
    }
    device_ = *std::move(backend);
    device_plan_ = std::move(plan);
    // Which chunks pay a copy through the host each way, and why (device_backend.h).
    absl::flat_hash_map<std::string, int> on_host;
    for (const DeviceChunkPlan& chunk : device_plan_) {
      if (!chunk.push_on_device()) ++on_host[chunk.push_on_host_because];
      if (!chunk.pull_on_device()) ++on_host[chunk.pull_on_host_because];
    }
    for (const auto& [because, chunks] : on_host) {
      LOG(INFO) << "worker " << rank_ << " on " << memory.Name() << ": " << chunks
                << " chunk(s) go through host memory: " << because;
    }
  }
  memory_ = memory;
  return absl::OkStatus();
}

absl::Status Client::ReadTensor(const float* from, float* to, size_t count,
                                const TensorMemory& memory) {
  if (memory.kind == TensorMemory::Kind::kHost) {
    std::copy(from, from + count, to);
    return absl::OkStatus();
  }
  return device_->CopyToHost(from, to, count, memory.stream);
}

absl::Status Client::WriteTensor(const float* from, float* to, size_t count,
                                 const TensorMemory& memory) {
  if (memory.kind == TensorMemory::Kind::kHost) {
    std::copy(from, from + count, to);
    return absl::OkStatus();
  }
  return device_->CopyToDevice(from, to, count, memory.stream);
}

absl::Status Client::BeginStep(uint64_t step, TensorSpans params, const TensorMemory& memory) {
  if (in_step_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "BeginStep(", step, "): step ", step_, " is still under way; call Wait() first"));
  }
  if (step >= length_.total_steps) {
    return absl::OutOfRangeError(absl::StrCat("BeginStep(", step, "): the run has ",
                                              length_.total_steps, " steps, 0 to ",
                                              length_.total_steps - 1));
  }
  if (!next_step_.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("BeginStep(", step, "): ",
                     failed_step_.ok() ? "the client has not started: call Start() (or Resume()) "
                                         "first"
                                       : AfterFailedStep()));
  }
  if (step != *next_step_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "BeginStep(", step, "): the next step is ", *next_step_,
        " (the step Start() or Rejoin() returned, or the one after the last step Wait() "
        "completed)"));
  }
  TAMP_RETURN_IF_ERROR(CheckTensors("BeginStep()", params));
  TAMP_RETURN_IF_ERROR(UseMemory("BeginStep()", 0, memory));
  const uint32_t resync_steps = config_.training().resync_steps();
  const bool resync = resync_steps != 0 && step != 0 && step % resync_steps == 0;
  if (resync) {
    TAMP_RETURN_IF_ERROR(ps_client_->PullWeights(Pulled()).status());
    TAMP_RETURN_IF_ERROR(CopyPulled(-1, params, memory));
  }
  if (!totals_.start_step.has_value()) totals_.start_step = step;
  // The exact weights pulled by Start(), Rejoin(), a resend or the resync above are applied:
  // the steps do without the scratch, a whole model's size, until the next pull.
  std::vector<float>().swap(pulled_);
  in_step_ = true;
  step_ = step;
  epoch_ = static_cast<uint32_t>(step / length_.steps_per_epoch);
  pushed_tensors_.assign(layout_.tensors.size(), false);
  tensors_pushed_ = 0;
  encode_error_ = absl::OkStatus();
  timeline_.Reset();
  report_.shard_bytes_pushed.assign(layout_.shard_bytes.size(), 0);
  report_.shard_bytes_pulled.assign(layout_.shard_bytes.size(), 0);
  if (resync) {  // The step's traffic: each shard's exact weights, fp32.
    report_.shard_bytes_pulled = layout_.shard_bytes;
    for (uint64_t bytes : layout_.shard_bytes) totals_.bytes_pulled += bytes;
  }
  report_.raw_bytes_pushed = 0;
  report_.decode_ms = 0;
  report_.apply_ms = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first_error_ = absl::OkStatus();
  }
  timeline_.ComputeBegin(Clock::now());
  return absl::OkStatus();
}

void Client::PushRound(uint32_t id, uint32_t round, std::string payload) {
  totals_.bytes_pushed += payload.size();
  report_.shard_bytes_pushed[layout_.chunks[id].chunk.shard] += payload.size();
  const bool last = static_cast<int>(round) + 1 == codecs_[id].push->rounds();
  const uint32_t shard = layout_.chunks[id].chunk.shard;
  const Clock::time_point sent = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_by_shard_[shard];
  }
  fusion_->Push(
      shard, step_, round, id, layout_.chunks[id].chunk.length * sizeof(float), std::move(payload),
      [this, id, round, last, shard, sent](absl::Status status, PsClient::RoundAnswer answer) {
        std::lock_guard<std::mutex> lock(mu_);
        timeline_.AddRpc(sent, Clock::now());
        --in_flight_by_shard_[shard];
        // Server gone: the step is pushed again from round 0 (Resend). A restarted shard
        // already past the step: skipped, as for single-round chunks.
        if (ride_out_restarts_ && (IsServerGone(status) || absl::IsOutOfRange(status))) {
          if (IsServerGone(status)) lost_.push_back({id, {}, std::move(status), true});
          --outstanding_;
          progress_.notify_one();
          return;
        }
        if (!status.ok() || last) {
          if (!status.ok() && first_error_.ok()) first_error_ = status;
          updates_[id] = std::move(answer.update);
          aggregates_[id] = std::move(answer.aggregate);
          if (status.ok()) answered_.push_back(id);
          if (status.ok() && ride_out_restarts_) answered_pushes_.push_back(id);
          --outstanding_;
          progress_.notify_one();
          return;
        }
        next_rounds_.push_back({id, round + 1, std::move(answer.aggregate)});
        progress_.notify_one();
      });
}

void Client::PushSingle(uint32_t id, std::string payload) {
  totals_.bytes_pushed += payload.size();
  report_.shard_bytes_pushed[layout_.chunks[id].chunk.shard] += payload.size();
  const uint32_t shard = layout_.chunks[id].chunk.shard;
  const Clock::time_point sent = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_by_shard_[shard];
  }
  fusion_->Push(
      shard, step_, 0, id, layout_.chunks[id].chunk.length * sizeof(float), std::move(payload),
      [this, id, shard, sent](absl::Status status, PsClient::RoundAnswer answer) {
        std::lock_guard<std::mutex> lock(mu_);
        timeline_.AddRpc(sent, Clock::now());
        --in_flight_by_shard_[shard];
        if (ride_out_restarts_ && IsServerGone(status)) {
          lost_.push_back({id, std::move(answer.pushed), std::move(status)});
        } else if (!(ride_out_restarts_ && absl::IsOutOfRange(status))) {
          if (!status.ok() && first_error_.ok()) first_error_ = status;
          updates_[id] = std::move(answer.update);
          if (status.ok()) answered_.push_back(id);
          if (status.ok() && ride_out_restarts_) {
            pushed_[id] = std::move(answer.pushed);
            answered_pushes_.push_back(id);
          }
        }
        --outstanding_;
        progress_.notify_one();
      });
}

void Client::ContinueRounds(const TensorMemory& memory) {
  std::vector<NextRound> ready;
  absl::Status failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready.swap(next_rounds_);
    failed = first_error_;
  }
  for (NextRound& next : ready) {
    totals_.bytes_pulled += next.answer.size();
    report_.shard_bytes_pulled[layout_.chunks[next.id].chunk.shard] += next.answer.size();
    std::string payload;
    if (failed.ok() && encode_error_.ok()) {
      ChunkCodecs& codecs = codecs_[next.id];
      const Clock::time_point encode_start = Clock::now();
      const RandomKey key = PushKey(config_, step_, next.id, rank_);
      const int round = static_cast<int>(next.round);
      encode_error_ =
          PushesOnDevice(next.id, memory)
              ? device_->PushRound(next.id, round, next.answer, key, &payload, memory.stream)
              : codecs.push_memory->NextRound(*codecs.push, round, next.answer, key, &payload);
      timeline_.AddEncode(Clock::now() - encode_start);
      if (!encode_error_.ok()) {
        encode_error_ = absl::Status(
            encode_error_.code(),
            absl::StrCat("round ", next.round, " of chunk ", next.id, " step ", step_,
                         " (answer from shard ", layout_.chunks[next.id].chunk.shard,
                         "): ", encode_error_.message()));
      }
    }
    if (!failed.ok() || !encode_error_.ok()) {  // The step fails: stop this chunk here.
      std::lock_guard<std::mutex> lock(mu_);
      if (--outstanding_ == 0) progress_.notify_one();
      continue;
    }
    PushRound(next.id, next.round, std::move(payload));
  }
}

std::string Client::OutsideStepHint() const {
  if (!failed_step_.ok()) return AfterFailedStep();
  if (!next_step_.has_value()) return "the client has not started: call Start() (or Resume()) first";
  if (*next_step_ >= length_.total_steps) {
    return absl::StrCat("the run is over: its ", length_.total_steps, " steps are done");
  }
  return absl::StrCat("call BeginStep(", *next_step_, ") first");
}

absl::Status Client::Push(absl::string_view name, absl::Span<const float> gradient,
                          const TensorMemory& memory) {
  const auto found = tensor_index_.find(name);
  if (found == tensor_index_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Push(): tensor \"", name, "\" is not registered in the job's layout"));
  }
  return Push(found->second, gradient, memory);
}

absl::Status Client::Push(int tensor, absl::Span<const float> gradient,
                          const TensorMemory& memory) {
  if (tensor < 0 || static_cast<size_t>(tensor) >= layout_.tensors.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Push(): tensor index ", tensor,
                                                   " is out of range: the layout has ",
                                                   layout_.tensors.size(), " tensors"));
  }
  const TensorSpec& spec = layout_.tensors[tensor];
  if (!in_step_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Push(): tensor \"", spec.name, "\" pushed outside a step; ", OutsideStepHint()));
  }
  if (gradient.size() != static_cast<size_t>(spec.elements())) {
    return absl::InvalidArgumentError(absl::StrCat("Push(): tensor \"", spec.name, "\" has ",
                                                   spec.elements(), " elements, got a gradient of ",
                                                   gradient.size()));
  }
  if (pushed_tensors_[tensor]) {
    return absl::FailedPreconditionError(
        absl::StrCat("Push(): tensor \"", spec.name, "\" was already pushed in step ", step_));
  }
  TAMP_RETURN_IF_ERROR(UseMemory("Push()", tensor, memory));
  const bool on_device = memory.kind == TensorMemory::Kind::kCuda;
  const Clock::time_point arrived = Clock::now();
  // The host's view of the gradient: the caller's, or a pinned copy of a device gradient
  // when a chunk of it takes the host path (clipping always does: it needs the whole norm).
  absl::Span<const float> host_grads = gradient;
  if (on_device) {
    host_grads = {};
    for (uint32_t id : tensor_chunks_[tensor]) {
      if (device_plan_[id].push_on_device()) continue;
      TAMP_ASSIGN_OR_RETURN(const absl::Span<float> staging, device_->Staging(gradient.size()));
      TAMP_RETURN_IF_ERROR(
          device_->CopyToHost(gradient.data(), staging.data(), gradient.size(), memory.stream));
      host_grads = staging;
      break;
    }
  }
  timeline_.ComputeEnd(arrived);
  timeline_.AddEncode(Clock::now() - arrived);  // The copy, when there was one.
  pushed_tensors_[tensor] = true;
  ++tensors_pushed_;
  ContinueRounds(memory);
  // Local gradient clipping, once per tensor.
  absl::Span<const float> tensor_grads = host_grads;
  if (clip_threshold_ > 0 && !tensor_chunks_[tensor].empty()) {
    if (const float scale = ClipScale(host_grads, clip_threshold_); scale != 1.0f) {
      clipped_.resize(host_grads.size());
      for (size_t i = 0; i < host_grads.size(); ++i) clipped_[i] = scale * host_grads[i];
      tensor_grads = clipped_;
    }
  }
  for (uint32_t id : tensor_chunks_[tensor]) {
    if (!encode_error_.ok()) break;
    const ChunkPlan& plan = layout_.chunks[id];
    std::string payload;
    ChunkCodecs& codecs = codecs_[id];
    const bool multi_round = codecs.push->rounds() > 1;
    const Clock::time_point encode_start = Clock::now();
    if (PushesOnDevice(id, memory)) {  // Round 0 of a multi-round codec too.
      encode_error_ = device_->EncodePush(id, gradient.data() + plan.chunk.offset,
                                          PushKey(config_, step_, id, rank_), &payload,
                                          memory.stream);
    } else {
      const absl::Span<const float> chunk_grads =
          tensor_grads.subspan(plan.chunk.offset, plan.chunk.length);
      // Sparsity warm-up: this epoch's k, as the shard decodes it.
      compress::Codec& push_codec =
          codecs.push_warmup ? codecs.push_warmup->CodecFor(epoch_, *codecs.push) : *codecs.push;
      encode_error_ = multi_round
                          ? codecs.push_memory->BeginRounds(*codecs.push, chunk_grads,
                                                            PushKey(config_, step_, id, rank_),
                                                            &payload)
                          : codecs.push_memory->Compress(push_codec, chunk_grads,
                                                         PushKey(config_, step_, id, rank_),
                                                         &payload);
    }
    timeline_.AddEncode(Clock::now() - encode_start);
    if (!encode_error_.ok()) break;
    totals_.raw_bytes_pushed += plan.chunk.length * sizeof(float);
    report_.raw_bytes_pushed += plan.chunk.length * sizeof(float);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++outstanding_;
    }
    if (multi_round) {
      PushRound(id, 0, std::move(payload));
    } else {
      PushSingle(id, std::move(payload));
    }
  }
  // The step's last push: the held small ones go now (tensor fusion).
  if (tensors_pushed_ == layout_.tensors.size()) fusion_->Flush();
  timeline_.ComputeBegin(Clock::now());
  return encode_error_;
}

absl::Status Client::ApplyChunk(uint32_t id, TensorSpans params, const TensorMemory& memory) {
  const ChunkPlan& plan = layout_.chunks[id];
  totals_.bytes_pulled += updates_[id].size();
  report_.shard_bytes_pulled[plan.chunk.shard] += updates_[id].size();
  ChunkCodecs& codecs = codecs_[id];
  const Clock::time_point decode_start = Clock::now();
  if (codecs.push->rounds() > 1) {
    // The push codec's final answer readies it for the next step, and the residual.
    totals_.bytes_pulled += aggregates_[id].size();
    report_.shard_bytes_pulled[plan.chunk.shard] += aggregates_[id].size();
    const RandomKey push_key = PushKey(config_, step_, id, rank_);
    absl::Status finished =
        PushesOnDevice(id, memory)
            ? device_->FinishPushRounds(id, aggregates_[id], push_key, memory.stream)
            : codecs.push_memory->FinishRounds(*codecs.push, aggregates_[id], push_key);
    if (!finished.ok()) {
      return absl::Status(finished.code(),
                          absl::StrCat("aggregate of chunk ", id, " step ", step_, " from shard ",
                                       plan.chunk.shard, ": ", finished.message()));
    }
  }
  const RandomKey key = PullKey(config_, step_, id);
  // The servers' weight update is added to the weights; their mean gradient (AGGREGATE)
  // replaces what `params` held.
  float* const target = params[plan.chunk.tensor].data() + plan.chunk.offset;
  const bool on_device = memory.kind == TensorMemory::Kind::kCuda;
  if (on_device && device_plan_[id].pull_on_device()) {
    // Decoded and added by one kernel: all of it counts as decode_ms.
    const absl::Status applied =
        device_->ApplyPull(id, updates_[id], key, target, aggregates(), memory.stream);
    report_.decode_ms += MillisecondsSince(decode_start);
    if (!applied.ok()) {
      return absl::Status(applied.code(),
                          absl::StrCat("update of chunk ", id, " step ", step_, " from shard ",
                                       plan.chunk.shard, ": ", applied.message()));
    }
    return absl::OkStatus();
  }
  // Decode, then add (what DecodeAdd does), timed apart: decode_ms, apply_ms. A pull codec
  // that names its entries (topk, dgc, threshold) is decoded as those entries and added in
  // O(k); any other is decoded whole and added in one pass.
  absl::StatusOr<bool> sparse = codecs.pull->DecodeSparse(updates_[id], key, &pulled_entries_);
  absl::Span<float> update;
  absl::Status decoded = sparse.status();
  if (sparse.ok() && !*sparse) {
    if (decoded_.size() < plan.chunk.length) decoded_.resize(plan.chunk.length);
    update = absl::MakeSpan(decoded_.data(), plan.chunk.length);
    decoded = codecs.pull->Decode(updates_[id], key, update);
  }
  const Clock::time_point apply_start = Clock::now();
  report_.decode_ms +=
      std::chrono::duration<double, std::milli>(apply_start - decode_start).count();
  if (!decoded.ok()) {
    return absl::Status(decoded.code(),
                        absl::StrCat("update of chunk ", id, " step ", step_, " from shard ",
                                     plan.chunk.shard, ": ", decoded.message()));
  }
  // A device chunk is updated in pinned host memory and copied back (only the way back when
  // the answer replaces it).
  float* host_target = target;
  if (on_device) {
    TAMP_ASSIGN_OR_RETURN(const absl::Span<float> staging, device_->Staging(plan.chunk.length));
    host_target = staging.data();
    if (!aggregates()) {
      TAMP_RETURN_IF_ERROR(ReadTensor(target, host_target, plan.chunk.length, memory));
    }
  }
  if (*sparse) {
    if (aggregates()) std::fill(host_target, host_target + plan.chunk.length, 0.0f);
    compress::AddSparseEntries(pulled_entries_, absl::MakeSpan(host_target, plan.chunk.length));
  } else if (aggregates()) {
    std::copy(update.begin(), update.end(), host_target);
  } else {
    for (size_t i = 0; i < update.size(); ++i) host_target[i] += update[i];
  }
  if (on_device) {
    TAMP_RETURN_IF_ERROR(WriteTensor(host_target, target, plan.chunk.length, memory));
  }
  report_.apply_ms += MillisecondsSince(apply_start);
  return absl::OkStatus();
}

absl::Status Client::Wait(TensorSpans params, const TensorMemory& memory) {
  if (!in_step_) {
    return absl::FailedPreconditionError("Wait(): no step under way; call BeginStep() first");
  }
  TAMP_RETURN_IF_ERROR(CheckTensors("Wait()", params));
  TAMP_RETURN_IF_ERROR(UseMemory("Wait()", 0, memory));
  // Every tensor must be pushed, or the other workers' step could never complete. A refusal
  // leaves the step as it is: the caller may push the rest and wait again.
  if (encode_error_.ok()) {
    for (size_t t = 0; t < pushed_tensors_.size(); ++t) {
      if (!pushed_tensors_[t]) {
        return absl::FailedPreconditionError(
            absl::StrCat("Wait(): tensor \"", layout_.tensors[t].name,
                         "\" was not pushed in step ", step_, "; push every tensor first"));
      }
    }
  }
  timeline_.ComputeEnd(Clock::now());
  fusion_->Flush();  // Pushes held when a failed encode ended the pushes early.
  in_step_ = false;
  next_step_.reset();  // Known again once the step completes.
  // Every callback must have run before the step ends (they write the step's state), so
  // after a failure keep waiting, but stop applying. A shard's lost pushes go again once
  // nothing else is in flight to that shard and its answers are applied: the resync
  // overwrites its chunks of the replica, and no answer of one of them may land on it
  // afterwards. They do not wait for the other shards' answers: those may wait on another
  // worker that waits on these pushes (the restarted shard follows it to this step only
  // once they arrive; server/shard.h "Checkpoints and restarts").
  absl::Status apply_error;
  std::vector<uint32_t> to_apply;
  std::vector<LostPush> to_resend;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    progress_.wait(lock, [&] {
      return outstanding_ == 0 || !next_rounds_.empty() || !answered_.empty() ||
             ResendableLocked();
    });
    to_apply.swap(answered_);
    const bool rounds_queued = !next_rounds_.empty();
    const bool settled = outstanding_ == 0 && to_apply.empty() && !rounds_queued;
    TakeResendableLocked(&to_resend);
    lock.unlock();
    if (settled && to_resend.empty()) break;
    for (uint32_t id : to_apply) {
      if (apply_error.ok()) apply_error = ApplyChunk(id, params, memory);
      // Spent: freed now, not when the next step's answer replaces it, so that a step's
      // answers land in the memory of the last step's (a whole model per worker otherwise).
      std::string().swap(updates_[id]);
      std::string().swap(aggregates_[id]);
    }
    to_apply.clear();
    if (rounds_queued) ContinueRounds(memory);
    if (!to_resend.empty()) {
      const absl::Status resent = Resend(to_resend, params, memory);
      to_resend.clear();
      if (!resent.ok()) {
        lock.lock();
        if (first_error_.ok()) first_error_ = resent;
        continue;
      }
    }
    lock.lock();
  }
  // Settled: no callback is pending; this step's lost pushes and kept payloads are done.
  lock.lock();
  const absl::Status rpc_error = first_error_;
  lost_.clear();
  answered_pushes_.clear();
  lock.unlock();
  report_.timeline = timeline_.Summarize();
  absl::Status failure = !encode_error_.ok() ? encode_error_
                         : !rpc_error.ok()   ? rpc_error
                                             : apply_error;
  if (!failure.ok()) {
    if (absl::IsAborted(failure) && aggregates()) {  // Dropped: Rejoin() would be refused.
      failure = absl::AbortedError(absl::StrCat(
          failure.message(), "; with server.mode AGGREGATE a dropped worker cannot rejoin (the "
          "servers hold no trained weights): the other workers go on without it. "
          "consistency.worker_timeout_ms sets how long a barrier waits (0: for ever)"));
    }
    failed_step_ = absl::Status(failure.code(),
                                absl::StrCat("step ", step_, " failed: ", failure.message()));
    return failure;
  }
  next_step_ = step_ + 1;
  last_completed_step_ = step_;
  return absl::OkStatus();
}

std::string Client::AfterFailedStep() const {
  return absl::StrCat(failed_step_.message(), "; ",
                      aggregates() ? "with server.mode AGGREGATE the client is only good for "
                                     "closing"
                                   : "Rejoin() goes on from the other workers' replica (it "
                                     "forgets this worker's residuals), or close the client");
}

}  // namespace tamp
