#include "server/shard.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "server/async_chunk.h"
#include "server/shard_state.h"

namespace tamp {
namespace {

// Prefixes a chunk's name to an error about it: "chunk 3 (fc1.weight): ...".
absl::Status AboutChunk(const JobLayout& layout, uint32_t id, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("chunk ", id, " (", layout.tensor_of(layout.chunks[id]).name,
                                   "): ", status.message()));
}

// consistency.worker_timeout_ms, or its default when unset: half the workers' RPC deadline
// (proto/config.proto). 0 in ASYNC / SSP, which have no barrier to time out.
std::chrono::milliseconds WorkerTimeout(const config::RunConfig& config) {
  const config::Consistency& consistency = config.consistency();
  if (consistency.mode() != config::Consistency::SYNC) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(consistency.has_worker_timeout_ms()
                                       ? consistency.worker_timeout_ms()
                                       : config.cluster().rpc_timeout_ms() / 2);
}

}  // namespace

Shard::Shard(const config::RunConfig& config, const JobLayout& layout, uint32_t rank)
    : config_(config),
      layout_(layout),
      weights_generation_(config.model().kind() != config::Model::REGISTERED ? 1 : 0),
      generation_held_(config.cluster().num_workers(), 0),
      rank_(rank),
      chunk_ids_(layout.ChunksOfShard(rank)),
      worker_timeout_(WorkerTimeout(config)),
      membership_(config_, rank) {}

Shard::~Shard() = default;

absl::StatusOr<std::unique_ptr<ShardChunk>> Shard::NewChunk(uint32_t id) {
  TAMP_ASSIGN_OR_RETURN(std::unique_ptr<ChunkCore> core,
                        ChunkCore::Create(config_, layout_, id, membership_.steps_per_epoch()));
  if (config_.consistency().mode() == config::Consistency::SYNC) {
    auto chunk = std::make_unique<SyncChunk>(std::move(core), config_, &membership_);
    sync_chunks_.push_back(chunk.get());
    return chunk;
  }
  if (core->rounds != 1) {  // Config validation refuses these already.
    return absl::InvalidArgumentError(absl::StrCat(
        "push codec ", layout_.chunks[id].compression.push().name(),
        " takes several rounds; it works only with consistency.mode SYNC"));
  }
  return std::make_unique<AsyncChunk>(std::move(core), config_, &membership_);
}

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(const config::RunConfig& config,
                                                     const JobLayout& layout, uint32_t rank) {
  const uint32_t num_servers = config.cluster().num_servers();
  if (rank >= num_servers) {
    return absl::InvalidArgumentError(
        absl::StrCat("server rank ", rank, " out of range: the job has ", num_servers, " servers"));
  }
  auto shard = absl::WrapUnique(new Shard(config, layout, rank));
  shard->chunks_.resize(layout.chunks.size());
  for (uint32_t id : shard->chunk_ids_) {
    absl::StatusOr<std::unique_ptr<ShardChunk>> chunk = shard->NewChunk(id);
    if (!chunk.ok()) return AboutChunk(layout, id, chunk.status());
    if ((*chunk)->has_ratio_warmup()) shard->membership_.NeedRunLengthForWarmup();
    shard->chunks_[id] = std::move(chunk).value();
  }
  return shard;
}

absl::StatusOr<ShardChunk*> Shard::Find(uint32_t chunk_id) const {
  if (chunk_id >= chunks_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk ", chunk_id, " does not exist: the model has ", chunks_.size(), " chunks"));
  }
  if (chunks_[chunk_id] == nullptr) {
    return absl::NotFoundError(absl::StrCat("chunk ", chunk_id, " is on shard ",
                                            layout_.chunks[chunk_id].chunk.shard, ", not on shard ",
                                            rank_));
  }
  return chunks_[chunk_id].get();
}

absl::Status Shard::CheckWorker(uint32_t worker) const {
  const uint32_t num_workers = config_.cluster().num_workers();
  if (worker < num_workers) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("worker ", worker, " out of range: the job has ", num_workers, " workers"));
}

std::vector<ShardChunk*> Shard::OwnChunks() const {
  std::vector<ShardChunk*> own;
  for (uint32_t id : chunk_ids_) own.push_back(chunks_[id].get());
  return own;
}

void Shard::PushPullRound(uint32_t worker, uint64_t step, uint32_t round, uint32_t chunk_id,
                          absl::string_view payload, RoundDoneCallback done) {
  if (absl::Status status = CheckWorker(worker); !status.ok()) {
    done(std::move(status), nullptr);
    return;
  }
  absl::StatusOr<ShardChunk*> found = Find(chunk_id);
  if (!found.ok()) {
    done(found.status(), nullptr);
    return;
  }
  if (absl::Status ready = membership_.CheckScheduleReady(); !ready.ok()) {
    done(ready, nullptr);
    return;
  }
  if (weights_generation_.load(std::memory_order_acquire) == 0) {
    done(absl::FailedPreconditionError(absl::StrCat(
             "server ", rank_, " has no weights yet: worker 0 sets the initial weights "
             "(model.kind REGISTERED) before any push")),
         nullptr);
    return;
  }
  (*found)->Push(worker, step, round, payload, std::move(done));
}

