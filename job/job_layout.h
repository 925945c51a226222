// The layout of one job: the model's tensors, their chunks, each chunk's shard and
// compression, derived from a validated RunConfig and the model's tensors: those of the
// config's built-in model (MLP, CNN), or those the workers register (model.kind REGISTERED).
// Servers and workers build it the same way and compare it in the handshake.
//
// Compression of a chunk, in increasing precedence: compression.default_compression, then
// matching shard_overrides, then matching tensor_overrides (later entries win); finally a
// chunk smaller than min_compress_bytes goes raw ("none" both ways, no memory).
#ifndef TAMP_JOB_JOB_LAYOUT_H_
#define TAMP_JOB_JOB_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "job/model_layout.h"
#include "job/partition.h"
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

// The most tensors, and the longest tensor name, a layout may have (kMaxTensorDims:
// job/model_layout.h).
inline constexpr size_t kMaxTensors = 1 << 16;
inline constexpr size_t kMaxTensorNameBytes = 256;

// ValidateTensors()
//
// Checks `tensors` against `config`: at least one; at most kMaxTensors; names non-empty,
// at most kMaxTensorNameBytes, unique; at most kMaxTensorDims dimensions, each >= 1; at most 2^40 elements in all;
// at most 65536 chunks at compression.partition_bytes; every compression.tensor_overrides
// pattern matches a tensor. INVALID_ARGUMENT naming the tensor (or field) otherwise.
absl::Status ValidateTensors(const config::RunConfig& config,
                             const std::vector<TensorSpec>& tensors);

// LayoutNotes()
//
// What the config's compression blocks and cluster size change nothing about on `layout`, one
// note each, for the caller to warn of (the config stands):
// - a tensor override naming a codec other than none whose tensors' chunks are all below
//   compression.min_compress_bytes (they travel raw), e.g. "compression.tensor_overrides[0]
//   (pattern 'pos') changes nothing: ..."; or whose every tensor a later override matches
//   (the later one wins);
// - a shard override none of whose chunks it decides (its shards hold none, or only raw ones,
//   or ones a tensor override or a later shard override sets);
// - servers that hold no chunk (cluster.num_servers above the job's chunks).
std::vector<std::string> LayoutNotes(const config::RunConfig& config, const JobLayout& layout);

// BuildJobLayout()
//
// The layout of the config's built-in model. `config` must be validated (LoadConfigFile does
// that); INVALID_ARGUMENT for model.kind REGISTERED, whose tensors come from the workers.
absl::StatusOr<JobLayout> BuildJobLayout(const config::RunConfig& config);

// The layout of `tensors` (names and shapes, in layout order, e.g. what a worker registers).
// For model.kind MLP or CNN they must be the config's model tensors (INVALID_ARGUMENT naming
// the first difference); for REGISTERED they must pass ValidateTensors().
absl::StatusOr<JobLayout> BuildJobLayout(const config::RunConfig& config,
                                         std::vector<TensorSpec> tensors);

// CheckResolved()
//
// FAILED_PRECONDITION where the config still holds compression.automatic, which `tamp run`
// (or `tamp model --auto --write_config`) resolves into tensor overrides before any server or
// worker loads it; OK otherwise. BuildJobLayout() refuses such a config the same way.
absl::Status CheckResolved(const config::RunConfig& config);

// "fc1.weight [1024, 784]"
std::string DescribeTensor(const TensorSpec& tensor);

// The first difference between two tensor lists ("tensor 3: fc2.bias [10] vs fc2.bias [12]",
// "3 tensors vs 4: the first extra is ..."), naming `ours` and `theirs`; empty when equal.
std::string FirstTensorDifference(const std::vector<TensorSpec>& ours,
                                  const std::vector<TensorSpec>& theirs,
                                  absl::string_view ours_name, absl::string_view theirs_name);

}  // namespace tamp

#endif  // TAMP_JOB_JOB_LAYOUT_H_
