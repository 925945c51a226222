// Hostile input against a live service (issue 7): shard 0 of the test job behind real gRPC on
// loopback, with a job token and a small max receive size, takes thousands of malformed
// requests from several threads at once: random bytes, truncated and extended valid payloads,
// empty payloads, wrong chunk ids, steps, rounds and worker ranks, NaN / Inf gradients,
// oversize messages, missing or wrong tokens, bad PullWeights and Handshake requests. Every
// answer must carry the code its fault calls for, every chunk's Snapshot must be bit-identical
// to before, and one valid step must still give the closed-form update. Then the
// nonfinite_policy variants (SKIP, ALLOW, overflow of the sum, ASYNC) through the Shard.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "compress/registry.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/handshake.h"
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
  kCount,
};

grpc::StatusCode Expected(Fault fault) {
  switch (fault) {
    case Fault::kChunkOfOtherShard:
      return grpc::StatusCode::NOT_FOUND;
    case Fault::kFutureStep:
    case Fault::kHandshakeBadVersion:
      return grpc::StatusCode::FAILED_PRECONDITION;
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
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.SetMaxReceiveMessageSize(kMaxReceiveBytes);
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

  grpc::Status Push(const rpc::PushPullRequest& request, const std::string& token = kToken) {
    grpc::ClientContext context;
    Prepare(&context, token);
    rpc::PushPullResponse response;
    return stub_->PushPull(&context, request, &response);
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
      case Fault::kHandshakeBadVersion: {
        grpc::ClientContext context;
        Prepare(&context);
        rpc::HandshakeRequest hello;
        FillHandshake(layout_, config_, worker, 0, 16, 32, &hello);
        if (fault == Fault::kHandshakeBadWorker) {
          hello.set_worker_rank(kWorkers + static_cast<uint32_t>(rng() % 1000));
        } else {
          hello.set_protocol_version(kProtocolVersion + 1 + static_cast<uint32_t>(rng() % 100));
        }
        rpc::HandshakeResponse response;
        return stub_->Handshake(&context, hello, &response).error_code();
      }
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
    grpc::ClientContext context;
    Prepare(&context);
    rpc::HandshakeRequest hello;
    FillHandshake(layout_, config_, 0, 0, 16, 32, &hello);
    rpc::HandshakeResponse response;
    const grpc::Status status = stub_->Handshake(&context, hello, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  const std::vector<uint32_t> ids = shard_->chunk_ids();
  std::vector<Shard::ChunkSnapshot> before;
  for (uint32_t id : ids) before.push_back(*shard_->Snapshot(id));

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

  for (size_t k = 0; k < ids.size(); ++k) ExpectIdentical(before[k], *shard_->Snapshot(ids[k]), ids[k]);

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
  shard.PushPull(worker, step, chunk, payload,
                 [&promise](absl::Status status, const std::string*, uint64_t at) {
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
