#include "worker/ps_client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "grpcpp/grpcpp.h"
#include "job/security.h"
#include "protocol/grpc_security.h"
#include "protocol/handshake.h"
#include "protocol/wire_message.h"

namespace tamp {
namespace {

constexpr int kMaxMessageBytes = 1 << 30;  // A shard's weights travel in one PullWeights.

// proto/tamp.proto's ParameterServer.PushPull, called raw (PsClient::PushPullRound); the
// service's name as the generated code spells it.
const std::string& PushPullMethod() {
  static const std::string* const method =
      new std::string(absl::StrCat("/", rpc::ParameterServer::service_full_name(), "/PushPull"));
  return *method;
}

// Reconnect(): waits between attempts, doubling.
constexpr auto kFirstBackoff = std::chrono::milliseconds(100);
constexpr auto kMaxBackoff = std::chrono::milliseconds(5000);

std::chrono::system_clock::time_point DeadlineIn(uint32_t ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

// Calls `ask` while it answers true ("not yet": the shard awaits someone else), sleeping
// `first`, then twice as long each time up to `most`, for up to `budget_ms`; then the error
// `late()` makes. An error of `ask` ends it at once.
absl::Status AskUntilAnswered(absl::FunctionRef<absl::StatusOr<bool>()> ask, uint32_t budget_ms,
                              std::chrono::milliseconds first, std::chrono::milliseconds most,
                              absl::FunctionRef<absl::Status()> late) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms);
  for (auto backoff = first;; backoff = std::min(backoff * 2, most)) {
    TAMP_ASSIGN_OR_RETURN(const bool waiting, ask());
    if (!waiting) return absl::OkStatus();
    if (std::chrono::steady_clock::now() + backoff > give_up) return late();
    std::this_thread::sleep_for(backoff);
  }
}

}  // namespace

absl::Status FromGrpc(const grpc::Status& status, absl::string_view context) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(context, status.error_message()));
}

bool IsServerGone(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsCancelled(status);
}

PsClient::PsClient(const config::RunConfig& config, const JobLayout& layout, uint32_t worker_rank,
                   std::vector<std::string> addresses)
    : config_(config), layout_(layout), worker_rank_(worker_rank), addresses_(std::move(addresses)) {}

absl::Status PsClient::OpenChannels() {
  // Admission and transport (job/security.h): the job token, TLS or allowed plaintext.
  TAMP_ASSIGN_OR_RETURN(job_token_, LoadJobToken(config_.cluster()));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  AddTlsChannelArguments(config_.cluster(), &args);
  for (const std::string& address : addresses_) {
    TAMP_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                          MakeChannelCredentials(config_.cluster(), address));
    std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(address, credentials, args);
    stubs_.push_back(rpc::ParameterServer::NewStub(channel));
    raw_stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
  }
  return absl::OkStatus();
}

PsClient::~PsClient() {
  std::unique_lock<std::mutex> lock(in_flight_mu_);
  all_released_.wait(lock, [this] { return in_flight_ == 0; });
}

std::string PsClient::ChunkName(uint32_t chunk_id) const {
  const ChunkPlan& plan = layout_.chunks[chunk_id];
  const TensorSpec& tensor = layout_.tensor_of(plan);
  const bool whole =
      plan.chunk.offset == 0 && static_cast<int64_t>(plan.chunk.length) == tensor.elements();
  return absl::StrCat("chunk ", chunk_id, " (tensor \"", tensor.name, "\"",
                      whole ? ""
                            : absl::StrCat(", elements ", plan.chunk.offset, "-",
                                           plan.chunk.offset + plan.chunk.length - 1),
                      ")");
}

std::string PsClient::Describe(uint32_t shard) const {
  return absl::StrCat("shard ", shard, " (", addresses_[shard], "): ");
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(
    const config::RunConfig& config, const JobLayout& layout, uint32_t worker_rank,
    const std::vector<std::string>& server_addresses, uint64_t steps_per_epoch,
    uint64_t total_steps) {
  if (server_addresses.size() != config.cluster().num_servers()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", server_addresses.size(), " server addresses but cluster.num_servers is ",
                     config.cluster().num_servers()));
  }
  std::unique_ptr<PsClient> client(new PsClient(config, layout, worker_rank, server_addresses));
  client->steps_per_epoch_ = steps_per_epoch;
  client->total_steps_ = total_steps;
  TAMP_RETURN_IF_ERROR(client->OpenChannels());
  client->incarnations_.assign(server_addresses.size(), 0);
  client->rank_pushed_.assign(server_addresses.size(), false);
  for (uint32_t shard = 0; shard < server_addresses.size(); ++shard) {
    TAMP_ASSIGN_OR_RETURN(const uint64_t latest, client->Handshake(shard, 0));
    client->latest_step_at_connect_ = std::max(client->latest_step_at_connect_, latest);
  }
  return client;
}

