#include "tools/tamp/transport_probe.h"

#include <sys/resource.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/cpu_time.h"
#include "base/median.h"
#include "grpcpp/grpcpp.h"
#include "proto/tamp.grpc.pb.h"
#include "tools/tamp/summary.h"

namespace tamp::perf {
namespace {

// A burst as large as one worker's pushes of the example MLP (12 chunks), and enough
// bursts for a stable CPU figure: ~0.1 s of CPU per size on the development machine.
constexpr int kBurst = 12;
constexpr int kSmallBursts = 40;
constexpr int kLargeBursts = 8;
constexpr int kRepetitions = 3;  // Median of these.
constexpr size_t kLargeBytes = size_t{1} << 20;
constexpr int kMaxMessageBytes = 64 << 20;

// Answers every push at once with an empty update: the probe measures the transport, not a
// shard.
class EmptyAnswerService final : public rpc::ParameterServer::CallbackService {
 public:
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* context,
                                     const rpc::PushPullRequest* /*request*/,
                                     rpc::PushPullResponse* response) override {
    response->set_step(1);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// `bursts` bursts of kBurst concurrent PushPull calls carrying `request`, each burst waited
// for before the next. The first error, if any.
absl::Status CallInBursts(rpc::ParameterServer::Stub* stub, const rpc::PushPullRequest& request,
                          int bursts) {
  struct Call {
    grpc::ClientContext context;
    rpc::PushPullResponse response;
  };
  struct Burst {
    std::mutex mu;
    std::condition_variable done;
    grpc::Status failed = grpc::Status::OK;
    int left = 0;
  };
  Burst burst;
  for (int b = 0; b < bursts; ++b) {
    std::vector<Call> calls(kBurst);
    // Held while gRPC takes the calls, and taken by each callback first: gRPC core, which
    // hands a call to its callback's thread, is not built with ThreadSanitizer, so only this
    // lock shows TSan that what this thread wrote happens before the callbacks read it (as
    // worker/ps_client.h's handover_mu_). gRPC never runs a callback inside the call that
    // starts it. The callbacks capture one pointer, which std::function keeps inside itself.
    std::unique_lock<std::mutex> lock(burst.mu);
    burst.left = kBurst;
    for (Call& call : calls) {
      stub->async()->PushPull(&call.context, &request, &call.response,
                              [state = &burst](grpc::Status status) {
                                std::lock_guard<std::mutex> lock(state->mu);
                                if (!status.ok() && state->failed.ok()) state->failed = status;
                                if (--state->left == 0) state->done.notify_one();
                              });
    }
    burst.done.wait(lock, [&] { return burst.left == 0; });
    if (!burst.failed.ok()) {
      return absl::UnavailableError(absl::StrCat("transport probe: loopback PushPull failed: ",
                                                 burst.failed.error_message()));
    }
  }
  return absl::OkStatus();
}

// CPU time per call with a `payload_bytes` push: median of kRepetitions runs of `bursts`
// bursts, after one warm-up burst (connection set-up, buffer growth).
absl::StatusOr<double> CpuMsPerCall(rpc::ParameterServer::Stub* stub, size_t payload_bytes,
                                    int bursts) {
  rpc::PushPullRequest request;
  request.set_chunk_id(0);
  request.mutable_payload()->assign(payload_bytes, '\x5a');
  if (absl::Status warm = CallInBursts(stub, request, 1); !warm.ok()) return warm;
  std::vector<double> per_call;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    const double start = CpuMs(RUSAGE_SELF);
    if (absl::Status status = CallInBursts(stub, request, bursts); !status.ok()) return status;
    per_call.push_back((CpuMs(RUSAGE_SELF) - start) / (bursts * kBurst));
  }
  return Median(std::move(per_call));  // An odd count: the middle value.
}

}  // namespace

absl::StatusOr<TransportCpu> MeasureTransportCpu() {
  EmptyAnswerService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError("transport probe: cannot listen on a loopback port");
  }
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  std::unique_ptr<rpc::ParameterServer::Stub> stub = rpc::ParameterServer::NewStub(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                grpc::InsecureChannelCredentials(), args));

  absl::StatusOr<double> empty = CpuMsPerCall(stub.get(), 0, kSmallBursts);
  absl::StatusOr<double> large = empty.ok() ? CpuMsPerCall(stub.get(), kLargeBytes, kLargeBursts)
                                            : empty;
  server->Shutdown();
  if (!large.ok()) return large.status();
  // A call is two messages (the push and its answer); the large one carries kLargeBytes more.
  TransportCpu cpu;
  cpu.ms_per_message = *empty / 2;
  cpu.ms_per_byte = std::max(0.0, *large - *empty) / kLargeBytes;
  return cpu;
}

}  // namespace tamp::perf
