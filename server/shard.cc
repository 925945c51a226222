#include "server/shard.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "common/model_layout.h"
#include "common/status_macros.h"
#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "compress/registry.h"
#include "glog/logging.h"
#include "optim/optimizer.h"

// PullWeights sends weights as raw host floats; the wire format says little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Tamp needs a little-endian host");

namespace tamp {

struct Shard::ChunkState {
  // The answer to every push of one completed step; delivered after the lock is released.
  struct Completion {
    std::vector<DoneCallback> callbacks;
    absl::Status status;
    std::string update;
    uint64_t step = 0;
  };

  // Validates one push and adds it to the accumulator. On error nothing has changed.
  // Requires mu.
  absl::Status Add(const config::RunConfig& config, uint32_t worker, uint64_t push_step,
                   absl::string_view payload) {
    if (!closed.ok()) return closed;
    if (push_step != step) {
      return absl::FailedPreconditionError(
          absl::StrCat("chunk ", id, " is at step ", step, ", push was for step ", push_step));
    }
    if (arrived[worker]) {
      return absl::AlreadyExistsError(
          absl::StrCat("worker ", worker, " already pushed chunk ", id, " for step ", step));
    }
    // The codec contract: a bad payload is rejected before the accumulator is touched.
    if (absl::Status status = push_codec->DecodeAdd(payload, PushKey(config, step, id, worker),
                                                    absl::MakeSpan(accumulator));
        !status.ok()) {
      return absl::Status(status.code(), absl::StrCat("chunk ", id, " step ", step, " worker ",
                                                      worker, ": ", status.message()));
    }
    arrived[worker] = true;
    ++num_arrived;
    return absl::OkStatus();
  }

  // Once every worker has pushed: mean gradient, optimizer step, update through the pull
  // codec and residual; then resets for the next step and hands back the parked callbacks.
  // Requires mu.
  Completion FinishStep(const config::RunConfig& config) {
    push_codec->FinishAggregate(static_cast<int>(arrived.size()), absl::MakeSpan(accumulator));
    update = weights;  // w_old
    optimizer->Apply(absl::MakeSpan(weights), accumulator, static_cast<int64_t>(step));
    for (size_t i = 0; i < update.size(); ++i) update[i] = weights[i] - update[i];

    Completion done;
    // Encoding a well-sized buffer fails only on a codec bug. The weights have moved either
    // way, so the step still counts; workers that get the error must resync (PullWeights).
    done.status =
        pull_feedback->Compress(*pull_codec, update, PullKey(config, step, id), &done.update);
    ++step;
    done.step = step;
    std::fill(accumulator.begin(), accumulator.end(), 0.0f);
    std::fill(arrived.begin(), arrived.end(), false);
    num_arrived = 0;
    done.callbacks = std::move(pending);
    pending.clear();
    return done;
  }

  uint32_t id = 0;