absl::StatusOr<uint64_t> PsClient::Handshake(uint32_t shard, uint64_t rejoin_at_step,
                                             int64_t wait_ms) {
  rpc::HandshakeRequest request;
  FillHandshake(layout_, config_, worker_rank_, shard, steps_per_epoch_, total_steps_, &request);
  request.set_rejoin_at_step(rejoin_at_step);
  request.set_worker_process(process_id_);
  rpc::HandshakeResponse response;
  grpc::ClientContext context;
  // Servers may still be starting: wait for the channel instead of failing fast.
  context.set_wait_for_ready(true);
  AttachJobToken(job_token_, &context);
  const bool connect_timeout = wait_ms <= 0;
  if (connect_timeout) wait_ms = config_.cluster().connect_timeout_ms();
  context.set_deadline(DeadlineIn(static_cast<uint32_t>(wait_ms)));
  grpc::Status status = stubs_[shard]->Handshake(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::UnavailableError(absl::StrCat(
        Describe(shard), "did not answer within ", wait_ms, " ms",
        connect_timeout ? " (cluster.connect_timeout_ms)" : "",
        "; is the server running at that address?",
        config_.cluster().has_tls()
            ? " With TLS, a failed TLS handshake looks the same: check that the certificates "
              "and CA of cluster.tls trust each other and are in date (this worker's stderr "
              "or the server's log says why, e.g. 'certificate verify failed')"
            : " A server that serves TLS (cluster.tls in its config) looks the same to a "
              "worker without cluster.tls"));
  }
  if (!status.ok()) {
    // UNAVAILABLE is the connection's (a server restarting), not the server's refusal.
    return FromGrpc(status, absl::StrCat(Describe(shard),
                                         status.error_code() == grpc::StatusCode::UNAVAILABLE
                                             ? "handshake failed: "
                                             : "handshake refused: "));
  }
  incarnations_[shard] = response.incarnation();
  displaced_another_process_ |= response.displaced_process();
  rank_pushed_[shard] = response.rank_pushed();
  return response.latest_step();
}

bool PsClient::rank_pushed() const {
  return std::find(rank_pushed_.begin(), rank_pushed_.end(), true) != rank_pushed_.end();
}