void Shard::CompleteBarriers() {
  for (SyncChunk* chunk : sync_chunks_) chunk->CompleteIfDone();
}

void Shard::ExpireBarriers(std::chrono::steady_clock::time_point now) {
  if (worker_timeout_.count() == 0) return;
  bool dropped = false;
  for (SyncChunk* chunk : sync_chunks_) {
    dropped = chunk->ExpireWait(now, worker_timeout_, rank_) || dropped;
  }
  // Every chunk whose barrier waited only for the dropped workers completes now.
  if (dropped) CompleteBarriers();
}

absl::Status Shard::AdmitRejoin(uint32_t worker, uint64_t step) {
  TAMP_RETURN_IF_ERROR(CheckWorker(worker));
  if (config_.consistency().mode() != config::Consistency::SYNC) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker, " asked to rejoin at step ", step, ": rejoining is for consistency.mode "
        "SYNC; ASYNC and SSP workers resume with PullWeights"));
  }
  if (const uint64_t total = membership_.KnownTotalSteps(); total != 0 && step > total) {
    return absl::InvalidArgumentError(absl::StrCat("worker ", worker, " asked to rejoin at step ",
                                                   step, ", past the run's end at step ", total));
  }
  {
    // Every chunk held still, so none completes `step` between the check and the change.
    std::vector<std::unique_lock<std::mutex>> chunk_locks;
    for (const SyncChunk* chunk : sync_chunks_) chunk_locks.push_back(chunk->Hold());
    uint64_t latest = 0;
    bool resuming = false;
    for (const SyncChunk* chunk : sync_chunks_) {
      latest = std::max(latest, chunk->StepHeld());
      resuming = resuming || chunk->ResumingHeld();
      TAMP_RETURN_IF_ERROR(chunk->CheckRejoinHeld(worker, step, rank_));
    }
    // A step further ahead would let the steps in between complete without this worker.
    // Chunks restored from a checkpoint do not know the workers' step yet (FollowWorkers).
    if (!sync_chunks_.empty() && !resuming && step > latest + kRejoinLead) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker ", worker, " asked to rejoin at step ", step, " but server ", rank_,
          " is at step ", latest, ": a rejoining worker announces at most step ",
          latest + kRejoinLead));
    }
    membership_.Admit(worker, step);
  }
  LOG(INFO) << "server " << rank_ << ": worker " << worker << " rejoins at step " << step;
  return absl::OkStatus();
}

absl::Status Shard::Join(uint32_t worker, uint64_t steps_per_epoch, uint64_t total_steps,
                         uint64_t rejoin_at_step) {
  if (rejoin_at_step == 0) {
    return membership_.FixRunLength(steps_per_epoch, total_steps, nullptr);
  }
  TAMP_RETURN_IF_ERROR(membership_.FixRunLength(
      steps_per_epoch, total_steps, [&] { return AdmitRejoin(worker, rejoin_at_step); }));
  // Steps before `rejoin_at_step` no longer wait for it.
  CompleteBarriers();
  return absl::OkStatus();
}

uint64_t Shard::step() const {
  uint64_t min_step = std::numeric_limits<uint64_t>::max();
  for (uint32_t id : chunk_ids_) min_step = std::min(min_step, chunks_[id]->step());
  return chunk_ids_.empty() ? 0 : min_step;
}

bool Shard::HoldsPushOf(uint32_t worker) const {
  return std::any_of(sync_chunks_.begin(), sync_chunks_.end(),
                     [worker](const SyncChunk* chunk) { return chunk->HoldsPushOf(worker); });
}

uint64_t Shard::latest_step() const {
  uint64_t latest = 0;
  for (uint32_t id : chunk_ids_) latest = std::max(latest, chunks_[id]->step());
  return latest;
}

