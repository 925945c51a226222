// Splits tensors into contiguous chunks and assigns chunks to shards.
//
// Every process computes the same partition from the same inputs, so servers and workers
// agree on chunk ids and owners without talking. A tensor of more than `partition_bytes`
// splits into ceil(bytes / partition_bytes) chunks of near-equal length (lengths differ by
// at most one element). Chunks go to shards largest first, each to the shard with the
// fewest bytes so far (ties: lower chunk id, lower shard index): no hash hot spots.
#ifndef TAMP_JOB_PARTITION_H_
#define TAMP_JOB_PARTITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tamp {

struct Chunk {
  uint32_t id = 0;       // Position in tensor order, then offset order.
  uint32_t tensor = 0;   // Index into the tensor list.
  uint64_t offset = 0;   // First element within the tensor.
  uint64_t length = 0;   // Elements.
  uint32_t shard = 0;
};

struct Partition {
  std::vector<Chunk> chunks;          // Sorted by id.
  std::vector<uint64_t> shard_bytes;  // fp32 bytes owned by each shard.
};

// tensor_elements: element count of each tensor (fp32). Errors: no shards, a zero-sized
// tensor, partition_bytes smaller than one element.
absl::StatusOr<Partition> PartitionTensors(const std::vector<uint64_t>& tensor_elements,
                                           uint64_t partition_bytes, uint32_t num_shards);

}  // namespace tamp

#endif  // TAMP_JOB_PARTITION_H_
