// The handshake: before its first push, a worker sends each shard its whole view of the job
// (cluster size, every chunk with its tensor, range, owner and codecs); the shard compares
// it with its own and refuses on the first difference. Workers and servers derive the
// layout independently from the same config, so any difference means they were started
// from different configs (or builds) and would silently corrupt training if let through.
//
// Example (worker):
//   rpc::HandshakeRequest request;
//   FillHandshake(layout, config, worker_rank, server_rank, steps_per_epoch, total_steps,
//                 &request);
// Example (server):
//   absl::Status status = CheckHandshake(layout, config, rank, request);
//   // e.g. "chunk 3 (fc1.weight [524288, +262144]): push codec differs:
//   //       worker {name: "topk" ratio: 0.01} vs server {name: "none"}"
#ifndef TAMP_PROTOCOL_HANDSHAKE_H_
#define TAMP_PROTOCOL_HANDSHAKE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "job/job_layout.h"
#include "proto/config.pb.h"
#include "proto/tamp.pb.h"

namespace tamp {

// The wire protocol this build speaks (proto/tamp.proto).
inline constexpr uint32_t kProtocolVersion = 3;

// Describes the job as `worker_rank` sees it, for the shard `server_rank`, with the run's
// length as the worker computed it from its data (the shard's schedule needs it; see
// Shard::Join): `steps_per_epoch` and `total_steps` (min(epochs * steps_per_epoch,
// max_steps when set)).
void FillHandshake(const JobLayout& layout, const config::RunConfig& config, uint32_t worker_rank,
                   uint32_t server_rank, uint64_t steps_per_epoch, uint64_t total_steps,
                   rpc::HandshakeRequest* request);

// The tensors of `request` (model.kind REGISTERED: what the shard learns its layout from).
// INVALID_ARGUMENT when there are more than kMaxTensors or a shape has more than 32
// dimensions; the rest is BuildJobLayout()'s to check.
absl::StatusOr<std::vector<TensorSpec>> HandshakeTensors(const rpc::HandshakeRequest& request);

// CheckHandshakeHeader()
//
// The part of CheckHandshake() that needs no layout: protocol version, addressed shard,
// cluster size, worker rank.
absl::Status CheckHandshakeHeader(const config::RunConfig& config, uint32_t server_rank,
                                  const rpc::HandshakeRequest& request);

// Compares `request` with the job as shard `server_rank` sees it (not the run's length: that
// is the shard's to fix, Shard::Join). Returns
//   FAILED_PRECONDITION naming the first difference (protocol version, addressed shard,
//     cluster size, the tensors (names, shapes, order), chunk count, then chunk by chunk:
//     id, tensor, range, owner, codecs);
//   INVALID_ARGUMENT when the worker's rank is not below num_workers.
absl::Status CheckHandshake(const JobLayout& layout, const config::RunConfig& config,
                            uint32_t server_rank, const rpc::HandshakeRequest& request);

}  // namespace tamp

#endif  // TAMP_PROTOCOL_HANDSHAKE_H_
