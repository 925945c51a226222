// Hostile input against a live service (issues 7 and 18): shard 0 of the test job behind real
// gRPC on loopback, configured as tamp_server configures it (LimitRequests, gRPC's log lines
// through the refusal log), with a job token and a small max receive size, takes thousands of
// malformed requests from several threads at once: random bytes, truncated and extended valid
// payloads, empty payloads, wrong chunk ids, steps, rounds and worker ranks, NaN / Inf
// gradients, oversize and compressed messages, missing or wrong tokens, bad PullWeights and
// Handshake requests (wrong run length, a rejoin far ahead, a huge tensor name). Every answer
// must carry the code its fault calls for, the shard's whole state (every chunk's Snapshot, the
// run's length, the membership) must be as before, and one valid step must still give the
// closed-form update. Then one category at a time, each followed by the same state check:
// refused handshakes (nothing fixed), rejoin steps (bounded by the shard's own step), a gzip
// bomb (refused before it is inflated: the process's resident memory is sampled), long
// request strings (the refusal still reaches the client, bounded), a flood of refusals (the
// bytes written to stderr are bounded) and a blank TAMP_JOB_TOKEN (refused, not "no token").
// Then the nonfinite_policy variants (SKIP, ALLOW, overflow of the sum, ASYNC) through the
// Shard.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "compress/registry.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "job/security.h"
#include "protocol/handshake.h"
#include "server/refusal_log.h"
#include "server/service.h"
#include "server/shard.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::EncodePush;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;
using ::tamp::testing::TestLayout;

constexpr char kToken[] = "hostile-test-token";
constexpr int kWorkers = 2;
constexpr int kMaxReceiveBytes = 64 << 10;
constexpr int kThreads = 4;
constexpr int kRequestsPerThread = 800;