absl::StatusOr<bool> PsClient::Reconnect(uint32_t shard, absl::string_view cause) {
  const uint64_t known = incarnations_[shard];
  const auto budget = std::chrono::milliseconds(config_.checkpoint().reconnect_timeout_ms());
  const auto start = std::chrono::steady_clock::now();
  auto backoff = kFirstBackoff;
  for (int attempt = 1;; ++attempt) {
    // Each attempt waits for the server at most what is left of the budget.
    const auto left = budget - std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now() - start);
    const absl::StatusOr<uint64_t> answered = Handshake(
        shard, 0,
        std::clamp<int64_t>(left.count(), 1, config_.cluster().connect_timeout_ms()));
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    if (answered.ok()) {
      const bool restarted = incarnations_[shard] != known;
      LOG(WARNING) << "worker " << worker_rank_ << ": " << Describe(shard) << "back after "
                   << waited.count() << " ms and " << attempt << " attempt(s)"
                   << (restarted ? " (restarted)" : " (same process)");
      return restarted;
    }
    if (!IsServerGone(answered.status()) && !absl::IsDeadlineExceeded(answered.status())) {
      return answered.status();
    }
    if (waited + backoff > budget) {
      return absl::UnavailableError(absl::StrCat(
          Describe(shard), "did not come back within ", budget.count(),
          " ms (checkpoint.reconnect_timeout_ms) after ", cause, "; last: ",
          answered.status().message()));
    }
    LOG(WARNING) << "worker " << worker_rank_ << ": " << Describe(shard) << "unavailable ("
                 << answered.status().message() << "); attempt " << attempt << ", retrying in "
                 << backoff.count() << " ms";
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

absl::StatusOr<uint64_t> PsClient::AwaitRunEnd(absl::Span<float> params) {
  // The replica, not the exact weights: pulling those would drop the pull residual the
  // others' last answers still owe them.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(config_.cluster().rpc_timeout_ms());
  while (true) {
    TAMP_ASSIGN_OR_RETURN(const uint64_t step, Pull(params, /*replica=*/true));
    if (step >= total_steps_) {
      LOG(WARNING) << "worker " << worker_rank_ << ": the run ended (step " << total_steps_
                   << ") without it; it holds the final weights";
      return total_steps_;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "worker ", worker_rank_, " rejoining: no step is left to announce and the run did "
          "not end within ", config_.cluster().rpc_timeout_ms(),
          " ms (cluster.rpc_timeout_ms); the slowest shard is at step ", step, " of ",
          total_steps_));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

absl::StatusOr<uint64_t> PsClient::Rejoin(absl::Span<float> params) {
  constexpr int kAttempts = 5;
  constexpr auto kPollPeriod = std::chrono::milliseconds(5);
  absl::Status last;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    uint64_t latest = 0;
    for (uint32_t shard = 0; shard < stubs_.size(); ++shard) {
      TAMP_ASSIGN_OR_RETURN(const uint64_t shard_latest, Handshake(shard, 0));
      latest = std::max(latest, shard_latest);
    }
    if (latest >= total_steps_) return AwaitRunEnd(params);  // The run is over.
    // The step in progress (no chunk has completed it), unless a push of this rank is in it
    // (an earlier process's part of it) or it is step 0 (announced as a start, not a rejoin):
    // then the one after, which no chunk has started gathering. A refusal (a chunk moved past
    // the step, or took a push of this rank meanwhile) announces a step later.
    const bool step_in_progress_free = attempt == 0 && latest != 0 && !rank_pushed();
    const uint64_t target = std::min(step_in_progress_free ? latest : latest + 1, total_steps_);
    last = absl::OkStatus();
    for (uint32_t shard = 0; shard < stubs_.size() && last.ok(); ++shard) {
      last = Handshake(shard, target).status();
    }
    if (absl::IsFailedPrecondition(last)) continue;
    TAMP_RETURN_IF_ERROR(last);
    // Announced at the run's end: the steps left complete without this rank.
    if (target == total_steps_) return AwaitRunEnd(params);
    // Every chunk stops at `target` until this worker pushes it, so once the slowest is
    // there, all are, and the weights are those every other worker holds before `target`.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(config_.cluster().rpc_timeout_ms());
    while (true) {
      TAMP_ASSIGN_OR_RETURN(const uint64_t step, Pull(params, /*replica=*/true));
      if (step == target) return target;
      if (step > target) {  // Dropped again while waiting: announce a later step.
        last = absl::AbortedError(absl::StrCat("the shards passed step ", target,
                                               " before worker ", worker_rank_, " pushed it"));
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "worker ", worker_rank_, " rejoining at step ", target, ": the other workers did not "
            "reach it within ", config_.cluster().rpc_timeout_ms(),
            " ms (cluster.rpc_timeout_ms); the slowest shard is at step ", step));
      }
      std::this_thread::sleep_for(kPollPeriod);
    }
  }
  return absl::Status(last.code(), absl::StrCat("worker ", worker_rank_, " could not rejoin in ",
                                                kAttempts, " attempts: ", last.message()));
}

void PsClient::PrepareCall(grpc::ClientContext* context) const {
  context->set_deadline(DeadlineIn(config_.cluster().rpc_timeout_ms()));
  AttachJobToken(job_token_, context);
}

absl::StatusOr<uint64_t> PsClient::PullWeights(absl::Span<float> params,
                                               uint32_t min_generation) {
  return Pull(params, /*replica=*/false, min_generation);
}

absl::StatusOr<uint64_t> PsClient::Pull(absl::Span<float> params, bool replica,
                                        uint32_t min_generation) {
  uint64_t min_step = UINT64_MAX;
  for (uint32_t shard = 0; shard < stubs_.size(); ++shard) {
    TAMP_ASSIGN_OR_RETURN(const uint64_t step,
                          PullShard(shard, params, replica, min_generation));
    min_step = std::min(min_step, step);
  }
  return min_step;
}

absl::StatusOr<uint64_t> PsClient::PullShardWeights(uint32_t shard, absl::Span<float> params) {
  return PullShard(shard, params, /*replica=*/false);
}

