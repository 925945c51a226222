// ShardChunk: one chunk of a parameter-server shard, as the shard (server/shard.h) routes pushes
// and pulls to it; and ChunkCore, what a chunk holds whatever the consistency mode.
//
// The consistency mode decides how pushes gather (server/sync_chunk.h: SYNC, the barrier and
// its rounds; server/async_chunk.h: ASYNC and SSP, views and parked answers). Both keep the
// same core: the exact fp32 weights, the optimizer and its state, the push codec (and its
// sparsity warm-up), the pull codec with its server-side residual, and the steps completed.
// server/shard_state.h copies the core to and from a checkpoint.
//
// Threading: every method of a ShardChunk may be called from any thread. Each chunk has one
// mutex (ChunkCore::mu) guarding all of its state; methods take it themselves unless they
// say "requires mu". Callbacks run outside it, on the thread of the push that completed
// them, so they may push again. Lock order: a chunk's mu, then Membership's members lock
// (server/membership.h); no chunk lock is ever taken under another chunk's lock except
// through Shard's rejoin, which takes them all in chunk id order.
//
// Ownership: the Shard owns its chunks; a chunk keeps pointers to the shard's config and
// Membership, which outlive it.
//
// Example (what Shard does with a chunk it found):
//   chunk.Push(worker, step, round, payload, std::move(done));
//   const uint64_t step = chunk.Pull(worker, PullKind::kExact, out->mutable_values());
#ifndef TAMP_SERVER_CHUNK_H_
#define TAMP_SERVER_CHUNK_H_

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "compress/ratio_warmup.h"
#include "job/job_layout.h"
#include "optim/optimizer.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"

namespace tamp {

// Buffers for a chunk's encoded answers (a raw pull is the whole chunk every step), reused
// rather than allocated anew. An answer is shared, not copied, by every worker it goes to,
// and its bytes may outlive the callback, the chunk's lock and the chunk itself (gRPC sends
// them after the callback returned: server/service.h); so Share() makes it a reference that
// gives the buffer back to the pool (up to `keep` of them; or frees it, once the pool is gone)
// when its last holder lets go. Thread-safe.
class PullBuffers : public std::enable_shared_from_this<PullBuffers> {
 public:
  static std::shared_ptr<PullBuffers> Create(size_t keep);

  // A spare buffer (capacity kept, contents unspecified), or an empty string.
  std::string Take();
  // `encoded`, read-only and shared; back to the pool when the last reference goes.
  std::shared_ptr<const std::string> Share(std::string&& encoded);
  size_t spare() const;

 private:
  explicit PullBuffers(size_t keep) : keep_(keep) {}
  void Give(std::string&& buffer);

  const size_t keep_;
  mutable std::mutex mu_;
  std::vector<std::string> spare_;  // Guarded by mu_.
};

// What an accepted push of any round is answered with; valid only during the callback, but
// `update` may be kept (it is shared: PullBuffers).
struct PushAnswer {
  // Steps the chunk has completed: push step + 1 after the step's last round, else the
  // push step.
  uint64_t step = 0;
  // True when the answer ends the step (always, for single-round codecs).
  bool last_round = true;
  // The pull codec's encoding of the chunk's update; empty before the last round. The same
  // bytes for every worker of a SYNC step.
  std::shared_ptr<const std::string> update;
  // The push codec's answer to the round (Codec::FinishRound()); empty for single-round
  // codecs.
  const std::string* aggregate = nullptr;
  // ASYNC / SSP: the fewest pushes of this chunk any worker had made when the answer was
  // formed (SSP guarantees push step < slowest_pushes + tau). 0 in SYNC.
  uint64_t slowest_pushes = 0;
};
// Called once per push: with OK and the answer, or with an error and null.
using RoundDoneCallback = std::function<void(absl::Status status, const PushAnswer* answer)>;

// Copies of one chunk's state, for tests and diagnostics.
struct ChunkSnapshot {
  uint64_t step = 0;
  uint32_t round = 0;                // Within the step (multi-round push codecs).
  std::vector<float> weights;
  std::vector<float> accumulator;    // Of the current round.
  std::vector<bool> arrived;         // By worker, this round.
  std::vector<float> pull_residual;  // Empty when the pull side keeps no memory.
  // ASYNC / SSP (empty in SYNC): by worker, its pushes applied and its view of the chunk.
  std::vector<uint64_t> worker_steps;
  std::vector<std::vector<float>> views;
  // Pushes of this chunk that config.validation.nonfinite_policy SKIP counted as zero.
  uint64_t nonfinite_skipped = 0;
};

// What a pull hands a worker.
enum class PullKind {
  // The exact weights. SYNC: the pull residual is dropped (every worker that pulls then holds
  // the exact weights). ASYNC / SSP: the worker's view becomes the weights.
  kExact,
  // SYNC, for a worker rejoining mid-run: the weights the other workers hold, the exact
  // weights less what the pull residual still owes them; the residual is left alone.
  // ASYNC / SSP: as kExact.
  kReplica,
};

// The state every chunk keeps whatever the mode. Each field is guarded by `mu`.
struct ChunkCore {
  // ChunkCore::Create()
  //
  // Chunk `id` of `layout` in its initial state: weights initialised from
  // config.model().init_seed() (zero for model.kind REGISTERED, which worker 0 sets), the
  // optimizer and the codecs created, the accumulator sized for round 0. `steps_per_epoch`
  // is the shard's run length (Membership), read only once it is fixed.
  static absl::StatusOr<std::unique_ptr<ChunkCore>> Create(const config::RunConfig& config,
                                                           const JobLayout& layout, uint32_t id,
                                                           const uint64_t* steps_per_epoch);

