#include "common/job_layout.h"

#include "common/status_macros.h"

namespace tamp {
namespace {

config::ChunkCompression ResolveCompression(const config::Compression& compression,
                                            const std::string& tensor_name, const Chunk& chunk) {
  config::ChunkCompression resolved = compression.default_compression();
  for (const auto& override : compression.shard_overrides()) {
    for (uint32_t shard : override.shards()) {
      if (shard == chunk.shard) resolved = override.compression();
    }
  }
  for (const auto& override : compression.tensor_overrides()) {
    if (TensorNameMatches(override.pattern(), tensor_name)) resolved = override.compression();
  }
  if (chunk.length * sizeof(float) < compression.min_compress_bytes()) {
    resolved.Clear();
    resolved.mutable_push()->set_name("none");
    resolved.mutable_pull()->set_name("none");
  }
  return resolved;
}

}  // namespace

std::vector<uint32_t> JobLayout::ChunksOfShard(uint32_t shard) const {
  std::vector<uint32_t> ids;
  for (const ChunkPlan& plan : chunks) {
    if (plan.chunk.shard == shard) ids.push_back(plan.chunk.id);
  }
  return ids;
}

absl::StatusOr<JobLayout> BuildJobLayout(const config::RunConfig& config) {
  JobLayout layout;
  TAMP_ASSIGN_OR_RETURN(layout.tensors, ModelTensors(config.model()));
  std::vector<uint64_t> sizes;
  for (const TensorSpec& tensor : layout.tensors) {
    layout.tensor_offsets.push_back(layout.total_elements);
    layout.total_elements += tensor.elements();
    sizes.push_back(tensor.elements());
  }
  TAMP_ASSIGN_OR_RETURN(Partition partition,
                        PartitionTensors(sizes, config.compression().partition_bytes(),
                                         config.cluster().num_servers()));
  layout.shard_bytes = std::move(partition.shard_bytes);
  for (const Chunk& chunk : partition.chunks) {
    layout.chunks.push_back(
        {chunk, ResolveCompression(config.compression(), layout.tensors[chunk.tensor].name, chunk)});
  }
  return layout;
}

RandomKey PushKey(const config::RunConfig& config, uint64_t step, uint32_t chunk, uint32_t worker) {
  return {.seed = config.compression().seed(), .step = step, .chunk = chunk, .worker = worker};
}

RandomKey PullKey(const config::RunConfig& config, uint64_t step, uint32_t chunk) {
  return {.seed = config.compression().seed(), .step = step, .chunk = chunk, .worker = kSharedStream};
}

}  // namespace tamp
