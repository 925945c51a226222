// The layout of one job: the model's tensors, their chunks, each chunk's shard and
// compression, all derived from a validated RunConfig. Servers and workers build it from the
// same config and compare it in the handshake.
//
// Compression of a chunk, in increasing precedence: compression.default_compression, then
// matching shard_overrides, then matching tensor_overrides (later entries win); finally a
// chunk smaller than min_compress_bytes goes raw ("none" both ways, no memory).
#ifndef TAMP_COMMON_JOB_LAYOUT_H_
#define TAMP_COMMON_JOB_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_layout.h"
#include "common/partition.h"
#include "common/philox.h"
#include "proto/config.pb.h"

namespace tamp {

struct ChunkPlan {
  Chunk chunk;
  config::ChunkCompression compression;
};

struct JobLayout {
  std::vector<TensorSpec> tensors;
  // Element offset of each tensor in a flat parameter buffer (tensor order).
  std::vector<uint64_t> tensor_offsets;
  uint64_t total_elements = 0;
  std::vector<ChunkPlan> chunks;      // Indexed by chunk id.
  std::vector<uint64_t> shard_bytes;  // fp32 bytes per shard.

  const TensorSpec& tensor_of(const ChunkPlan& plan) const { return tensors[plan.chunk.tensor]; }
  // Element offset of a chunk in the flat parameter buffer.
  uint64_t flat_offset(const ChunkPlan& plan) const {
    return tensor_offsets[plan.chunk.tensor] + plan.chunk.offset;
  }
  // Ids of the chunks owned by `shard`, ascending.
  std::vector<uint32_t> ChunksOfShard(uint32_t shard) const;
};

// `config` must be validated (LoadConfigFile does that).
absl::StatusOr<JobLayout> BuildJobLayout(const config::RunConfig& config);

// Philox keys of one chunk and step: the push key is private to the worker; the pull key is
// shared, since every worker decodes the same update payload.
RandomKey PushKey(const config::RunConfig& config, uint64_t step, uint32_t chunk, uint32_t worker);
RandomKey PullKey(const config::RunConfig& config, uint64_t step, uint32_t chunk);

}  // namespace tamp

#endif  // TAMP_COMMON_JOB_LAYOUT_H_
