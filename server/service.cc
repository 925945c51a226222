#include "server/service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "server/handshake.h"

namespace tamp {
namespace {

static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) ==
                  static_cast<int>(grpc::StatusCode::UNAUTHENTICATED),
              "absl and gRPC both use the canonical (google.rpc.Code) numbering");

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

grpc::ServerUnaryReactor* ParameterServerService::Handshake(grpc::CallbackServerContext* context,
                                                            const rpc::HandshakeRequest* request,
                                                            rpc::HandshakeResponse* response) {
  absl::Status status = CheckHandshake(shard_.layout(), shard_.config(), shard_.rank(), *request);
  // The first accepted handshake fixes the run's length for the schedule; later ones must agree.
  if (status.ok()) {
    status = shard_.FixRunLength(request->steps_per_epoch(), request->total_steps());
  }
  if (!status.ok()) {
    LOG(WARNING) << "refused handshake from " << context->peer() << ": " << status;
    return FinishNow(context, status);
  }
  LOG(INFO) << "worker " << request->worker_rank() << " joined from " << context->peer();
  response->set_server_rank(shard_.rank());
  response->set_step(shard_.step());
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ParameterServerService::PushPull(grpc::CallbackServerContext* context,
                                                           const rpc::PushPullRequest* request,
                                                           rpc::PushPullResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The call (and so `response`) stays alive until Finish, which may come from another
  // worker's push; the request's payload is only read inside PushPull.
  shard_.PushPullRound(
      request->worker_rank(), request->step(), request->round(), request->chunk_id(),
      request->payload(),
      [reactor, response](absl::Status status, const Shard::PushAnswer* answer) {
        if (status.ok()) {
          response->set_step(answer->step);
          response->set_payload(*answer->update);
          response->set_aggregate(*answer->aggregate);
        }
        reactor->Finish(ToGrpcStatus(status));
      });
  return reactor;
}

grpc::ServerUnaryReactor* ParameterServerService::PullWeights(
    grpc::CallbackServerContext* context, const rpc::PullWeightsRequest* request,
    rpc::PullWeightsResponse* response) {
  const uint32_t num_workers = shard_.config().cluster().num_workers();
  if (request->worker_rank() >= num_workers) {
    return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                                  "worker ", request->worker_rank(), " out of range: the job has ",
                                  num_workers, " workers")));
  }
  // A copy of the shard's weights under short per-chunk locks; no waiting on other calls.
  return FinishNow(context, shard_.PullWeights(response));
}

}  // namespace tamp
