#include "job/partition.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tamp {

absl::StatusOr<Partition> PartitionTensors(const std::vector<uint64_t>& tensor_elements,
                                           uint64_t partition_bytes, uint32_t num_shards) {
  if (num_shards == 0) return absl::InvalidArgumentError("partition: num_shards must be >= 1");
  if (partition_bytes < sizeof(float)) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition: partition_bytes must be >= 4, got ", partition_bytes));
  }
  const uint64_t max_elements = partition_bytes / sizeof(float);
  Partition partition;
  for (uint32_t t = 0; t < tensor_elements.size(); ++t) {
    const uint64_t n = tensor_elements[t];
    if (n == 0) return absl::InvalidArgumentError(absl::StrCat("partition: tensor ", t, " is empty"));
    const uint64_t pieces = (n + max_elements - 1) / max_elements;
    const uint64_t base = n / pieces, extra = n % pieces;
    uint64_t offset = 0;
    for (uint64_t p = 0; p < pieces; ++p) {
      Chunk chunk;
      chunk.id = static_cast<uint32_t>(partition.chunks.size());
      chunk.tensor = t;
      chunk.offset = offset;
      chunk.length = base + (p < extra ? 1 : 0);
      offset += chunk.length;
      partition.chunks.push_back(chunk);
    }
  }
  std::vector<uint32_t> order(partition.chunks.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return partition.chunks[a].length > partition.chunks[b].length;
  });
  partition.shard_bytes.assign(num_shards, 0);
  for (uint32_t id : order) {
    const auto lightest =
        std::min_element(partition.shard_bytes.begin(), partition.shard_bytes.end());
    partition.chunks[id].shard = static_cast<uint32_t>(lightest - partition.shard_bytes.begin());
    *lightest += partition.chunks[id].length * sizeof(float);
  }
  return partition;
}

}  // namespace tamp
