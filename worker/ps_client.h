// PsClient: a worker's connection to every parameter-server shard.
//
// Connect() opens one channel per shard and handshakes with each (waiting, bounded by
// cluster.connect_timeout_ms, for shards that are still starting); the handshake carries the
// run's length, which the shards' learning-rate schedule needs. PullWeights() fetches
// exact weights; PushPull() sends one chunk's payload and calls back with the shard's update.
// Rejoin() brings back a worker that a SYNC barrier dropped (consistency.worker_timeout_ms).
//
// Thread safety: all methods may be called from any thread; callbacks run on gRPC's threads
// and must not block. Destruction waits for every PushPull callback to have run (each call
// has a deadline, so each ends).
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(auto client, PsClient::Connect(config, layout, rank, addresses,
//                                                        steps_per_epoch, total_steps));
//   TAMP_ASSIGN_OR_RETURN(uint64_t step, client->PullWeights(params));
//   client->PushPull(step, chunk_id, std::move(payload),
//                    [](absl::Status s, std::string update) { ... });
#ifndef TAMP_WORKER_PS_CLIENT_H_
#define TAMP_WORKER_PS_CLIENT_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/random_id.h"
#include "grpcpp/generic/generic_stub.h"
#include "job/job_layout.h"
#include "proto/config.pb.h"
#include "proto/tamp.grpc.pb.h"

namespace tamp {

class PsClient {
 public:
  using PushPullDone = std::function<void(absl::Status status, std::string update_payload)>;

  // Waits for the callbacks of every PushPull call in flight, then closes the channels.
  ~PsClient();

  // `server_addresses[s]` is shard s ("host:port"). `steps_per_epoch` and `total_steps` are
  // the run's length as this worker computed it (see FillHandshake in protocol/handshake.h).
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(
      const config::RunConfig& config, const JobLayout& layout, uint32_t worker_rank,
      const std::vector<std::string>& server_addresses, uint64_t steps_per_epoch,
      uint64_t total_steps);

  // Copies every shard's exact weights into `params` (the flat buffer, layout order).
  // Returns the lowest step any shard has completed. `min_generation` > 0: waits (up to
  // cluster.rpc_timeout_ms) until worker 0 has set the weights that many times.
  absl::StatusOr<uint64_t> PullWeights(absl::Span<float> params, uint32_t min_generation = 0);

  // PsClient::InitWeights()
  //
  // Worker 0: sets every shard's weights from `params` (the flat buffer, layout order):
  // generation 0, model.kind REGISTERED's initial weights; g >= 1, a broadcast before the
  // first step (server/shard.h InitWeights()). Weights an earlier process of this worker (or
  // try) set stand. Until they are set, the other workers' PullWeights() waits (up to
  // cluster.rpc_timeout_ms).
  absl::Status InitWeights(absl::Span<const float> params, uint32_t generation = 0);

  // The most steps any chunk had completed when Connect() handshook: 0 when the job starts
  // with this worker; more when it joins a run under way (SYNC: it must Rejoin()).
  uint64_t latest_step_at_connect() const { return latest_step_at_connect_; }
  // A handshake of this client took its rank over from another process (a replacement of a
  // dead worker, or a second process started with this rank): HandshakeResponse's
  // displaced_process.
  bool displaced_another_process() const { return displaced_another_process_; }
  // SYNC: a shard's last handshake said a step in progress holds a push of this worker's rank
  // (HandshakeResponse.rank_pushed: an earlier process of it pushed part of that step).
  bool rank_pushed() const;

  // PsClient::Rejoin()
  //
  // SYNC, for a worker dropped from the barriers (its pushes answered ABORTED) or a
  // replacement process with its rank: announces to every shard (a handshake with
  // rejoin_at_step) the step in progress, the most steps any chunk has completed, unless a
  // chunk holds a push of this rank in it (then the step after, as for a step-0 start), waits
  // until every chunk has reached that step (none can pass it without this worker), and
  // copies the replica the other workers hold into `params`. Returns that step, the next this
  // worker pushes. Announces again, a step later, when a shard refuses (it moved past the
  // step, or got a push of this rank meanwhile); DEADLINE_EXCEEDED when the others do not
  // reach it within cluster.rpc_timeout_ms. When the step to announce is the run's end (the
  // others are in its last step, or done), announces that, so the last steps complete
  // without this rank, waits for the end and returns the total steps with the final weights
  // the others hold: nothing is left to train.
  absl::StatusOr<uint64_t> Rejoin(absl::Span<float> params);

  // PsClient::PullShardWeights()
  //
  // PullWeights() of shard `shard` alone (its chunks of `params`); returns its step.
  absl::StatusOr<uint64_t> PullShardWeights(uint32_t shard, absl::Span<float> params);

  // PsClient::Reconnect()
  //
  // For a shard whose pushes failed IsServerGone() (`cause`, logged): handshakes with it again,
  // retrying with exponential backoff (100 ms doubling to 5 s, each attempt waiting up to
  // cluster.connect_timeout_ms for the channel), each failure logged, until it answers or
  // checkpoint.reconnect_timeout_ms has passed (then UNAVAILABLE naming the shard). On
  // success later pushes carry the shard's new incarnation (a restarted server refuses the
  // old one); the caller must then pull its weights (PullShardWeights) before pushing.
  // Returns whether the shard is a new process (restarted: its incarnation changed).
  // Blocking; call it from the thread that pushes, between pushes.
  absl::StatusOr<bool> Reconnect(uint32_t shard, absl::string_view cause);

  // Sends `payload` for (step, chunk) to the chunk's shard; `done` receives the update.
  void PushPull(uint64_t step, uint32_t chunk_id, std::string payload, PushPullDone done);

  // What a shard answers one push of PushPullRound().
  struct RoundAnswer {
    std::string update;     // Pull payload of the update; empty before the step's last round.
    std::string aggregate;  // The push codec's answer to the round (multi-round codecs).
    std::string pushed;     // The payload that was sent, handed back to push it again.
  };
  using PushPullRoundDone = std::function<void(absl::Status status, RoundAnswer answer)>;

  // PsClient::PushPullRound()
  //
  // PushPull() for round `round` of a multi-round push codec's step (compress/codec.h): the
  // answer arrives once every worker has pushed that round, and `done` gets the round's
  // aggregate, plus the update after the last round. PushPull() is round 0 of a single-round
  // codec.
  void PushPullRound(uint64_t step, uint32_t round, uint32_t chunk_id, std::string payload,
                     PushPullRoundDone done);

  // One push of PushPullBatch().
  struct BatchedPush {
    uint32_t chunk_id = 0;
    uint32_t round = 0;
    std::string payload;
    PushPullRoundDone done;
  };

  // PsClient::PushPullBatch()
  //
  // PushPullRound() of each of `pushes` (chunks of shard `shard`, step `step`, no chunk
  // twice) in one call (tensor fusion, cluster.fusion_bytes): once every push is answered,
  // each `done` gets what its own PushPullRound() would have, and every one the call's error
  // when the whole call fails.
  void PushPullBatch(uint32_t shard, uint64_t step, std::vector<BatchedPush> pushes);

 private:
  PsClient(const config::RunConfig& config, const JobLayout& layout, uint32_t worker_rank,
           std::vector<std::string> addresses);
  // A call's deadline (cluster.rpc_timeout_ms) and job token.
  void PrepareCall(grpc::ClientContext* context) const;
  // Returns the shard's latest_step. `rejoin_at_step`: see HandshakeRequest.
  // Waits for the server up to `wait_ms` (cluster.connect_timeout_ms when 0).
  absl::StatusOr<uint64_t> Handshake(uint32_t shard, uint64_t rejoin_at_step,
                                     int64_t wait_ms = 0);
  // Rejoin() with no step left: waits for the run's last step, copies the replica into
  // `params`, returns total_steps_.
  absl::StatusOr<uint64_t> AwaitRunEnd(absl::Span<float> params);
  // PullWeights(), or with `replica` the weights the other workers hold (PullReplica).
  absl::StatusOr<uint64_t> Pull(absl::Span<float> params, bool replica,
                                uint32_t min_generation = 0);
  // Pull() from one shard; returns its step.
  absl::StatusOr<uint64_t> PullShard(uint32_t shard, absl::Span<float> params, bool replica,
                                     uint32_t min_generation = 0);
  // Loads the job token and opens one channel per shard with the configured credentials.
  absl::Status OpenChannels();
  // 'chunk 3 (tensor "fc1.weight", elements 1024-2047)': errors name the user's tensor.
  std::string ChunkName(uint32_t chunk_id) const;
  // "shard 1 (127.0.0.1:4000): " — prefixes errors so they name the server.
  std::string Describe(uint32_t shard) const;

  const config::RunConfig& config_;
  const JobLayout& layout_;
  const uint32_t worker_rank_;
  const std::vector<std::string> addresses_;
  uint64_t steps_per_epoch_ = 0;  // Sent in every handshake; set by Connect().
  uint64_t total_steps_ = 0;
  uint64_t latest_step_at_connect_ = 0;  // Set by Connect().
  bool displaced_another_process_ = false;  // Set by Handshake().
  std::vector<bool> rank_pushed_;  // By shard: its last handshake's rank_pushed.
  std::string job_token_;  // Sent with every call when not empty (job/security.h).
  std::vector<std::unique_ptr<rpc::ParameterServer::Stub>> stubs_;
  // By shard, on the same channel: PushPull's raw calls (grpc::ByteBuffer both ways).
  std::vector<std::unique_ptr<grpc::GenericStub>> raw_stubs_;
  // By shard: what its last handshake returned, sent with every push. Written by Handshake()
  // and read by PushPullRound(), both on the calling (training) thread.
  std::vector<uint64_t> incarnations_;
  // This client's random id, sent with every handshake and push: a server refuses the pushes
  // of a client whose rank another client has handshaken for since (server/worker_processes.h).
  const uint64_t process_id_ = RandomNonZeroId();
  // PushPullRound() holds this while gRPC takes the call, and the call's callback takes it
  // before touching anything; a callback that comes sooner waits for that (microseconds).
  // gRPC core, which hands the call to the callback's thread, is not built with
  // ThreadSanitizer, so only this lock shows TSan (--config=tsan) that everything the
  // caller did to the call happens before its callback.
  std::mutex handover_mu_;
  // PushPull and PushPullBatch calls whose callback has not yet released the call: ~PsClient() waits for 0,
  // so that it, on the owner's thread, drops the channels' last references. Were the last
  // one dropped on a gRPC thread, gRPC would shut itself down on a detached thread that can
  // outlive main() and race the process's exit (double frees; grpc/grpc#23604).
  std::mutex in_flight_mu_;
  std::condition_variable all_released_;
  int in_flight_ = 0;  // Guarded by in_flight_mu_.
};

// Turns a failed gRPC call into a Status with the same code and a message naming the shard.
absl::Status FromGrpc(const grpc::Status& status, absl::string_view context);

// Whether a call failed because its server went away: UNAVAILABLE (killed, unreachable, or
// restarted since the handshake) or CANCELLED (a server shutting down cancels the calls it
// has not started; a worker never cancels its own). The call may go again once the server
// is back (PsClient::Reconnect()).
bool IsServerGone(const absl::Status& status);

}  // namespace tamp

#endif  // TAMP_WORKER_PS_CLIENT_H_