// Bitwise equality of two snapshots (floats compared as bytes: NaN == NaN, -0 != +0).
template <typename T>
bool SameBytes(const std::vector<T>& a, const std::vector<T>& b) {
  // Empty vectors may hold null data(), and memcmp with null is undefined even for 0 bytes.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}
void ExpectIdentical(const Shard::ChunkSnapshot& before, const Shard::ChunkSnapshot& after,
                     uint32_t id) {
  EXPECT_EQ(before.step, after.step) << "chunk " << id;
  EXPECT_EQ(before.round, after.round) << "chunk " << id;
  EXPECT_TRUE(SameBytes(before.weights, after.weights)) << "chunk " << id;
  EXPECT_TRUE(SameBytes(before.accumulator, after.accumulator)) << "chunk " << id;
  EXPECT_EQ(before.arrived, after.arrived) << "chunk " << id;
  EXPECT_TRUE(SameBytes(before.pull_residual, after.pull_residual)) << "chunk " << id;
  EXPECT_EQ(before.worker_steps, after.worker_steps) << "chunk " << id;
  ASSERT_EQ(before.views.size(), after.views.size()) << "chunk " << id;
  for (size_t w = 0; w < before.views.size(); ++w) {
    EXPECT_TRUE(SameBytes(before.views[w], after.views[w])) << "chunk " << id << " view " << w;
  }
  EXPECT_EQ(before.nonfinite_skipped, after.nonfinite_skipped) << "chunk " << id;
}

// Everything a request could change: every chunk, the run's length, the membership.
struct ShardState {
  std::vector<uint32_t> ids;
  std::vector<Shard::ChunkSnapshot> chunks;
  Shard::RunLength run_length;
  std::vector<Shard::Membership> members;
};
ShardState Capture(const Shard& shard) {
  ShardState state;
  state.ids = shard.chunk_ids();
  for (uint32_t id : state.ids) state.chunks.push_back(*shard.Snapshot(id));
  state.run_length = shard.run_length();
  state.members = shard.members();
  return state;
}
void ExpectSameState(const ShardState& before, const ShardState& after) {
  ASSERT_EQ(before.ids, after.ids);
  for (size_t k = 0; k < before.ids.size(); ++k) {
    ExpectIdentical(before.chunks[k], after.chunks[k], before.ids[k]);
  }
  EXPECT_TRUE(before.run_length == after.run_length)
      << "run length " << before.run_length.steps_per_epoch << "/"
      << before.run_length.total_steps << " became " << after.run_length.steps_per_epoch << "/"
      << after.run_length.total_steps;
  ASSERT_EQ(before.members.size(), after.members.size());
  for (size_t w = 0; w < before.members.size(); ++w) {
    EXPECT_TRUE(before.members[w] == after.members[w])
        << "worker " << w << " from step " << before.members[w].from_step << " became "
        << after.members[w].from_step << (after.members[w].dropped ? " (dropped)" : "");
  }
}

// The process's resident memory, from /proc/self/statm.
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// A gradient with NaN and infinities among ordinary values.
std::vector<float> NonFiniteGradient(size_t n, uint64_t step, uint32_t worker) {
  std::vector<float> g = TestGradient(n, step, worker);
  g[1] = std::numeric_limits<float>::infinity();
  g[n / 2] = -std::numeric_limits<float>::infinity();
  g[n - 1] = std::numeric_limits<float>::quiet_NaN();
  return g;
}

// The faults; each has one expected code.
enum class Fault {
  kRandomBytes,
  kTruncated,
  kExtended,
  kEmpty,
  kChunkOutOfRange,
  kChunkOfOtherShard,
  kFutureStep,
  kWorkerOutOfRange,
  kRoundOutOfRange,
  kNonFinite,
  kOversize,
  kNoToken,
  kWrongToken,
  kPullWeightsBadWorker,
  kHandshakeBadWorker,
  kHandshakeBadVersion,
  kHandshakeBadRunLength,
  kHandshakeFarRejoin,
  kHandshakeLongTensor,
  kCompressed,
  kCount,
};

grpc::StatusCode Expected(Fault fault) {
  switch (fault) {
    case Fault::kChunkOfOtherShard:
      return grpc::StatusCode::NOT_FOUND;
    case Fault::kFutureStep:
    case Fault::kHandshakeBadVersion:
    case Fault::kHandshakeBadRunLength:  // Another run length than the one fixed.
    case Fault::kHandshakeLongTensor:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case Fault::kCompressed:
      return grpc::StatusCode::UNIMPLEMENTED;
    case Fault::kOversize:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case Fault::kNoToken:
    case Fault::kWrongToken:
      return grpc::StatusCode::UNAUTHENTICATED;
    default:
      return grpc::StatusCode::INVALID_ARGUMENT;
  }
}

class HostileTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string codec = GetParam();
    config_ = TestConfig([&](config::RunConfig& c) {
      config::Codec* push = c.mutable_compression()->mutable_default_compression()->mutable_push();
      push->set_name(codec);
      if (codec == "topk") push->set_ratio(0.1);
    });
    layout_ = TestLayout(config_);
    absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config_, layout_, 0);
    ASSERT_TRUE(shard.ok()) << shard.status();
    shard_ = *std::move(shard);
    service_ = std::make_unique<ParameterServerService>(shard_.get(), kToken);
    RouteGrpcLogsThroughRefusalLog();
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    LimitRequests(kMaxReceiveBytes, &builder);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials());
    stub_ = rpc::ParameterServer::NewStub(channel_);
  }

  void TearDown() override {
    if (server_ == nullptr) return;
    shard_->Close(absl::UnavailableError("server shutting down"));
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  size_t Length(uint32_t chunk) const { return layout_.chunks[chunk].chunk.length; }

  // A context with a deadline and, unless told otherwise, the right token.
  static void Prepare(grpc::ClientContext* context, const std::string& token = kToken) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  }

  grpc::Status Push(const rpc::PushPullRequest& request, const std::string& token = kToken,
                    grpc_compression_algorithm compression = GRPC_COMPRESS_NONE) {
    grpc::ClientContext context;
    Prepare(&context, token);
    if (compression != GRPC_COMPRESS_NONE) context.set_compression_algorithm(compression);
    rpc::PushPullResponse response;
    return stub_->PushPull(&context, request, &response);
  }

  grpc::Status Hello(const rpc::HandshakeRequest& request) {
    grpc::ClientContext context;
    Prepare(&context);
    rpc::HandshakeResponse response;
    return stub_->Handshake(&context, request, &response);
  }

  // Worker `worker`'s handshake with the run length 16 steps per epoch, 32 steps (the test
  // job's 2 epochs), announcing `rejoin_at_step`.
  rpc::HandshakeRequest HelloFrom(uint32_t worker, uint64_t rejoin_at_step = 0) const {
    rpc::HandshakeRequest hello;
    FillHandshake(layout_, config_, worker, 0, 16, 32, &hello);
    hello.set_rejoin_at_step(rejoin_at_step);
    return hello;
  }

  // One request with `fault`, drawn with `rng`; returns its answer's code.
  grpc::StatusCode Send(Fault fault, std::mt19937_64& rng) {
    const std::vector<uint32_t>& mine = shard_->chunk_ids();
    const uint32_t chunk = mine[rng() % mine.size()];
    const uint32_t worker = rng() % kWorkers;
    const std::string valid =
        EncodePush(config_, layout_, 0, chunk, worker, TestGradient(Length(chunk), 0, worker));
    rpc::PushPullRequest request;
    request.set_worker_rank(worker);
    request.set_step(0);
    request.set_chunk_id(chunk);
    request.set_payload(valid);
    std::string token = kToken;
    switch (fault) {
      case Fault::kRandomBytes: {
        std::string bytes(rng() % 6000, '\0');
        for (char& c : bytes) c = static_cast<char>(rng());
        request.set_payload(bytes);
        break;
      }
      case Fault::kTruncated:
        request.set_payload(valid.substr(0, rng() % valid.size()));
        break;
      case Fault::kExtended: {
        std::string longer = valid;
        const size_t extra = 1 + rng() % 64;
        for (size_t i = 0; i < extra; ++i) longer.push_back(static_cast<char>(rng()));
        request.set_payload(longer);
        break;
      }
      case Fault::kEmpty:
        request.clear_payload();
        break;
      case Fault::kChunkOutOfRange:
        request.set_chunk_id(static_cast<uint32_t>(layout_.chunks.size() + rng() % 1000000));
        break;
      case Fault::kChunkOfOtherShard: {
        const std::vector<uint32_t> theirs = layout_.ChunksOfShard(1);
        request.set_chunk_id(theirs[rng() % theirs.size()]);
        break;
      }
      case Fault::kFutureStep: {
        const uint64_t step = 1 + rng() % 1000;
        request.set_step(rng() % 8 == 0 ? std::numeric_limits<uint64_t>::max() : step);
        break;
      }
      case Fault::kWorkerOutOfRange:
        request.set_worker_rank(kWorkers + static_cast<uint32_t>(rng() % 0xfffffff0u));
        break;
      case Fault::kRoundOutOfRange:
        request.set_round(1 + static_cast<uint32_t>(rng() % 0xfffffff0u));
        break;
      case Fault::kNonFinite:
        request.set_payload(EncodePush(config_, layout_, 0, chunk, worker,
                                       NonFiniteGradient(Length(chunk), 0, worker)));
        break;
      case Fault::kOversize:
        request.set_payload(std::string(kMaxReceiveBytes + rng() % 4096, 'x'));
        break;
      case Fault::kNoToken:
        token.clear();
        break;
      case Fault::kWrongToken:
        token = absl::StrCat(kToken, rng() % 2 == 0 ? "x" : "");
        token[rng() % token.size()] ^= 1;
        break;
      case Fault::kPullWeightsBadWorker: {
        grpc::ClientContext context;
        Prepare(&context);
        rpc::PullWeightsRequest pull;
        pull.set_worker_rank(kWorkers + static_cast<uint32_t>(rng() % 1000));
        rpc::PullWeightsResponse response;
        return stub_->PullWeights(&context, pull, &response).error_code();
      }
      case Fault::kHandshakeBadWorker:
      case Fault::kHandshakeBadVersion:
      case Fault::kHandshakeBadRunLength:
      case Fault::kHandshakeFarRejoin:
      case Fault::kHandshakeLongTensor: {
        rpc::HandshakeRequest hello = HelloFrom(worker);
        if (fault == Fault::kHandshakeBadWorker) {
          hello.set_worker_rank(kWorkers + static_cast<uint32_t>(rng() % 1000));
        } else if (fault == Fault::kHandshakeBadVersion) {
          hello.set_protocol_version(kProtocolVersion + 1 + static_cast<uint32_t>(rng() % 100));
        } else if (fault == Fault::kHandshakeBadRunLength) {
          hello.set_total_steps(hello.total_steps() + 1 + rng() % 100);
        } else if (fault == Fault::kHandshakeFarRejoin) {
          hello.set_rejoin_at_step(rng() % 8 == 0 ? std::numeric_limits<uint64_t>::max()
                                                  : 1 + Shard::kRejoinLead + rng() % 1000);
        } else {
          hello.mutable_chunks(0)->set_tensor(std::string(kMaxReceiveBytes / 2, 'n'));
        }
        return Hello(hello).error_code();
      }
      case Fault::kCompressed:
        return Push(request, token, rng() % 2 == 0 ? GRPC_COMPRESS_GZIP : GRPC_COMPRESS_DEFLATE)
            .error_code();
      case Fault::kCount:
        break;
    }
    return Push(request, token).error_code();
  }

  config::RunConfig config_;
  JobLayout layout_;
  std::unique_ptr<Shard> shard_;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rpc::ParameterServer::Stub> stub_;
};