absl::StatusOr<uint64_t> PsClient::PullShard(uint32_t shard, absl::Span<float> params,
                                             bool replica, uint32_t min_generation) {
  rpc::PullWeightsRequest request;
  request.set_worker_rank(worker_rank_);
  request.set_replica(replica);
  request.set_min_generation(min_generation);
  rpc::PullWeightsResponse response;
  // model.kind REGISTERED: worker 0 may not have set the initial weights yet; ask again
  // (backing off) for up to cluster.rpc_timeout_ms.
  TAMP_RETURN_IF_ERROR(AskUntilAnswered(
      [&]() -> absl::StatusOr<bool> {
        grpc::ClientContext context;
        PrepareCall(&context);
        const grpc::Status status = stubs_[shard]->PullWeights(&context, request, &response);
        if (!status.ok()) return FromGrpc(status, absl::StrCat(Describe(shard), "PullWeights: "));
        return response.awaiting_initial_weights();
      },
      config_.cluster().rpc_timeout_ms(), std::chrono::milliseconds(10),
      std::chrono::milliseconds(500), [&] {
        return absl::DeadlineExceededError(absl::StrCat(
            Describe(shard), "worker 0 did not ",
            min_generation > 1 ? "broadcast its weights" : "set the initial weights", " within ",
            config_.cluster().rpc_timeout_ms(), " ms (cluster.rpc_timeout_ms)",
            min_generation > 1 ? ": every worker must call the broadcast, worker 0 too" : ""));
      }));
  const std::vector<uint32_t> expected = layout_.ChunksOfShard(shard);
  if (static_cast<size_t>(response.chunks_size()) != expected.size()) {
    return absl::DataLossError(absl::StrCat(Describe(shard), "sent ", response.chunks_size(),
                                            " chunks of weights, expected ", expected.size()));
  }
  for (const rpc::ChunkWeights& weights : response.chunks()) {
    if (weights.chunk_id() >= layout_.chunks.size() ||
        layout_.chunks[weights.chunk_id()].chunk.shard != shard) {
      return absl::DataLossError(
          absl::StrCat(Describe(shard), "sent weights of chunk ", weights.chunk_id(),
                       ", which it does not own"));
    }
    const ChunkPlan& plan = layout_.chunks[weights.chunk_id()];
    if (weights.values().size() != plan.chunk.length * sizeof(float)) {
      return absl::DataLossError(absl::StrCat(Describe(shard), "chunk ", plan.chunk.id, " has ",
                                              weights.values().size(), " bytes of weights, expected ",
                                              plan.chunk.length * sizeof(float)));
    }
    std::memcpy(params.data() + layout_.flat_offset(plan), weights.values().data(),
                weights.values().size());
  }
  return response.step();
}

absl::Status PsClient::InitWeights(absl::Span<const float> params, uint32_t generation) {
  for (uint32_t shard = 0; shard < stubs_.size(); ++shard) {
    rpc::InitWeightsRequest request;
    request.set_worker_rank(worker_rank_);
    request.set_server_incarnation(incarnations_[shard]);
    request.set_generation(generation);
    for (uint32_t id : layout_.ChunksOfShard(shard)) {
      const ChunkPlan& plan = layout_.chunks[id];
      rpc::ChunkWeights* weights = request.add_chunks();
      weights->set_chunk_id(id);
      weights->set_values(reinterpret_cast<const char*>(params.data() + layout_.flat_offset(plan)),
                          plan.chunk.length * sizeof(float));
    }
    // A broadcast waits (backing off) until every worker has the generation it replaces, for
    // up to cluster.rpc_timeout_ms.
    rpc::InitWeightsResponse response;
    TAMP_RETURN_IF_ERROR(AskUntilAnswered(
        [&]() -> absl::StatusOr<bool> {
          grpc::ClientContext context;
          PrepareCall(&context);
          const grpc::Status status = stubs_[shard]->InitWeights(&context, request, &response);
          // ALREADY_EXISTS: an earlier process of this worker set them; they stand.
          if (!status.ok() && status.error_code() != grpc::StatusCode::ALREADY_EXISTS) {
            // The shard's own refusals start with "InitWeights:".
            absl::Status refused = FromGrpc(status, Describe(shard));
            if (generation > 1 && absl::IsFailedPrecondition(refused)) {
              refused = absl::FailedPreconditionError(absl::StrCat(
                  refused.message(), " (did the other workers go on without this broadcast? "
                  "Every worker must call the same broadcasts in the same order)"));
            }
            return refused;
          }
          return status.ok() && response.awaiting_readers();
        },
        config_.cluster().rpc_timeout_ms(), std::chrono::milliseconds(2),
        std::chrono::milliseconds(200), [&] {
          return absl::DeadlineExceededError(absl::StrCat(
              Describe(shard), "worker(s) ", absl::StrJoin(response.unread_workers(), ", "),
              " did not pull generation ", generation - 1,
              " of the job's weights (the initial weights are 1, each broadcast one more) "
              "within ", config_.cluster().rpc_timeout_ms(),
              " ms (cluster.rpc_timeout_ms): ",
              response.unread_refusals().empty()
                  ? "every worker must call the same broadcasts, in the same order"
                  : absl::StrCat("the server refused the handshake of ",
                                 absl::StrJoin(response.unread_refusals(), "; and of "),
                                 " (so it never pulls them: fix that worker)")));
        }));
  }
  return absl::OkStatus();
}

