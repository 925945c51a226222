#include "server/service.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "job/security.h"
#include "protocol/grpc_security.h"
#include "protocol/handshake.h"
#include "protocol/wire_message.h"
#include "server/refusal_log.h"

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
  absl::string_view message = status.message();
  std::string cut;
  if (message.size() > kMaxStatusMessageBytes) {
    cut = absl::StrCat(message.substr(0, kMaxStatusMessageBytes), "...(", message.size(),
                       " bytes)");
    message = cut;
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(message));
}

void LimitRequests(uint64_t max_receive_bytes, grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(static_cast<int>(max_receive_bytes));
  // gRPC 1.51 checks the size limit on the compressed message and again only after
  // inflating it whole, so a small compressed request could take any amount of memory.
  // Workers never compress (codecs do), so the server takes no compressed request at all:
  // calls that announce gzip or deflate are refused UNIMPLEMENTED from their metadata, and
  // the decompression filter is off, so even a message that got past that stays as small as
  // it came.
  builder->SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder->SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  builder->AddChannelArgument(GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, 0);
}

absl::Status ParameterServerService::Admit(const grpc::CallbackServerContext& context) const {
  if (job_token_.empty() || TokensEqual(PresentedToken(context), job_token_)) {
    return absl::OkStatus();
  }
  TAMP_LOG_REFUSAL(WARNING, absl::StrCat("refused a call with a missing or wrong job token "
                                         "from ", context.peer()));
  return absl::UnauthenticatedError(
      "missing or wrong job token (cluster.job_token_file, else $TAMP_JOB_TOKEN)");
}

grpc::ServerUnaryReactor* ParameterServerService::Handshake(grpc::CallbackServerContext* context,
                                                            const rpc::HandshakeRequest* request,
                                                            rpc::HandshakeResponse* response) {
  if (absl::Status admitted = Admit(*context); !admitted.ok()) return FinishNow(context, admitted);
  // A process another one displaced from its rank never takes it back (server/worker_processes.h).
  if (absl::Status displaced = worker_processes_.CheckNotDisplaced(
          request->worker_rank(), request->worker_process(), host_.rank());
      !displaced.ok()) {
    TAMP_LOG_REFUSAL(WARNING, absl::StrCat("refused handshake from ", context->peer(), ": ",
                                           displaced.message()));
    return FinishNow(context, displaced);
  }
  // Checks the worker's view of the job, fixes the run's length and counts a rejoining worker
  // again, all or nothing; with model.kind REGISTERED the first accepted handshake also makes
  // the shard from the worker's tensors.
  const absl::StatusOr<Shard*> found = host_.Join(*request);
  const absl::Status& status = found.status();
  {
    std::lock_guard<std::mutex> lock(refusals_mu_);
    if (status.ok()) {
      refused_handshakes_.erase(request->worker_rank());
    } else if (refused_handshakes_.size() < kMaxRefusalsKept ||
               refused_handshakes_.contains(request->worker_rank())) {
      refused_handshakes_[request->worker_rank()] =
          std::string(status.message().substr(0, kMaxStatusMessageBytes / 4));
    }
  }
  if (!status.ok()) {
    TAMP_LOG_REFUSAL(WARNING, absl::StrCat("refused handshake from ", context->peer(), ": ",
                                           status.ToString()));
    return FinishNow(context, status);
  }
  Shard& shard = **found;
  // A handshake that only looks (mid-run, announcing no step: a late starter that will
  // rejoin or be refused) takes no rank over; one that can train does.
  const bool can_train = request->rejoin_at_step() != 0 || shard.latest_step() == 0;
  const bool displaced =
      can_train && worker_processes_.Joined(request->worker_rank(), request->worker_process());
  if (displaced) {
    LOG(WARNING) << absl::StrCat("worker ", request->worker_rank(), ": process ",
                                 absl::Hex(request->worker_process()),
                                 " took the rank over from another process (a replacement, or "
                                 "a second process started with rank ",
                                 request->worker_rank(), ")");
  }
  LOG(INFO) << "worker " << request->worker_rank()
            << (request->rejoin_at_step() == 0
                    ? " joined"
                    : absl::StrCat(" rejoined at step ", request->rejoin_at_step()))
            << " from " << context->peer();
  response->set_server_rank(shard.rank());
  response->set_displaced_process(displaced);
  response->set_rank_pushed(shard.HoldsPushOf(request->worker_rank()));
  response->set_step(shard.step());
  response->set_latest_step(shard.latest_step());
  response->set_incarnation(shard.incarnation());
  return FinishNow(context, absl::OkStatus());
}