  // std::mutex rather than absl::Mutex: Debian's Abseil is not built for ThreadSanitizer,
  // which then cannot see absl::Mutex and reports every access below as a race.
  mutable std::mutex mu;
  // Everything below is guarded by mu.
  uint64_t step = 0;  // Steps completed.
  std::vector<float> weights;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<compress::Codec> push_codec;
  std::vector<float> accumulator;  // Sum of this step's decoded pushes.
  std::vector<bool> arrived;       // By worker, this step.
  uint32_t num_arrived = 0;
  std::vector<DoneCallback> pending;  // Of this step's accepted pushes.
  std::unique_ptr<compress::Codec> pull_codec;
  std::unique_ptr<compress::ErrorFeedback> pull_feedback;
  std::vector<float> update;  // Scratch: w_old, then w_new - w_old.
  absl::Status closed;        // Not OK once Close() ran.
};

namespace {

// Prefixes a chunk's name to an error about it: "chunk 3 (fc1.weight): ...".
absl::Status AboutChunk(const JobLayout& layout, uint32_t id, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("chunk ", id, " (", layout.tensor_of(layout.chunks[id]).name,
                                   "): ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Shard::ChunkState>> Shard::NewChunk(uint32_t id) const {
  const ChunkPlan& plan = layout_.chunks[id];
  const size_t n = plan.chunk.length;
  auto chunk = std::make_unique<ChunkState>();
  chunk->id = id;
  TAMP_ASSIGN_OR_RETURN(chunk->optimizer, CreateOptimizer(config_.optimizer(), n));
  TAMP_ASSIGN_OR_RETURN(chunk->push_codec, compress::CreateCodec(plan.compression.push(), n));
  TAMP_ASSIGN_OR_RETURN(chunk->pull_codec, compress::CreateCodec(plan.compression.pull(), n));
  TAMP_ASSIGN_OR_RETURN(chunk->pull_feedback,
                        compress::ErrorFeedback::Create(plan.compression.pull_feedback(), n));
  chunk->weights.resize(n);
  InitTensorSlice(layout_.tensor_of(plan), config_.model().init_seed(), plan.chunk.tensor,
                  plan.chunk.offset, absl::MakeSpan(chunk->weights));
  chunk->accumulator.assign(n, 0.0f);
  chunk->arrived.assign(config_.cluster().num_workers(), false);
  chunk->update.resize(n);
  return chunk;
}

Shard::Shard(const config::RunConfig& config, const JobLayout& layout, uint32_t rank)
    : config_(config), layout_(layout), rank_(rank), chunk_ids_(layout.ChunksOfShard(rank)) {}

Shard::~Shard() = default;

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
    absl::StatusOr<std::unique_ptr<ChunkState>> chunk = shard->NewChunk(id);
    if (!chunk.ok()) return AboutChunk(layout, id, chunk.status());
    shard->chunks_[id] = std::move(chunk).value();
  }
  return shard;
}

absl::StatusOr<Shard::ChunkState*> Shard::Find(uint32_t chunk_id) const {
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

void Shard::PushPull(uint32_t worker, uint64_t step, uint32_t chunk_id, absl::string_view payload,
                     DoneCallback done) {
  const uint32_t num_workers = config_.cluster().num_workers();
  if (worker >= num_workers) {
    done(absl::InvalidArgumentError(absl::StrCat("worker ", worker, " out of range: the job has ",
                                                 num_workers, " workers")),
         nullptr, 0);
    return;
  }
  absl::StatusOr<ChunkState*> found = Find(chunk_id);
  if (!found.ok()) {
    done(found.status(), nullptr, 0);
    return;
  }
  ChunkState& chunk = **found;
  ChunkState::Completion completion;
  {
    std::lock_guard<std::mutex> lock(chunk.mu);
    absl::Status status = chunk.Add(config_, worker, step, payload);
    if (status.ok()) {
      chunk.pending.push_back(std::move(done));
      if (chunk.num_arrived < num_workers) return;  // Answered by the last worker's push.
      completion = chunk.FinishStep(config_);
    } else {
      completion.callbacks.push_back(std::move(done));
      completion.status = std::move(status);
    }
  }
  // Outside the lock: a callback may take its time or push again.
  const std::string* update = completion.status.ok() ? &completion.update : nullptr;
  const uint64_t completed = completion.status.ok() ? completion.step : 0;
  for (DoneCallback& callback : completion.callbacks) {
    callback(completion.status, update, completed);
  }
}

absl::Status Shard::PullWeights(rpc::PullWeightsResponse* response) const {
  response->Clear();
  uint64_t min_step = std::numeric_limits<uint64_t>::max();
  for (uint32_t id : chunk_ids_) {
    const ChunkState& chunk = *chunks_[id];
    rpc::ChunkWeights* out = response->add_chunks();
    out->set_chunk_id(id);
    std::lock_guard<std::mutex> lock(chunk.mu);
    out->set_values(reinterpret_cast<const char*>(chunk.weights.data()),
                    chunk.weights.size() * sizeof(float));
    min_step = std::min(min_step, chunk.step);
  }
  response->set_step(chunk_ids_.empty() ? 0 : min_step);
  return absl::OkStatus();
}

void Shard::Close(const absl::Status& reason) {
  CHECK(!reason.ok()) << "Close() needs an error to answer pushes with";
  for (uint32_t id : chunk_ids_) {
    ChunkState& chunk = *chunks_[id];
    std::vector<DoneCallback> parked;
    {
      std::lock_guard<std::mutex> lock(chunk.mu);
      chunk.closed = reason;
      parked = std::move(chunk.pending);
      chunk.pending.clear();
    }
    for (DoneCallback& callback : parked) callback(reason, nullptr, 0);
  }
}

uint64_t Shard::step() const {
  uint64_t min_step = std::numeric_limits<uint64_t>::max();
  for (uint32_t id : chunk_ids_) {
    std::lock_guard<std::mutex> lock(chunks_[id]->mu);
    min_step = std::min(min_step, chunks_[id]->step);
  }
  return chunk_ids_.empty() ? 0 : min_step;
}

absl::StatusOr<Shard::ChunkSnapshot> Shard::Snapshot(uint32_t chunk_id) const {
  TAMP_ASSIGN_OR_RETURN(const ChunkState* chunk, Find(chunk_id));
  std::lock_guard<std::mutex> lock(chunk->mu);
  ChunkSnapshot snapshot;
  snapshot.step = chunk->step;
  snapshot.weights = chunk->weights;
  snapshot.accumulator = chunk->accumulator;
  snapshot.arrived = chunk->arrived;
  const absl::Span<const float> residual = chunk->pull_feedback->residual();
  snapshot.pull_residual.assign(residual.begin(), residual.end());
  return snapshot;
}

}  // namespace tamp