void PsClient::PushPull(uint64_t step, uint32_t chunk_id, std::string payload, PushPullDone done) {
  PushPullRound(step, 0, chunk_id, std::move(payload),
                [done = std::move(done)](absl::Status status, RoundAnswer answer) {
                  done(std::move(status), std::move(answer.update));
                });
}

void PsClient::PushPullRound(uint64_t step, uint32_t round, uint32_t chunk_id, std::string payload,
                             PushPullRoundDone done) {
  // One heap object per call keeps context, request and response alive until the callback.
  // The request goes raw: its payload is a slice of `payload` (protocol/wire_message.h), not
  // a copy the serializer makes of it.
  struct Call {
    grpc::ClientContext context;
    rpc::PushPullRequest fields;  // Every field but the payload; kept for error messages.
    std::shared_ptr<std::string> payload;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
    uint32_t shard = 0;
    PushPullRoundDone done;
  };
  auto* call = new Call;
  call->shard = layout_.chunks[chunk_id].chunk.shard;
  call->fields.set_worker_rank(worker_rank_);
  call->fields.set_step(step);
  call->fields.set_chunk_id(chunk_id);
  call->fields.set_round(round);
  call->fields.set_server_incarnation(incarnations_[call->shard]);
  call->fields.set_worker_process(process_id_);
  call->payload = std::make_shared<std::string>(std::move(payload));
  call->request = WithBytesField(call->fields, rpc::PushPullRequest::kPayloadFieldNumber,
                                 SharedSlice(call->payload));
  call->done = std::move(done);
  PrepareCall(&call->context);
  // Held until gRPC has the call; the callback takes it first (see handover_mu_). gRPC never
  // runs a client callback inside the call that starts it, so this thread never waits on
  // itself. The callback captures two pointers, which std::function keeps inside itself:
  // gRPC moves it to the callback's thread, and nothing this thread wrote is read before the
  // lock.
  {
    std::lock_guard<std::mutex> lock(in_flight_mu_);
    ++in_flight_;
  }
  std::lock_guard<std::mutex> handing_over(handover_mu_);
  raw_stubs_[call->shard]->UnaryCall(
      &call->context, PushPullMethod(), grpc::StubOptions(), &call->request, &call->response,
      [this, call](grpc::Status status) {
        { std::lock_guard<std::mutex> handed_over(handover_mu_); }
        std::unique_ptr<Call> owned(call);
        auto where = [this, &owned] {
          const rpc::PushPullRequest& request = owned->fields;
          return absl::StrCat(Describe(owned->shard), "PushPull of ", ChunkName(request.chunk_id()),
                              " step ", request.step(),
                              request.round() == 0 ? "" : absl::StrCat(" round ", request.round()),
                              ": ");
        };
        absl::Status result;
        RoundAnswer answer;
        if (status.ok()) {
          rpc::PushPullResponse response;
          const grpc::Status parsed =
              grpc::SerializationTraits<rpc::PushPullResponse>::Deserialize(&owned->response,
                                                                           &response);
          if (parsed.ok()) {
            answer.update = std::move(*response.mutable_payload());
            answer.aggregate = std::move(*response.mutable_aggregate());
          } else {
            result = absl::DataLossError(absl::StrCat(
                where(), "the answer is not a tamp.rpc.PushPullResponse (",
                parsed.error_message(), ")"));
          }
        } else {
          result = FromGrpc(status, where());
        }
        // The payload goes back to the caller (to push it again); gRPC has let go of its
        // slice once the call is over, else it is copied.
        owned->request.Clear();
        if (owned->payload.use_count() == 1) {
          std::atomic_thread_fence(std::memory_order_acquire);  // gRPC's last read of it.
          answer.pushed = std::move(*owned->payload);
        } else {
          answer.pushed = *owned->payload;
        }
        const PushPullRoundDone done = std::move(owned->done);
        owned.reset();  // The call, and its context's channel reference, before ~PsClient().
        done(std::move(result), std::move(answer));
        std::lock_guard<std::mutex> lock(in_flight_mu_);
        if (--in_flight_ == 0) all_released_.notify_all();
        // Nothing of `this` is touched past this point: ~PsClient() may be running.
      });
}