absl::Status Shard::InitWeights(uint32_t worker, const rpc::InitWeightsRequest& request,
                                rpc::InitWeightsResponse* response) {
  response->Clear();
  const uint32_t generation = request.generation();
  if (generation == 0 && config_.model().kind() != config::Model::REGISTERED) {
    return absl::FailedPreconditionError(absl::StrCat(
        "InitWeights: server ", rank_, " initialises model.kind ",
        config::Model::Kind_Name(config_.model().kind()), " itself from model.init_seed"));
  }
  if (worker != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("InitWeights: only worker 0 sets the initial weights, not worker ", worker));
  }
  std::lock_guard<std::mutex> init_lock(init_mu_);
  const uint32_t held = weights_generation_.load(std::memory_order_acquire);
  if (generation == 0 && held > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("InitWeights: server ", rank_, " has its initial weights already"));
  }
  if (generation > 0) {
    if (generation == held) {  // A retry of the broadcast that set them.
      return absl::AlreadyExistsError(absl::StrCat("InitWeights: server ", rank_,
                                                   " holds generation ", held, " already"));
    }
    if (generation != held + 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "InitWeights: generation ", generation, ", but server ", rank_, " holds generation ",
          held, held == 0 ? " (worker 0 has not set the initial weights)" : ""));
    }
    if (const uint64_t step = latest_step(); step != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "InitWeights: server ", rank_, " has completed step ", step - 1,
          "; the job's weights can be replaced only before its first step"));
    }
  }
  // Everything is checked before anything is written, so a refusal changes nothing.
  if (static_cast<size_t>(request.chunks_size()) != chunk_ids_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("InitWeights: server ", rank_, " owns ",
                                                   chunk_ids_.size(), " chunks, got ",
                                                   request.chunks_size()));
  }
  for (int i = 0; i < request.chunks_size(); ++i) {
    const rpc::ChunkWeights& weights = request.chunks(i);
    if (weights.chunk_id() != chunk_ids_[i]) {
      return absl::InvalidArgumentError(absl::StrCat("InitWeights: entry ", i, " is chunk ",
                                                     weights.chunk_id(), ", expected chunk ",
                                                     chunk_ids_[i], " (the shard's chunks in id "
                                                     "order)"));
    }
    const ChunkPlan& plan = layout_.chunks[weights.chunk_id()];
    if (weights.values().size() != plan.chunk.length * sizeof(float)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "InitWeights: chunk ", plan.chunk.id, " (", layout_.tensor_of(plan).name, ") needs ",
          plan.chunk.length * sizeof(float), " bytes, got ", weights.values().size()));
    }
  }
  if (generation > 1) {
    for (uint32_t w = 0; w < generation_held_.size(); ++w) {
      if (generation_held_[w] < held) response->add_unread_workers(w);
    }
    if (response->unread_workers_size() > 0) {
      response->set_awaiting_readers(true);
      return absl::OkStatus();
    }
  }
  for (const rpc::ChunkWeights& weights : request.chunks()) {
    chunks_[weights.chunk_id()]->SetWeights(weights.values());
  }
  const uint32_t set = std::max(generation, 1u);
  weights_generation_.store(set, std::memory_order_release);
  generation_held_[0] = std::max(generation_held_[0], set);
  return absl::OkStatus();
}

absl::Status Shard::PullWeights(uint32_t worker, rpc::PullWeightsResponse* response,
                                uint32_t min_generation) {
  return Pull(worker, PullKind::kExact, min_generation, response);
}

absl::Status Shard::PullReplica(uint32_t worker, rpc::PullWeightsResponse* response) {
  return Pull(worker, PullKind::kReplica, 0, response);
}

absl::Status Shard::Pull(uint32_t worker, PullKind kind, uint32_t min_generation,
                         rpc::PullWeightsResponse* response) {
  TAMP_RETURN_IF_ERROR(CheckWorker(worker));
  response->Clear();
  const uint32_t generation = weights_generation_.load(std::memory_order_acquire);
  if (generation < std::max(min_generation, 1u)) {
    response->set_awaiting_initial_weights(true);
    return absl::OkStatus();
  }
  uint64_t min_step = std::numeric_limits<uint64_t>::max();
  for (uint32_t id : chunk_ids_) {
    rpc::ChunkWeights* out = response->add_chunks();
    out->set_chunk_id(id);
    min_step = std::min(min_step, chunks_[id]->Pull(worker, kind, out->mutable_values()));
  }
  response->set_step(chunk_ids_.empty() ? 0 : min_step);
  if (kind == PullKind::kExact) {
    std::lock_guard<std::mutex> lock(init_mu_);
    generation_held_[worker] = std::max(generation_held_[worker], generation);
  }
  return absl::OkStatus();
}

void Shard::Close(const absl::Status& reason) {
  CHECK(!reason.ok()) << "Close() needs an error to answer pushes with";
  for (uint32_t id : chunk_ids_) chunks_[id]->Close(reason);
}

checkpoint::ShardState Shard::ExportState() const {
  checkpoint::ShardState state = ExportShardState(OwnChunks());
  state.set_steps_per_epoch(membership_.run_length().steps_per_epoch);
  return state;
}

absl::Status Shard::Restore(const checkpoint::ShardState& state) {
  TAMP_RETURN_IF_ERROR(RestoreShardState(state, rank_, OwnChunks()));
  membership_.RestoreStepsPerEpoch(state.steps_per_epoch());
  // The restored weights are the run's: model.kind REGISTERED waits for no InitWeights().
  if (weights_generation_.load(std::memory_order_acquire) == 0) {
    weights_generation_.store(1, std::memory_order_release);
  }
  return absl::OkStatus();
}

absl::StatusOr<ChunkSnapshot> Shard::Snapshot(uint32_t chunk_id) const {
  TAMP_ASSIGN_OR_RETURN(const ShardChunk* chunk, Find(chunk_id));
  return chunk->Snapshot();
}

}  // namespace tamp
