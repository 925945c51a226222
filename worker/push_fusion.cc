#include "worker/push_fusion.h"

#include <utility>

namespace tamp {

PushFusion::PushFusion(PsClient* client, uint64_t fusion_bytes, size_t num_shards)
    : client_(client), fusion_bytes_(fusion_bytes), held_(num_shards) {}

void PushFusion::Push(uint32_t shard, uint64_t step, uint32_t round, uint32_t chunk_id,
                      uint64_t chunk_bytes, std::string payload,
                      PsClient::PushPullRoundDone done) {
  if (round != 0 || chunk_bytes >= fusion_bytes_) {
    client_->PushPullRound(step, round, chunk_id, std::move(payload), std::move(done));
    return;
  }
  Batch& batch = held_[shard];
  if (!batch.pushes.empty() && batch.step != step) Send(shard);  // One step per call.
  batch.step = step;
  batch.bytes += chunk_bytes;
  batch.payload_bytes += payload.size();
  batch.pushes.push_back({chunk_id, round, std::move(payload), std::move(done)});
  // The payloads count too: tiny chunks' headers can outweigh their values, and the call
  // must stay well inside the servers' message limit (job/config.cc ValidateFusion).
  if (batch.bytes >= fusion_bytes_ || batch.payload_bytes >= fusion_bytes_) Send(shard);
}

void PushFusion::Flush() {
  for (uint32_t shard = 0; shard < held_.size(); ++shard) Send(shard);
}

size_t PushFusion::held() const {
  size_t pushes = 0;
  for (const Batch& batch : held_) pushes += batch.pushes.size();
  return pushes;
}

void PushFusion::Send(uint32_t shard) {
  Batch& batch = held_[shard];
  if (batch.pushes.size() == 1) {  // Its own call: the raw path copies nothing.
    PsClient::BatchedPush& push = batch.pushes.front();
    client_->PushPullRound(batch.step, push.round, push.chunk_id, std::move(push.payload),
                           std::move(push.done));
  } else if (!batch.pushes.empty()) {
    client_->PushPullBatch(shard, batch.step, std::move(batch.pushes));
  }
  batch.pushes.clear();
  batch.bytes = 0;
  batch.payload_bytes = 0;
}

}  // namespace tamp