TEST_P(HostileTest, MalformedRequestsChangeNothingAndAValidStepStillWorks) {
  // The run's length, as a real worker's handshake would fix it (not part of the storm).
  {
    const grpc::Status status = Hello(HelloFrom(0));
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  const ShardState state = Capture(*shard_);
  const std::vector<uint32_t>& ids = state.ids;
  const std::vector<Shard::ChunkSnapshot>& before = state.chunks;

  constexpr int kFaults = static_cast<int>(Fault::kCount);
  std::vector<std::atomic<int>> wrong(kFaults);
  std::vector<std::atomic<int>> sent(kFaults);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      for (int i = 0; i < kRequestsPerThread; ++i) {
        const Fault fault = static_cast<Fault>((i + t) % kFaults);
        const grpc::StatusCode code = Send(fault, rng);
        ++sent[static_cast<int>(fault)];
        if (code != Expected(fault)) {
          if (wrong[static_cast<int>(fault)]++ < 3) {
            ADD_FAILURE() << "fault " << static_cast<int>(fault) << " answered " << code
                          << ", expected " << Expected(fault);
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  int total = 0;
  for (int f = 0; f < kFaults; ++f) {
    EXPECT_EQ(wrong[f], 0) << "fault " << f;
    EXPECT_GT(sent[f], 0) << "fault " << f;
    total += sent[f];
  }
  EXPECT_EQ(total, kThreads * kRequestsPerThread);

  ExpectSameState(state, Capture(*shard_));

  // One valid step of every chunk, both workers in parallel.
  for (size_t k = 0; k < ids.size(); ++k) {
    const uint32_t id = ids[k];
    std::vector<grpc::Status> statuses(kWorkers);
    std::vector<std::thread> workers;
    for (uint32_t w = 0; w < kWorkers; ++w) {
      workers.emplace_back([&, w] {
        rpc::PushPullRequest request;
        request.set_worker_rank(w);
        request.set_step(0);
        request.set_chunk_id(id);
        request.set_payload(EncodePush(config_, layout_, 0, id, w, TestGradient(Length(id), 0, w)));
        statuses[w] = Push(request);
      });
    }
    for (std::thread& thread : workers) thread.join();
    for (const grpc::Status& status : statuses) {
      EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    }
    const Shard::ChunkSnapshot after = *shard_->Snapshot(id);
    EXPECT_EQ(after.step, 1u);
    if (std::string(GetParam()) == "none") {
      // w1 = w0 - lr * mean(g), exact for these gradients.
      const std::vector<float> g0 = TestGradient(Length(id), 0, 0);
      const std::vector<float> g1 = TestGradient(Length(id), 0, 1);
      const float lr = config_.optimizer().learning_rate();
      const Shard::ChunkSnapshot& start = before[k];
      for (size_t i = 0; i < g0.size(); ++i) {
        ASSERT_EQ(after.weights[i], start.weights[i] - lr * ((g0[i] + g1[i]) / 2)) << i;
      }
    }
  }
}

// A refused handshake fixes nothing, whatever was wrong with it: a run length that cannot be
// this job's (the first handshake would otherwise fix it and every real worker would be refused
// until the server restarts), or a rejoin that is refused after the run length was checked.
TEST_P(HostileTest, RefusedHandshakesChangeNothing) {
  const ShardState start = Capture(*shard_);
  ASSERT_TRUE(start.run_length == Shard::RunLength{});
  struct Case {
    const char* what;
    uint64_t steps_per_epoch, total_steps, rejoin_at_step;
    grpc::StatusCode code;
  };
  const Case cases[] = {
      {"total not epochs * steps_per_epoch", 16, 31, 0, grpc::StatusCode::INVALID_ARGUMENT},
      {"total of one epoch", 16, 16, 0, grpc::StatusCode::INVALID_ARGUMENT},
      {"more steps than an IDX file holds", uint64_t{1} << 40, uint64_t{1} << 41, 0,
       grpc::StatusCode::INVALID_ARGUMENT},
      {"no run length", 0, 0, 0, grpc::StatusCode::INVALID_ARGUMENT},
      {"good run length, rejoin far ahead", 16, 32, 1000, grpc::StatusCode::INVALID_ARGUMENT},
      {"good run length, rejoin past the run", 16, 32, 33, grpc::StatusCode::INVALID_ARGUMENT},
      {"good run length, rejoin at the last step", 16, 32, std::numeric_limits<uint64_t>::max(),
       grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    rpc::HandshakeRequest hello;
    FillHandshake(layout_, config_, 1, 0, c.steps_per_epoch, c.total_steps, &hello);
    hello.set_rejoin_at_step(c.rejoin_at_step);
    EXPECT_EQ(Hello(hello).error_code(), c.code);
    ExpectSameState(start, Capture(*shard_));
  }
  // The real workers are still let in, and fix the real length.
  for (uint32_t w = 0; w < kWorkers; ++w) {
    const grpc::Status status = Hello(HelloFrom(w));
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_TRUE((shard_->run_length() == Shard::RunLength{16, 32}));
}

// A rejoin step is bounded by the shard's own step: one far ahead would let every step before
// it complete without that worker.
TEST_P(HostileTest, ARejoinStepIsBoundedByTheShardsOwnStep) {
  for (uint32_t w = 0; w < kWorkers; ++w) ASSERT_TRUE(Hello(HelloFrom(w)).ok());
  const ShardState start = Capture(*shard_);
  for (const uint64_t far : {Shard::kRejoinLead + 1, uint64_t{31}}) {
    EXPECT_EQ(Hello(HelloFrom(1, far)).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << far;
    ExpectSameState(start, Capture(*shard_));
  }
  // Step 0 of a chunk still waits for worker 1.
  const uint32_t id = shard_->chunk_ids().front();
  auto push = [&](uint32_t w) {
    rpc::PushPullRequest request;
    request.set_worker_rank(w);
    request.set_step(0);
    request.set_chunk_id(id);
    request.set_payload(EncodePush(config_, layout_, 0, id, w, TestGradient(Length(id), 0, w)));
    return Push(request);
  };
  std::future<grpc::Status> first = std::async(std::launch::async, push, 0);
  while (!shard_->Snapshot(id)->arrived[0]) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  EXPECT_EQ(shard_->Snapshot(id)->step, 0u);
  const grpc::Status second = push(1);
  EXPECT_TRUE(second.ok()) << second.error_message();
  EXPECT_TRUE(first.get().ok());
  EXPECT_EQ(shard_->Snapshot(id)->step, 1u);
  // The furthest a real rejoin announces (latest_step 1 here) is taken.
  const uint64_t furthest = shard_->latest_step() + Shard::kRejoinLead;
  const grpc::Status rejoined = Hello(HelloFrom(1, furthest));
  EXPECT_TRUE(rejoined.ok()) << rejoined.error_message();
  EXPECT_EQ(shard_->members()[1].from_step, furthest);
}

// A gzip bomb: a request of 48 MiB of zeros, 48 KB once compressed, under the 64 KiB receive
// limit only while compressed. gRPC 1.51 would inflate it whole before checking the limit
// (and keep the memory); the server refuses compressed requests from their metadata instead.
// The client sends slices of one static 1 MiB block, so the memory sampled is the server's.
TEST_P(HostileTest, ACompressedRequestIsRefusedBeforeItIsInflated) {
  ASSERT_TRUE(Hello(HelloFrom(0)).ok());
  const ShardState start = Capture(*shard_);
  constexpr size_t kBlock = 1 << 20;
  constexpr size_t kInflated = 48 * kBlock;
  static const std::vector<char>* const zeros = new std::vector<char>(kBlock, 0);
  // PushPullRequest{payload (field 4): kInflated zero bytes}.
  std::string head = "\x22";
  for (uint64_t n = kInflated; n != 0; n >>= 7) {
    head.push_back(static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
  }
  std::vector<grpc::Slice> slices = {grpc::Slice(head)};
  for (size_t i = 0; i < kInflated / kBlock; ++i) {
    slices.emplace_back(zeros->data(), kBlock, grpc::Slice::STATIC_SLICE);
  }
  const grpc::ByteBuffer request(slices.data(), slices.size());
  grpc::GenericStub generic(channel_);
  for (const grpc_compression_algorithm algorithm : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    SCOPED_TRACE(algorithm);
    const int64_t base = ResidentBytes();
    std::atomic<bool> done{false};
    std::atomic<int64_t> peak{base};
    std::thread sampler([&] {
      while (!done) {
        peak = std::max<int64_t>(peak, ResidentBytes());
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    });
    grpc::ClientContext context;
    Prepare(&context);
    context.set_compression_algorithm(algorithm);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> answered;
    generic.UnaryCall(&context, "/tamp.rpc.ParameterServer/PushPull", grpc::StubOptions(),
                      &request, &response,
                      [&](grpc::Status status) { answered.set_value(std::move(status)); });
    const grpc::Status status = answered.get_future().get();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    done = true;
    sampler.join();
    const int64_t after = ResidentBytes();
    std::printf("compressed %zu-byte request (%s): %s; resident memory peak +%lld, after +%lld\n",
                kInflated, algorithm == GRPC_COMPRESS_GZIP ? "gzip" : "deflate",
                status.error_message().c_str(), static_cast<long long>(peak - base),
                static_cast<long long>(after - base));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
    // Inflating would take at least kInflated; a refusal takes a few pages.
    EXPECT_LT(peak - base, int64_t{kInflated / 4}) << "peaked at +" << (peak - base);
    EXPECT_LT(after - base, int64_t{kInflated / 4}) << "ended at +" << (after - base);
    ExpectSameState(start, Capture(*shard_));
  }
}

// Refusals quote request strings (a tensor name, a codec spec) only so far: their status still
// fits the client's 8 KiB metadata limit, where the whole string would drop the connection.
TEST_P(HostileTest, RefusalsQuoteRequestStringsBoundedly) {
  ASSERT_TRUE(Hello(HelloFrom(0)).ok());
  const ShardState start = Capture(*shard_);
  const std::string huge(kMaxReceiveBytes / 2, '\x7f');  // Escaped, 4 bytes each.
  rpc::HandshakeRequest long_tensor = HelloFrom(1);
  long_tensor.mutable_chunks(2)->set_tensor(huge);
  rpc::HandshakeRequest long_codec = HelloFrom(1);
  long_codec.mutable_chunks(2)->mutable_compression()->mutable_push()->set_name(huge);
  for (const rpc::HandshakeRequest* hello : {&long_tensor, &long_codec}) {
    grpc::ClientContext context;
    Prepare(&context);
    rpc::HandshakeResponse response;
    const grpc::Status status = stub_->Handshake(&context, *hello, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
    EXPECT_LE(status.error_message().size(), kMaxStatusMessageBytes);
    EXPECT_NE(status.error_message().find("...("), std::string::npos) << status.error_message();
    EXPECT_NE(status.error_message().find("chunk 2 "), std::string::npos) << status.error_message();
    ExpectSameState(start, Capture(*shard_));
  }
}

// Bytes written to fd 2 while it is redirected to a file: glog's lines and gRPC's own.
class StderrCapture {
 public:
  StderrCapture() : path_(absl::StrCat(std::getenv("TEST_TMPDIR"), "/stderr.txt")) {
    std::fflush(stderr);
    saved_ = dup(2);
    const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
  }
  // Restores fd 2 and returns what was written meanwhile.
  std::string Finish() {
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    std::ifstream file(path_);
    return std::string(std::istreambuf_iterator<char>(file), {});
  }

 private:
  const std::string path_;
  int saved_ = -1;
};

// A flood of refused requests of every kind that logs (no token, refused handshakes quoting
// long strings, compressed requests that gRPC itself logs) writes a bounded number of bounded
// lines: kRefusalLinesPerSecond per second of the flood, each within kMaxRefusalLineBytes and
// its prefix.
TEST_P(HostileTest, AFloodOfRefusalsLogsBoundedBytes) {
  ASSERT_TRUE(Hello(HelloFrom(0)).ok());
  const ShardState start = Capture(*shard_);
  constexpr int kRequests = 2500;  // Per thread.
  rpc::HandshakeRequest long_tensor = HelloFrom(1);
  long_tensor.mutable_chunks(2)->set_tensor(std::string(kMaxReceiveBytes / 2, 'n'));
  StderrCapture capture;
  const auto begin = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRequests; ++i) {
        if (i % 50 == 0) {
          Hello(long_tensor);
        } else if (i % 50 == 1) {
          rpc::PushPullRequest request;
          request.set_payload("x");
          Push(request, kToken, GRPC_COMPRESS_GZIP);
        } else {
          grpc::ClientContext context;
          Prepare(&context, /*token=*/"");
          rpc::PullWeightsRequest pull;
          rpc::PullWeightsResponse response;
          stub_->PullWeights(&context, pull, &response);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const std::string written = capture.Finish();
  const std::vector<absl::string_view> lines = absl::StrSplit(written, '\n', absl::SkipEmpty());
  // Whole seconds of the steady clock the flood touched, each with its own budget.
  const size_t budget = kRefusalLinesPerSecond * (static_cast<size_t>(seconds) + 2);
  constexpr size_t kPrefixBytes = 128;  // glog's "W20261125 21:35:02.456455 25436 file:line] ".
  EXPECT_LE(lines.size(), budget) << kThreads * kRequests << " requests in " << seconds << " s";
  size_t longest = 0;
  for (absl::string_view line : lines) longest = std::max(longest, line.size());
  EXPECT_LE(longest, kMaxRefusalLineBytes + kPrefixBytes + 64);
  EXPECT_LE(written.size(), budget * (kMaxRefusalLineBytes + kPrefixBytes + 64));
  std::printf("%d refused requests in %.2f s wrote %zu lines, %zu bytes (longest %zu)\n",
              kThreads * kRequests, seconds, lines.size(), written.size(), longest);
  ExpectSameState(start, Capture(*shard_));
}

// A blank TAMP_JOB_TOKEN is refused like a blank token file, instead of meaning "no token".
TEST(HostileTokenTest, ABlankTokenVariableDoesNotTurnAdmissionOff) {
  const config::RunConfig config = TestConfig();
  ASSERT_TRUE(config.cluster().job_token_file().empty());
  setenv(kJobTokenEnv, " \t\n", 1);
  const absl::StatusOr<std::string> token = LoadJobToken(config.cluster());
  unsetenv(kJobTokenEnv);
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument)
      << (token.ok() ? absl::StrCat("token '", *token, "'") : token.status().ToString());
}

INSTANTIATE_TEST_SUITE_P(Codecs, HostileTest, ::testing::Values("none", "topk", "fp16"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// ---- nonfinite_policy through the Shard ----

struct Answer {
  absl::Status status;
  uint64_t step = 0;
};

Answer PushNow(Shard& shard, uint32_t worker, uint64_t step, uint32_t chunk,
               const std::string& payload) {
  // std::promise, not absl::Notification: Debian's Abseil is not built for ThreadSanitizer,
  // which then misses the hand-over and reports the answer's fields as a race.
  std::promise<Answer> promise;
  std::future<Answer> answer = promise.get_future();
  shard.PushPullRound(worker, step, 0, chunk, payload,
                      [&promise](absl::Status status, const Shard::PushAnswer* out) {
                        const uint64_t at = out != nullptr ? out->step : 0;
                        promise.set_value(Answer{std::move(status), at});
                      });
  return answer.get();
}

config::RunConfig PolicyConfig(config::Validation::NonfinitePolicy policy,
                               config::Consistency::Mode mode = config::Consistency::SYNC) {
  return TestConfig([&](config::RunConfig& c) {
    c.mutable_validation()->set_nonfinite_policy(policy);
    c.mutable_consistency()->set_mode(mode);
  });
}

// The shard checks dense pushes (none) in one fused pass and sparse ones (topk: the entries
// the payload names) entry by entry; the nonfinite tests run both.
config::RunConfig PushCodecConfig(absl::string_view push_codec) {
  return TestConfig([&](config::RunConfig& c) {
    config::Codec* push = c.mutable_compression()->mutable_default_compression()->mutable_push();
    push->set_name(std::string(push_codec));
    if (push_codec == "topk") push->set_ratio(0.25);
  });
}

class NonfiniteCodecTest : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(DenseAndSparse, NonfiniteCodecTest, ::testing::Values("none", "topk"));

TEST_P(NonfiniteCodecTest, RejectIsTheDefaultAndChangesNothing) {
  const config::RunConfig config = PushCodecConfig(GetParam());
  EXPECT_EQ(config.validation().nonfinite_policy(), config::Validation::REJECT);
  const JobLayout layout = TestLayout(config);
  auto shard = *Shard::Create(config, layout, 0);
  const uint32_t id = shard->chunk_ids().front();
  const size_t n = layout.chunks[id].chunk.length;
  const Shard::ChunkSnapshot before = *shard->Snapshot(id);
  const Answer answer =
      PushNow(*shard, 0, 0, id, EncodePush(config, layout, 0, id, 0, NonFiniteGradient(n, 0, 0)));
  EXPECT_EQ(answer.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(answer.status.message().find("NaN or Inf"), absl::string_view::npos)
      << answer.status;
  ExpectIdentical(before, *shard->Snapshot(id), id);
}

TEST_P(NonfiniteCodecTest, RejectCatchesASumThatOverflows) {
  const config::RunConfig config = PushCodecConfig(GetParam());
  const JobLayout layout = TestLayout(config);
  auto shard = *Shard::Create(config, layout, 0);
  const uint32_t id = shard->chunk_ids().front();
  const size_t n = layout.chunks[id].chunk.length;
  std::vector<float> huge(n, 0.0f);
  huge[3] = 3e38f;  // Finite alone; twice is +Inf.
  std::thread first([&] {
    // Parks until the step completes; answered at Close() below.
    PushNow(*shard, 0, 0, id, EncodePush(config, layout, 0, id, 0, huge));
  });
  while (!shard->Snapshot(id)->arrived[0]) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const Shard::ChunkSnapshot before = *shard->Snapshot(id);
  const Answer second = PushNow(*shard, 1, 0, id, EncodePush(config, layout, 0, id, 1, huge));
  EXPECT_EQ(second.status.code(), absl::StatusCode::kInvalidArgument) << second.status;
  ExpectIdentical(before, *shard->Snapshot(id), id);
  shard->Close(absl::UnavailableError("done"));
  first.join();
}

TEST(NonfinitePolicyTest, SkipCountsThePushAsAZeroContribution) {
  const config::RunConfig config = PolicyConfig(config::Validation::SKIP);
  const JobLayout layout = TestLayout(config);
  auto shard = *Shard::Create(config, layout, 0);
  const uint32_t id = shard->chunk_ids().front();
  const size_t n = layout.chunks[id].chunk.length;
  const std::vector<float> w0 = shard->Snapshot(id)->weights;
  const std::vector<float> g1 = TestGradient(n, 0, 1);
  Answer skipped;
  std::thread bad([&] {
    skipped =
        PushNow(*shard, 0, 0, id, EncodePush(config, layout, 0, id, 0, NonFiniteGradient(n, 0, 0)));
  });
  while (!shard->Snapshot(id)->arrived[0]) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(shard->Snapshot(id)->nonfinite_skipped, 1u);
  const Answer good = PushNow(*shard, 1, 0, id, EncodePush(config, layout, 0, id, 1, g1));
  bad.join();
  ASSERT_TRUE(skipped.status.ok()) << skipped.status;
  ASSERT_TRUE(good.status.ok()) << good.status;
  EXPECT_EQ(good.step, 1u);
  // Mean over both workers, worker 0 contributing zero.
  const Shard::ChunkSnapshot after = *shard->Snapshot(id);
  const float lr = config.optimizer().learning_rate();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(after.weights[i], w0[i] - lr * ((0.0f + g1[i]) / 2)) << i;
}

TEST(NonfinitePolicyTest, AllowLetsNonFiniteValuesThrough) {
  const config::RunConfig config = PolicyConfig(config::Validation::ALLOW);
  const JobLayout layout = TestLayout(config);
  auto shard = *Shard::Create(config, layout, 0);
  const uint32_t id = shard->chunk_ids().front();
  const size_t n = layout.chunks[id].chunk.length;
  std::thread bad([&] {
    EXPECT_TRUE(PushNow(*shard, 0, 0, id,
                        EncodePush(config, layout, 0, id, 0, NonFiniteGradient(n, 0, 0)))
                    .status.ok());
  });
  while (!shard->Snapshot(id)->arrived[0]) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(std::isinf(shard->Snapshot(id)->accumulator[1]));
  EXPECT_TRUE(
      PushNow(*shard, 1, 0, id, EncodePush(config, layout, 0, id, 1, TestGradient(n, 0, 1)))
          .status.ok());
  bad.join();
  EXPECT_TRUE(std::isnan(shard->Snapshot(id)->weights[n - 1]));
}

TEST(NonfinitePolicyTest, AsyncRejectAndSkip) {
  for (const auto policy : {config::Validation::REJECT, config::Validation::SKIP}) {
    const config::RunConfig config = PolicyConfig(policy, config::Consistency::ASYNC);
    const JobLayout layout = TestLayout(config);
    auto shard = *Shard::Create(config, layout, 0);
    const uint32_t id = shard->chunk_ids().front();
    const size_t n = layout.chunks[id].chunk.length;
    const Shard::ChunkSnapshot before = *shard->Snapshot(id);
    const Answer answer = PushNow(*shard, 0, 0, id,
                                  EncodePush(config, layout, 0, id, 0, NonFiniteGradient(n, 0, 0)));
    const Shard::ChunkSnapshot after = *shard->Snapshot(id);
    EXPECT_TRUE(SameBytes(before.weights, after.weights));
    if (policy == config::Validation::REJECT) {
      EXPECT_EQ(answer.status.code(), absl::StatusCode::kInvalidArgument) << answer.status;
      ExpectIdentical(before, after, id);
    } else {
      EXPECT_TRUE(answer.status.ok()) << answer.status;
      EXPECT_EQ(after.worker_steps[0], 1u);
      EXPECT_EQ(after.nonfinite_skipped, 1u);
    }
  }
}

}  // namespace
}  // namespace tamp
