// PushFusion: a worker's pushes of small chunks, held per shard and sent together (tensor
// fusion, cluster.fusion_bytes; PsClient::PushPullBatch), as DDP's gradient buckets: a model
// of many small tensors pays one call's overhead per batch instead of one per chunk.
//
// A push of a chunk below the threshold (its fp32 bytes) joins its shard's batch, which goes
// once its chunks, or their payloads, reach the threshold, or at Flush(): the caller flushes after the step's
// last push and before it waits for the answers. Larger chunks, rounds after a multi-round
// codec's first, and everything when the threshold is 0 go at once in their own call. Each
// push's callback gets exactly what its own PushPullRound() would have.
//
// Threading: one thread (the worker's training thread) makes every call; the callbacks run
// on gRPC's threads. Held pushes that were never flushed are dropped with their callbacks
// when this is destroyed.
//
// Example:
//   PushFusion fusion(ps_client, config.cluster().fusion_bytes(), num_shards);
//   for (each chunk of the step) fusion.Push(shard, step, 0, chunk_id, chunk_bytes, payload, done);
//   fusion.Flush();
#ifndef TAMP_WORKER_PUSH_FUSION_H_
#define TAMP_WORKER_PUSH_FUSION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "worker/ps_client.h"

namespace tamp {

class PushFusion {
 public:
  // `client` must outlive this.
  PushFusion(PsClient* client, uint64_t fusion_bytes, size_t num_shards);

  // Sends round `round` of chunk `chunk_id` (of shard `shard`, `chunk_bytes` fp32 bytes) for
  // `step`, now or held with its shard's batch.
  void Push(uint32_t shard, uint64_t step, uint32_t round, uint32_t chunk_id,
            uint64_t chunk_bytes, std::string payload, PsClient::PushPullRoundDone done);

  // Sends every held batch.
  void Flush();

  // Pushes held, not sent yet.
  size_t held() const;

 private:
  struct Batch {
    uint64_t step = 0;
    uint64_t bytes = 0;          // fp32 bytes of its chunks.
    uint64_t payload_bytes = 0;  // Their payloads' bytes.
    std::vector<PsClient::BatchedPush> pushes;
  };
  void Send(uint32_t shard);

  PsClient* const client_;
  const uint64_t fusion_bytes_;
  std::vector<Batch> held_;  // By shard.
};

}  // namespace tamp

#endif  // TAMP_WORKER_PUSH_FUSION_H_
