// ParameterServerService: the gRPC face of one Shard (proto/tamp.proto).
//
// Callback API, one DefaultReactor per unary call, and no reaction ever waits: Handshake
// and PullWeights answer at once; PushPull (and each push of a PushPullBatch) hands its reactor to the Shard, which finishes
// it from whichever push completes the step, or the round of a multi-round codec
// (Shard::PushPullRound; possibly a push from another worker, on another gRPC thread). gRPC runs reactions on a small shared pool, so a handler that blocked until
// every worker had pushed would starve the very pushes it waits for.
//
// Errors cross the wire with the Shard's absl code and message unchanged.
//
// PushPull is served raw (gRPC ByteBuffers, proto/tamp.proto's messages on the wire): the
// request is parsed here, and the response is the answer's small fields followed by its
// update, which is not copied: every worker's response refers to the one shared encoding
// of the step's update (PushAnswer::update), held until gRPC has sent it. A SYNC step with
// W workers so keeps one copy of each answer instead of W in response messages plus W
// serialized ones (a raw pull of a 100 MB shard to 8 workers held 1.6 GB).
//
// Example:
//   ParameterServerService service(shard.get());
//   grpc::ServerBuilder builder;
//   LimitRequests(config.validation().max_message_bytes(), &builder);
//   builder.RegisterService(&service);
#ifndef TAMP_SERVER_SERVICE_H_
#define TAMP_SERVER_SERVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "proto/tamp.grpc.pb.h"
#include "server/shard.h"
#include "server/shard_host.h"
#include "server/worker_processes.h"

namespace tamp {

// Longest status message sent: gRPC sends it as metadata, percent-encoding bytes outside
// printable ASCII (3x), and clients drop a connection whose metadata passes 8 KiB.
inline constexpr size_t kMaxStatusMessageBytes = 2048;

// The same canonical code and message as a grpc::Status, the message cut to
// kMaxStatusMessageBytes.
grpc::Status ToGrpcStatus(const absl::Status& status);

// What a server takes from a request, set on its builder: at most `max_receive_bytes` per
// message (<= 2^31 - 1), and no compressed messages (UNIMPLEMENTED), since gRPC would inflate
// them before checking their size.
void LimitRequests(uint64_t max_receive_bytes, grpc::ServerBuilder* builder);

// A PushPullResponse on the wire (proto/tamp.proto): the answer's step and aggregate, then
// its update as a reference to PushAnswer::update's bytes (no copy).
grpc::ByteBuffer PushPullResponseBytes(const Shard::PushAnswer& answer);

// Ends a PushPull call with the shard's answer to its push (Shard::RoundDoneCallback's
// arguments): with `status` OK `response` is PushPullResponseBytes(*answer).
void FinishPushPull(grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* response,
                    const absl::Status& status, const Shard::PushAnswer* answer);

// One push's answer in a PushPullBatchResponse (Shard::RoundDoneCallback's arguments): the
// answer's step, update and aggregate with `status` OK, else its code and message.
void FillBatchedAnswer(uint32_t chunk_id, const absl::Status& status,
                       const Shard::PushAnswer* answer, rpc::BatchedAnswer* out);

class ParameterServerService final
    : public rpc::ParameterServer::WithRawCallbackMethod_PushPull<
          rpc::ParameterServer::CallbackService> {
 public:
  // `shard` (or `host`, for a shard made at the first handshake: server/shard_host.h) must
  // outlive the service and every call in flight (Shard::Close() answers the ones parked in
  // an unfinished step).
  explicit ParameterServerService(Shard* shard) : ParameterServerService(shard, "") {}
  // With a non-empty `job_token` (job/security.h LoadJobToken), every call must carry it
  // ("authorization: Bearer <token>" or "x-tamp-token: <token>", compared in constant time);
  // one that does not is answered UNAUTHENTICATED before anything else is read or changed.
  ParameterServerService(Shard* shard, std::string job_token)
      : own_host_(std::make_unique<ShardHost>(shard)),
        host_(*own_host_),
        job_token_(std::move(job_token)) {}
  ParameterServerService(ShardHost* host, std::string job_token)
      : host_(*host), job_token_(std::move(job_token)) {}

  grpc::ServerUnaryReactor* Handshake(grpc::CallbackServerContext* context,
                                      const rpc::HandshakeRequest* request,
                                      rpc::HandshakeResponse* response) override;
  // request: a PushPullRequest; response: a PushPullResponse (PushPullResponseBytes()).
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  // Each push as PushPull's, answered in one response once all are (proto/tamp.proto).
  grpc::ServerUnaryReactor* PushPullBatch(grpc::CallbackServerContext* context,
                                          const rpc::PushPullBatchRequest* request,
                                          rpc::PushPullBatchResponse* response) override;
  grpc::ServerUnaryReactor* PullWeights(grpc::CallbackServerContext* context,
                                        const rpc::PullWeightsRequest* request,
                                        rpc::PullWeightsResponse* response) override;
  grpc::ServerUnaryReactor* InitWeights(grpc::CallbackServerContext* context,
                                        const rpc::InitWeightsRequest* request,
                                        rpc::InitWeightsResponse* response) override;

 private:
  // OK when no token is configured or the call carries it; else UNAUTHENTICATED.
  absl::Status Admit(const grpc::CallbackServerContext& context) const;
  // host_.Ready(), or UNAVAILABLE (re-handshake) for a worker that sends the `incarnation`
  // of an earlier process of this server, which knows no tensors yet.
  absl::StatusOr<Shard*> ReadyFor(uint64_t incarnation) const;
  // The shard a push (PushPull, PushPullBatch) of `worker_rank`'s process `worker_process`
  // for server `incarnation` goes to, or why the worker may not push: UNAVAILABLE for an
  // earlier incarnation (re-handshake and pull), FAILED_PRECONDITION for a process another
  // one of its rank displaced.
  absl::StatusOr<Shard*> AcceptPush(const grpc::CallbackServerContext& context,
                                    uint32_t worker_rank, uint64_t worker_process,
                                    uint64_t incarnation);

  const std::unique_ptr<ShardHost> own_host_;  // When constructed from a Shard.
  ShardHost& host_;
  const std::string job_token_;
  // Which process holds each worker rank: the last whose handshake could train (Handshake());
  // pushes from another process of the rank are refused.
  WorkerProcesses worker_processes_;
  // By worker rank: why this server refused its last handshake, until one is accepted; told
  // to worker 0 when its broadcast waits on that worker (InitWeightsResponse.unread_refusals).
  // At most kMaxRefusalsKept ranks (the claimed rank is the peer's word).
  static constexpr size_t kMaxRefusalsKept = 1024;
  std::mutex refusals_mu_;
  absl::flat_hash_map<uint32_t, std::string> refused_handshakes_;  // Guarded by refusals_mu_.
};

}  // namespace tamp

#endif  // TAMP_SERVER_SERVICE_H_
