// Checkpoint files of a parameter-server shard: format, atomic writing, refusing bad ones.
//
// A file holds one shard's complete state (checkpoint::ShardState: per chunk its step,
// weights, optimizer state and pull-side error-feedback memory) plus the identity of the
// job it belongs to (checkpoint::JobIdentity: shard rank, cluster size, consistency mode,
// optimizer, compression seed, every chunk with its range, owner and codecs, and for
// model.kind REGISTERED the registered tensors' names and shapes). Layout, all
// integers little-endian:
//
//   offset 0   magic "TAMPCKPT"                     8 bytes
//          8   format version (kCheckpointVersion)  uint32
//         12   job fingerprint (FNV-1a 64 of the JobIdentity's deterministic bytes)  uint64
//         20   body length N                        uint64
//         28   body: checkpoint::CheckpointBody      N bytes (proto/checkpoint.proto)
//     28 + N   CRC-32 (zlib) of bytes [0, 28 + N)    uint32
//
// Writing is atomic: `<path>.tmp` is written and fsync'ed, renamed over `<path>`, and the
// directory is fsync'ed, so a crash at any point leaves the previous checkpoint or the new
// one, never a mix. Reading refuses, with an error naming the file and the problem, every
// file that is truncated, damaged (the CRC catches any error of up to 32 consecutive bits,
// so every single-byte change), of another format version, or of another job (naming the
// first differences).
//
// Thread safety: free functions without shared state.
//
// Example:
//   const checkpoint::JobIdentity job = DescribeJob(config, layout, rank);
//   TAMP_RETURN_IF_ERROR(WriteCheckpoint(CheckpointPath(dir, rank), job, shard->ExportState()));
//   absl::StatusOr<checkpoint::ShardState> state = ReadCheckpoint(CheckpointPath(dir, rank), job);
//   if (state.ok()) TAMP_RETURN_IF_ERROR(shard->Restore(*state));
#ifndef TAMP_SERVER_CHECKPOINT_H_
#define TAMP_SERVER_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "job/job_layout.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"

namespace tamp {

// The file format this build writes, and the oldest it reads. Version 2 added the ASYNC / SSP
// workers' counts (ChunkState.worker_steps); a version-1 file is a SYNC checkpoint, read as is.
inline constexpr uint32_t kCheckpointVersion = 2;
inline constexpr uint32_t kOldestCheckpointVersion = 1;

// tamp_server's exit status when its final checkpoint could not be written (the shard's
// state since its last good one is lost), for launchers to name.
inline constexpr int kServerExitCheckpointLost = 3;

// "<dir>/shard-<rank>.ckpt".
std::string CheckpointPath(absl::string_view dir, uint32_t rank);

// The identity of shard `rank` of the job `config` / `layout` describe.
checkpoint::JobIdentity DescribeJob(const config::RunConfig& config, const JobLayout& layout,
                                    uint32_t rank);

// The file's bytes (see the layout above).
std::string SerializeCheckpoint(const checkpoint::JobIdentity& job,
                                const checkpoint::ShardState& state);

// ParseCheckpoint()
//
// The state in `bytes` (a checkpoint file's content; `name` is the file, for messages), if
// it is sound and belongs to `expected`. Errors name the file and what is wrong:
//   DATA_LOSS            truncated or trailing bytes, bad magic, CRC mismatch, unparsable body;
//   FAILED_PRECONDITION  a format version outside [kOldestCheckpointVersion,
//                        kCheckpointVersion], or another job, e.g.
//     "ckpt/shard-1.ckpt: written for another job: modified: shard_rank: 0 -> 1".
absl::StatusOr<checkpoint::ShardState> ParseCheckpoint(absl::string_view bytes,
                                                       absl::string_view name,
                                                       const checkpoint::JobIdentity& expected);

// CheckCheckpointWritable()
//
// Creates the directory of checkpoint `path` when missing and checks that a file can be
// created there (and removes it): UNAVAILABLE naming the path and the system's reason
// otherwise, so a server can refuse to start instead of failing at its first checkpoint.
absl::Status CheckCheckpointWritable(const std::string& path);

// WriteCheckpoint()
//
// Writes `path` atomically (`<path>.tmp`, fsync, rename, fsync of the directory, which is
// created when missing). UNAVAILABLE naming the path and the system's reason on failure; the
// previous file at `path` is then left as it was.
absl::Status WriteCheckpoint(const std::string& path, const checkpoint::JobIdentity& job,
                             const checkpoint::ShardState& state);

// ReadCheckpoint()
//
// ParseCheckpoint() of the file at `path`. NOT_FOUND when there is no file (a fresh start);
// UNAVAILABLE when it cannot be read.
absl::StatusOr<checkpoint::ShardState> ReadCheckpoint(const std::string& path,
                                                      const checkpoint::JobIdentity& expected);

// CheckCheckpointSound()
//
// ReadCheckpoint()'s checks of the file at `path` that need no job (framing, checksum,
// version, body): OK when it is sound or absent. For a server of model.kind REGISTERED, which
// learns its job at the first handshake, to refuse a damaged checkpoint at start as the
// others do.
absl::Status CheckCheckpointSound(const std::string& path);

}  // namespace tamp

#endif  // TAMP_SERVER_CHECKPOINT_H_