grpc::ByteBuffer PushPullResponseBytes(const Shard::PushAnswer& answer) {
  rpc::PushPullResponse fields;
  fields.set_step(answer.step);
  fields.set_aggregate(*answer.aggregate);
  return WithBytesField(fields, rpc::PushPullResponse::kPayloadFieldNumber,
                        answer.update == nullptr ? grpc::Slice() : SharedSlice(answer.update));
}

void FinishPushPull(grpc::ServerUnaryReactor* reactor, grpc::ByteBuffer* response,
                    const absl::Status& status, const Shard::PushAnswer* answer) {
  if (status.ok()) *response = PushPullResponseBytes(*answer);
  reactor->Finish(ToGrpcStatus(status));
}

grpc::ServerUnaryReactor* ParameterServerService::PushPull(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request_bytes,
                                                           grpc::ByteBuffer* response) {
  if (absl::Status admitted = Admit(*context); !admitted.ok()) return FinishNow(context, admitted);
  rpc::PushPullRequest request;
  {
    grpc::ByteBuffer bytes(*request_bytes);  // Shares the slices; parsing consumes it.
    const grpc::Status parsed =
        grpc::SerializationTraits<rpc::PushPullRequest>::Deserialize(&bytes, &request);
    if (!parsed.ok()) {
      TAMP_LOG_REFUSAL(WARNING, absl::StrCat("refused a PushPull that is not a PushPullRequest "
                                             "from ", context->peer()));
      return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                                    "PushPull: the request is not a tamp.rpc.PushPullRequest (",
                                    parsed.error_message(), ")")));
    }
  }
  const absl::StatusOr<Shard*> accepted = AcceptPush(
      *context, request.worker_rank(), request.worker_process(), request.server_incarnation());
  if (!accepted.ok()) return FinishNow(context, accepted.status());
  Shard& shard = **accepted;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The call (and so `response`) stays alive until Finish, which may come from another
  // worker's push; the request's payload is only read inside PushPullRound.
  shard.PushPullRound(
      request.worker_rank(), request.step(), request.round(), request.chunk_id(),
      request.payload(),
      [reactor, response](absl::Status status, const Shard::PushAnswer* answer) {
        FinishPushPull(reactor, response, status, answer);
      });
  return reactor;
}

absl::StatusOr<Shard*> ParameterServerService::ReadyFor(uint64_t incarnation) const {
  absl::StatusOr<Shard*> ready = host_.Ready();
  // A worker that knows an incarnation handshook with an earlier process of this server: it
  // restarted (model.kind REGISTERED learns the tensors again at the first handshake), and
  // the worker must re-handshake, as for any restart, not give up.
  if (!ready.ok() && incarnation != 0) {
    return absl::UnavailableError(absl::StrCat("server ", host_.rank(),
                                               " restarted: re-handshake and pull its weights"));
  }
  return ready;
}

grpc::ServerUnaryReactor* ParameterServerService::PullWeights(
    grpc::CallbackServerContext* context, const rpc::PullWeightsRequest* request,
    rpc::PullWeightsResponse* response) {
  if (absl::Status admitted = Admit(*context); !admitted.ok()) return FinishNow(context, admitted);
  const absl::StatusOr<Shard*> ready = host_.Ready();
  if (!ready.ok()) return FinishNow(context, ready.status());
  // A copy of the shard's weights under short per-chunk locks; no waiting on other calls.
  // ASYNC / SSP: also resets this worker's view (server/shard.h). Checks the worker's rank.
  return FinishNow(context, request->replica()
                                ? (*ready)->PullReplica(request->worker_rank(), response)
                                : (*ready)->PullWeights(request->worker_rank(), response,
                                                        request->min_generation()));
}

grpc::ServerUnaryReactor* ParameterServerService::InitWeights(
    grpc::CallbackServerContext* context, const rpc::InitWeightsRequest* request,
    rpc::InitWeightsResponse* response) {
  if (absl::Status admitted = Admit(*context); !admitted.ok()) return FinishNow(context, admitted);
  const absl::StatusOr<Shard*> ready = ReadyFor(request->server_incarnation());
  if (!ready.ok()) return FinishNow(context, ready.status());
  if (request->server_incarnation() != 0 &&
      request->server_incarnation() != (*ready)->incarnation()) {
    return FinishNow(context, absl::UnavailableError(absl::StrCat(
                                  "server ", (*ready)->rank(), " restarted: re-handshake")));
  }
  const absl::Status set = (*ready)->InitWeights(request->worker_rank(), *request, response);
  if (set.ok()) {
    std::lock_guard<std::mutex> lock(refusals_mu_);
    for (uint32_t worker : response->unread_workers()) {
      if (const auto refused = refused_handshakes_.find(worker);
          refused != refused_handshakes_.end()) {
        response->add_unread_refusals(absl::StrCat("worker ", worker, ": ", refused->second));
      }
    }
  }
  return FinishNow(context, set);
}


