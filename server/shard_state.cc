#include "server/shard_state.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

// Weights travel as raw host floats; the wire and checkpoint formats say little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "Tamp needs a little-endian host");

namespace tamp {
namespace {

// INVALID_ARGUMENT unless `bytes` holds exactly `expected` fp32 values.
absl::Status CheckFloatBytes(const std::string& bytes, size_t expected, uint32_t chunk_id,
                             absl::string_view what) {
  if (bytes.size() == expected * sizeof(float)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk_id, ": ", what, " has ",
                                                 bytes.size(), " bytes, expected ",
                                                 expected * sizeof(float)));
}

// INVALID_ARGUMENT unless `saved` fits `buffers` one for one (count and sizes).
absl::Status CheckBuffers(const google::protobuf::RepeatedPtrField<std::string>& saved,
                          const std::vector<absl::Span<float>>& buffers, uint32_t chunk_id,
                          absl::string_view what) {
  if (static_cast<size_t>(saved.size()) != buffers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk_id, ": ", saved.size(), " ",
                                                   what, " buffers, this job has ",
                                                   buffers.size()));
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    TAMP_RETURN_IF_ERROR(CheckFloatBytes(saved[static_cast<int>(i)], buffers[i].size(), chunk_id,
                                         absl::StrCat(what, " buffer ", i)));
  }
  return absl::OkStatus();
}

void CopyBuffers(const google::protobuf::RepeatedPtrField<std::string>& saved,
                 const std::vector<absl::Span<float>>& buffers) {
  for (size_t i = 0; i < buffers.size(); ++i) {
    // An empty buffer's data() may be null, and memcpy with null is undefined even for 0 bytes.
    if (buffers[i].empty()) continue;
    std::memcpy(buffers[i].data(), saved[static_cast<int>(i)].data(),
                buffers[i].size() * sizeof(float));
  }
}

// The optimizer's state; none with server.mode AGGREGATE (which takes no checkpoints).
std::vector<absl::Span<float>> OptimizerBuffers(const ChunkCore& core) {
  if (core.optimizer == nullptr) return {};
  return core.optimizer->StateBuffers();
}

}  // namespace

std::string FloatBytes(absl::Span<const float> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

void ExportCore(const ChunkCore& core, checkpoint::ChunkState* out) {
  out->set_chunk_id(core.id);
  out->set_step(core.step);
  out->set_weights(FloatBytes(core.weights));
  for (absl::Span<float> buffer : OptimizerBuffers(core)) {
    out->add_optimizer_state(FloatBytes(buffer));
  }
  for (absl::Span<float> buffer : core.pull_feedback->StateBuffers()) {
    out->add_pull_feedback_state(FloatBytes(buffer));
  }
  out->set_nonfinite_skipped(core.nonfinite_skipped);
}

absl::Status CheckCore(const ChunkCore& core, const checkpoint::ChunkState& saved,
                       size_t worker_steps) {
  const uint32_t id = core.id;
  TAMP_RETURN_IF_ERROR(CheckFloatBytes(saved.weights(), core.weights.size(), id, "weights"));
  TAMP_RETURN_IF_ERROR(CheckBuffers(saved.optimizer_state(), OptimizerBuffers(core), id,
                                    "optimizer state"));
  TAMP_RETURN_IF_ERROR(CheckBuffers(saved.pull_feedback_state(),
                                    core.pull_feedback->StateBuffers(), id, "pull feedback"));
  if (static_cast<size_t>(saved.worker_steps_size()) != worker_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk ", id, ": ", saved.worker_steps_size(), " worker step counts, this job has ",
        worker_steps, " (one per worker in ASYNC / SSP, none in SYNC)"));
  }
  return absl::OkStatus();
}

void RestoreCore(const checkpoint::ChunkState& saved, ChunkCore* core) {
  core->step = saved.step();
  std::memcpy(core->weights.data(), saved.weights().data(), saved.weights().size());
  CopyBuffers(saved.optimizer_state(), OptimizerBuffers(*core));
  CopyBuffers(saved.pull_feedback_state(), core->pull_feedback->StateBuffers());
  core->nonfinite_skipped = saved.nonfinite_skipped();
  core->accumulator.assign(core->push_codec->RoundValues(0), 0.0f);
  core->resuming = true;
}

checkpoint::ShardState ExportShardState(const std::vector<ShardChunk*>& chunks) {
  checkpoint::ShardState state;
  for (const ShardChunk* chunk : chunks) chunk->Export(state.add_chunks());
  return state;
}

absl::Status RestoreShardState(const checkpoint::ShardState& state, uint32_t rank,
                               const std::vector<ShardChunk*>& chunks) {
  if (static_cast<size_t>(state.chunks_size()) != chunks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the state has ", state.chunks_size(),
                                                   " chunks, shard ", rank, " has ",
                                                   chunks.size()));
  }
  // Everything is checked before anything changes.
  for (size_t i = 0; i < chunks.size(); ++i) {
    const checkpoint::ChunkState& saved = state.chunks(static_cast<int>(i));
    if (saved.chunk_id() != chunks[i]->id()) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", i, " of the state is chunk ",
                                                     saved.chunk_id(), ", expected chunk ",
                                                     chunks[i]->id()));
    }
    TAMP_RETURN_IF_ERROR(chunks[i]->CheckRestore(saved));
  }
  for (size_t i = 0; i < chunks.size(); ++i) chunks[i]->Restore(state.chunks(static_cast<int>(i)));
  return absl::OkStatus();
}

}  // namespace tamp
