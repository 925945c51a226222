// Shard state export and restore: a shard's chunks to and from checkpoint::ShardState
// (proto/checkpoint.proto), which server/checkpoint.h writes and reads.
//
// What a checkpoint holds of each chunk: its completed-step state (step, weights, optimizer
// state, pull-side memory, the NaN / Inf skips; in ASYNC / SSP each worker's count of applied
// pushes). Not the pushes gathered for the step in progress, nor SSP's parked ones, which the
// workers push again to a restarted server, nor the workers' views, which their resync
// resets. A restored chunk then follows the workers (server/sync_chunk.h,
// server/async_chunk.h). Multi-round push codecs: the state after the chunk's last completed
// step (the server's codec keeps nothing from one step to the next); a restored chunk follows
// the workers at round 0 of their step, and each worker pushes the step again from its first
// round (worker/client.h).
//
// Threading: ExportShardState and RestoreShardState take each chunk's lock in turn (through
// ShardChunk); the *Core helpers require the chunk's mu. RestoreShardState is for a shard that does
// not serve yet.
//
// Example:
//   checkpoint::ShardState state = ExportShardState(chunks);
//   TAMP_RETURN_IF_ERROR(RestoreShardState(state, rank, chunks));  // In a new process.
#ifndef TAMP_SERVER_SHARD_STATE_H_
#define TAMP_SERVER_SHARD_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/checkpoint.pb.h"
#include "server/chunk.h"

namespace tamp {

// Every chunk's state after its last completed step, in the order of `chunks` (chunk id
// order). Each chunk is copied under its own lock, so chunks may be one step apart while
// steps are in flight; each is consistent on its own, which is all a restore needs.
checkpoint::ShardState ExportShardState(const std::vector<ShardChunk*>& chunks);

// Loads `state` (exported by this shard, server `rank`, of the same job; server/checkpoint.h
// checks the job) into `chunks`, all or nothing: INVALID_ARGUMENT naming the chunk and field
// when it does not fit (chunk count and ids, value counts, optimizer or feedback buffers, the
// workers' counts of ASYNC / SSP).
absl::Status RestoreShardState(const checkpoint::ShardState& state, uint32_t rank,
                               const std::vector<ShardChunk*>& chunks);

// The parts every mode saves, for ShardChunk::Export() / CheckRestore() / Restore(). Require the
// chunk's mu. CheckCore also checks that `saved` has `worker_steps` counts (0 in SYNC).
void ExportCore(const ChunkCore& core, checkpoint::ChunkState* out);
absl::Status CheckCore(const ChunkCore& core, const checkpoint::ChunkState& saved,
                       size_t worker_steps);
// Loads what CheckCore() passed, empties the accumulator and marks the chunk resuming.
void RestoreCore(const checkpoint::ChunkState& saved, ChunkCore* core);

// Little-endian fp32 bytes of `values` (the host is little-endian).
std::string FloatBytes(absl::Span<const float> values);

}  // namespace tamp

#endif  // TAMP_SERVER_SHARD_STATE_H_