absl::StatusOr<Shard*> ParameterServerService::AcceptPush(
    const grpc::CallbackServerContext& context, uint32_t worker_rank, uint64_t worker_process,
    uint64_t incarnation) {
  TAMP_ASSIGN_OR_RETURN(Shard * shard, ReadyFor(incarnation));
  // A worker that knows an earlier process of this server must resync before pushing
  // (server/shard.h, "Checkpoints and restarts").
  if (incarnation != 0 && incarnation != shard->incarnation()) {
    return absl::UnavailableError(absl::StrCat("server ", shard->rank(), " restarted (incarnation ",
                                               shard->incarnation(), ", push was for ",
                                               incarnation, "): re-handshake and pull its weights"));
  }
  // Two processes with one rank: the one another displaced since is told so.
  if (absl::Status holder = worker_processes_.CheckHolder(worker_rank, worker_process, shard->rank());
      !holder.ok()) {
    TAMP_LOG_REFUSAL(WARNING, absl::StrCat("refused a push from ", context.peer(), ": ",
                                           holder.message()));
    return holder;
  }
  return shard;
}

void FillBatchedAnswer(uint32_t chunk_id, const absl::Status& status,
                       const Shard::PushAnswer* answer, rpc::BatchedAnswer* out) {
  out->set_chunk_id(chunk_id);
  if (status.ok()) {
    out->set_step(answer->step);
    if (answer->update != nullptr) out->set_payload(*answer->update);
    if (answer->aggregate != nullptr) out->set_aggregate(*answer->aggregate);
    return;
  }
  const grpc::Status wire = ToGrpcStatus(status);
  out->set_code(static_cast<int32_t>(wire.error_code()));
  out->set_message(wire.error_message());
}

grpc::ServerUnaryReactor* ParameterServerService::PushPullBatch(
    grpc::CallbackServerContext* context, const rpc::PushPullBatchRequest* request,
    rpc::PushPullBatchResponse* response) {
  if (absl::Status admitted = Admit(*context); !admitted.ok()) return FinishNow(context, admitted);
  // Refused whole, before any push is taken: a refusal changes nothing.
  if (request->pushes().empty()) {
    return FinishNow(context, absl::InvalidArgumentError("PushPullBatch: the batch holds no push"));
  }
  absl::flat_hash_set<uint32_t> chunks;
  for (const rpc::BatchedPush& push : request->pushes()) {
    if (!chunks.insert(push.chunk_id()).second) {
      TAMP_LOG_REFUSAL(WARNING, absl::StrCat("refused a PushPullBatch from ", context->peer(),
                                             " holding chunk ", push.chunk_id(), " twice"));
      return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                                    "PushPullBatch: chunk ", push.chunk_id(),
                                    " is pushed twice in one batch")));
    }
  }
  const absl::StatusOr<Shard*> accepted = AcceptPush(
      *context, request->worker_rank(), request->worker_process(), request->server_incarnation());
  if (!accepted.ok()) return FinishNow(context, accepted.status());
  Shard& shard = **accepted;
  // Each push's callback fills its own answer (sized up front, so no two threads touch one
  // element); the last one to call back ends the call. The request and response live until
  // then.
  struct Batch {
    grpc::ServerUnaryReactor* reactor;
    rpc::PushPullBatchResponse* response;
    std::atomic<int> unanswered;
  };
  const int size = request->pushes_size();
  for (int i = 0; i < size; ++i) response->add_answers();
  auto batch = std::make_shared<Batch>();
  batch->reactor = context->DefaultReactor();
  batch->response = response;
  batch->unanswered.store(size, std::memory_order_relaxed);
  for (int i = 0; i < size; ++i) {
    const rpc::BatchedPush& push = request->pushes(i);
    shard.PushPullRound(
        request->worker_rank(), request->step(), push.round(), push.chunk_id(), push.payload(),
        [batch, i, chunk = push.chunk_id()](absl::Status status, const Shard::PushAnswer* answer) {
          FillBatchedAnswer(chunk, status, answer, batch->response->mutable_answers(i));
          if (batch->unanswered.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            batch->reactor->Finish(grpc::Status::OK);
          }
        });
  }
  return batch->reactor;
}

}  // namespace tamp