void PsClient::PushPullBatch(uint32_t shard, uint64_t step, std::vector<BatchedPush> pushes) {
  // As PushPullRound(), one heap object per call until the callback. Batched chunks are small
  // (below cluster.fusion_bytes), so their payloads are copied into the request and each
  // handed back from `pushes`.
  struct Call {
    grpc::ClientContext context;
    rpc::PushPullBatchRequest request;
    rpc::PushPullBatchResponse response;
    std::vector<BatchedPush> pushes;
  };
  auto* call = new Call;
  call->request.set_worker_rank(worker_rank_);
  call->request.set_step(step);
  call->request.set_server_incarnation(incarnations_[shard]);
  call->request.set_worker_process(process_id_);
  for (const BatchedPush& push : pushes) {
    rpc::BatchedPush* out = call->request.add_pushes();
    out->set_chunk_id(push.chunk_id);
    out->set_round(push.round);
    out->set_payload(push.payload);
  }
  call->pushes = std::move(pushes);
  PrepareCall(&call->context);
  {
    std::lock_guard<std::mutex> lock(in_flight_mu_);
    ++in_flight_;
  }
  std::lock_guard<std::mutex> handing_over(handover_mu_);
  stubs_[shard]->async()->PushPullBatch(
      &call->context, &call->request, &call->response,
      [this, call, shard, step](grpc::Status status) {
        { std::lock_guard<std::mutex> handed_over(handover_mu_); }
        std::unique_ptr<Call> owned(call);
        auto where = [&](const BatchedPush& push) {
          return absl::StrCat(Describe(shard), "PushPull of ", ChunkName(push.chunk_id), " step ",
                              step, push.round == 0 ? "" : absl::StrCat(" round ", push.round),
                              " (in a batch of ", owned->pushes.size(), "): ");
        };
        const int size = static_cast<int>(owned->pushes.size());
        absl::Status whole;
        if (!status.ok()) {
          whole = FromGrpc(status, "");
        } else if (owned->response.answers_size() != size) {
          whole = absl::DataLossError(absl::StrCat("the answer holds ",
                                                   owned->response.answers_size(),
                                                   " answers for ", size, " pushes"));
        }
        std::vector<std::pair<absl::Status, RoundAnswer>> answers(size);
        for (int i = 0; i < size; ++i) {
          BatchedPush& push = owned->pushes[i];
          auto& [result, answer] = answers[i];
          if (!whole.ok()) {
            result = absl::Status(whole.code(), absl::StrCat(where(push), whole.message()));
          } else {
            rpc::BatchedAnswer& got = *owned->response.mutable_answers(i);
            if (got.chunk_id() != push.chunk_id) {
              result = absl::DataLossError(absl::StrCat(where(push), "answered for chunk ",
                                                        got.chunk_id()));
            } else if (got.code() != 0) {
              result = FromGrpc(grpc::Status(static_cast<grpc::StatusCode>(got.code()),
                                             got.message()),
                                where(push));
            } else {
              answer.update = std::move(*got.mutable_payload());
              answer.aggregate = std::move(*got.mutable_aggregate());
            }
          }
          answer.pushed = std::move(push.payload);
        }
        std::vector<PushPullRoundDone> done;
        done.reserve(size);
        for (BatchedPush& push : owned->pushes) done.push_back(std::move(push.done));
        owned.reset();  // The call, and its context's channel reference, before ~PsClient().
        for (int i = 0; i < size; ++i) {
          done[i](std::move(answers[i].first), std::move(answers[i].second));
        }
        std::lock_guard<std::mutex> lock(in_flight_mu_);
        if (--in_flight_ == 0) all_released_.notify_all();
        // Nothing of `this` is touched past this point: ~PsClient() may be running.
      });
}

}  // namespace tamp