  // The push codec that encoded step `at`: push_codec, or a warm-up codec during warm-up.
  compress::Codec& PushCodecAt(uint64_t at) {
    return push_warmup == nullptr ? *push_codec
                                  : push_warmup->CodecFor(at / *steps_per_epoch, *push_codec);
  }
  // 1 for NaN and +-Inf (exponent bits all ones), else 0; branch-free so loops vectorise.
  static uint32_t NonFinite(float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    return static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }

  uint32_t id = 0;
  uint32_t num_workers = 0;  // The job's, fixed.
  // std::mutex rather than absl::Mutex: Debian's Abseil is not built for ThreadSanitizer,
  // which then cannot see absl::Mutex and reports every access below as a race.
  mutable std::mutex mu;
  // Everything below is guarded by mu.
  uint64_t step = 0;  // Steps completed (ASYNC / SSP: pushes applied).
  std::vector<float> weights;
  std::unique_ptr<Optimizer> optimizer;  // Null with server.mode AGGREGATE (no optimizer).
  std::unique_ptr<compress::Codec> push_codec;
  // Sparsity warm-up (compress/ratio_warmup.h): the push codecs of the first epochs; null
  // without ratio_warmup. Then steps_per_epoch points at the shard's, which pushes may read
  // once Membership::CheckScheduleReady() has seen the run's length fixed.
  std::unique_ptr<compress::RatioWarmup> push_warmup;
  const uint64_t* steps_per_epoch = nullptr;
  int rounds = 1;                  // push_codec->rounds(), fixed.
  std::vector<float> accumulator;  // Sum of this round's decoded pushes.
  std::unique_ptr<compress::Codec> pull_codec;
  std::unique_ptr<compress::ErrorFeedback> pull_feedback;
  std::vector<float> update;  // Scratch: w_new - w_old (Optimizer::Apply()).
  // Buffers of answers already sent: an answer is encoded into one of them rather than into
  // fresh memory. SYNC needs one per step (shared by every worker), ASYNC / SSP one per
  // answer formed together; up to one per worker are kept. Not guarded by mu (its own lock).
  std::shared_ptr<PullBuffers> pull_buffers;
  uint64_t nonfinite_skipped = 0;  // Pushes skipped by nonfinite_policy SKIP.
  absl::Status closed;             // Not OK once Close() ran.
  // Restored from a checkpoint and not in step with the workers yet (the modes' "follow").
  bool resuming = false;
};

// A chunk of a shard in one consistency mode. Every method locks the chunk's mu itself.
class ShardChunk {
 public:
  explicit ShardChunk(std::unique_ptr<ChunkCore> core) : core_(std::move(core)) {}
  virtual ~ShardChunk() = default;
  ShardChunk(const ShardChunk&) = delete;
  ShardChunk& operator=(const ShardChunk&) = delete;

  // ShardChunk::Push()
  //
  // Shard::PushPullRound() once the shard has checked the worker, found the chunk and seen
  // the schedule and the weights ready; `done` is called exactly once (server/shard.h).
  virtual void Push(uint32_t worker, uint64_t step, uint32_t round, absl::string_view payload,
                    RoundDoneCallback done) = 0;

  // ShardChunk::Pull()
  //
  // Writes the weights worker `worker` (in range) is to hold into *values (little-endian
  // fp32) as `kind` says, and returns the step to report for this chunk: the steps completed
  // (SYNC), or the worker's own pushes applied (ASYNC / SSP).
  virtual uint64_t Pull(uint32_t worker, PullKind kind, std::string* values) = 0;

  // ShardChunk::Close()
  //
  // Fails every push waiting for an answer with `reason`, and every later push.
  virtual void Close(const absl::Status& reason) = 0;

  // ShardChunk::Export() / CheckRestore() / Restore()
  //
  // The chunk's state after its last completed step (server/shard_state.h), whether `saved`
  // fits this chunk (INVALID_ARGUMENT naming the field; nothing changes), and loading it
  // (after CheckRestore passed), after which the chunk follows the workers.
  virtual void Export(checkpoint::ChunkState* out) const = 0;
  virtual absl::Status CheckRestore(const checkpoint::ChunkState& saved) const = 0;
  virtual void Restore(const checkpoint::ChunkState& saved) = 0;

  // ShardChunk::SetWeights()
  //
  // The initial weights (InitWeights): `bytes` holds exactly the chunk's fp32 values.
  virtual void SetWeights(absl::string_view bytes) = 0;

  virtual ChunkSnapshot Snapshot() const = 0;

  uint32_t id() const { return core_->id; }
  // Steps completed (ASYNC / SSP: pushes applied). Locks mu.
  uint64_t step() const {
    std::lock_guard<std::mutex> lock(core_->mu);
    return core_->step;
  }
  // The push codec has a sparsity warm-up, which needs the run's length. Fixed.
  bool has_ratio_warmup() const { return core_->push_warmup != nullptr; }

 protected:
  // The snapshot of the core; the modes add theirs. Requires mu.
  ChunkSnapshot CoreSnapshot() const;

  const std::unique_ptr<ChunkCore> core_;
};

}  // namespace tamp

#endif  // TAMP_SERVER_CHUNK_H_
