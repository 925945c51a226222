// The service over real gRPC on loopback: shard 0 of the test job (codec "none", plain SGD
// lr 0.5, 2 workers) serves two client stubs, one per worker, each on its own channel.
#include "server/service.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protocol/handshake.h"
#include "server/shard_host.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::DecodePull;
using ::tamp::testing::EncodePush;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;
using ::tamp::testing::TestLayout;
using ::testing::HasSubstr;

constexpr float kLr = 0.5f;
constexpr int kWorkers = 2;

// A one-shot notification on std::mutex: absl::Notification's lock lives in Debian's Abseil,
// which is not built with ThreadSanitizer, so under --config=tsan the hand-over of a response
// from gRPC's thread to the test would look like a race; pthread locks are seen.
// Arm() before handing the call to gRPC and Notify(write) on gRPC's thread make the whole
// hand-over visible: what the test wrote before Arm() happens before `write`, and `write`
// before whatever the test reads after a wait.
class Done {
 public:
  void Arm() { std::lock_guard<std::mutex> lock(mutex_); }
  template <typename Write>
  void Notify(Write write) {
    std::lock_guard<std::mutex> lock(mutex_);
    write();
    done_ = true;
    changed_.notify_all();
  }
  void Notify() {
    Notify([] {});
  }
  bool HasBeenNotified() {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  void WaitForNotification() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return done_; });
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [this] { return done_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool done_ = false;
};

// One asynchronous PushPull: owns what gRPC needs until the callback.
struct PushCall {
  grpc::ClientContext context;
  rpc::PushPullRequest request;
  rpc::PushPullResponse response;
  grpc::Status status;
  Done done;
};

// One asynchronous PushPullBatch.
struct BatchCall {
  grpc::ClientContext context;
  rpc::PushPullBatchRequest request;
  rpc::PushPullBatchResponse response;
  grpc::Status status;
  Done done;
};

std::chrono::system_clock::time_point Soon() {
  return std::chrono::system_clock::now() + std::chrono::seconds(20);
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = TestConfig();
    layout_ = TestLayout(config_);
    absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config_, layout_, 0);
    ASSERT_TRUE(shard.ok()) << shard.status();
    shard_ = *std::move(shard);
    service_ = std::make_unique<ParameterServerService>(shard_.get());
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    port_ = port;
    for (int w = 0; w < kWorkers; ++w) {
      stubs_.push_back(rpc::ParameterServer::NewStub(grpc::CreateChannel(
          absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials())));
    }
  }

  void TearDown() override {
    if (server_ == nullptr) return;
    shard_->Close(absl::UnavailableError("server shutting down"));
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  size_t Length(uint32_t chunk) const { return layout_.chunks[chunk].chunk.length; }

  grpc::Status Handshake(uint32_t worker, const rpc::HandshakeRequest& request,
                         rpc::HandshakeResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    return stubs_[worker]->Handshake(&context, request, response);
  }

  // Weights of shard 0's chunks, by chunk id, fetched over the wire.
  std::vector<std::vector<float>> PullWeights(uint64_t* step) {
    grpc::ClientContext context;
    context.set_deadline(Soon());
    rpc::PullWeightsRequest request;
    rpc::PullWeightsResponse response;
    const grpc::Status status = stubs_[0]->PullWeights(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    *step = response.step();
    std::vector<std::vector<float>> weights(layout_.chunks.size());
    for (const rpc::ChunkWeights& chunk : response.chunks()) {
      std::vector<float>& w = weights[chunk.chunk_id()];
      w.resize(chunk.values().size() / sizeof(float));
      std::memcpy(w.data(), chunk.values().data(), chunk.values().size());
    }
    return weights;
  }

  // Starts worker `worker`'s push of `payload`; the answer lands in *call.
  void StartPush(uint32_t worker, uint64_t step, uint32_t chunk, std::string payload,
                 PushCall* call) {
    call->context.set_deadline(Soon());
    call->request.set_worker_rank(worker);
    call->request.set_step(step);
    call->request.set_chunk_id(chunk);
    call->request.set_payload(std::move(payload));
    call->done.Arm();
    stubs_[worker]->async()->PushPull(&call->context, &call->request, &call->response,
                                      [call](grpc::Status status) {
                                        call->done.Notify(
                                            [&] { call->status = std::move(status); });
                                      });
  }

  // Starts worker `worker`'s batch of `pushes` (chunk, payload) for `step`.
  void StartBatch(uint32_t worker, uint64_t step,
                  std::vector<std::pair<uint32_t, std::string>> pushes, BatchCall* call) {
    call->context.set_deadline(Soon());
    call->request.set_worker_rank(worker);
    call->request.set_step(step);
    for (auto& [chunk, payload] : pushes) {
      rpc::BatchedPush* push = call->request.add_pushes();
      push->set_chunk_id(chunk);
      push->set_payload(std::move(payload));
    }
    call->done.Arm();
    stubs_[worker]->async()->PushPullBatch(&call->context, &call->request, &call->response,
                                           [call](grpc::Status status) {
                                             call->done.Notify(
                                                 [&] { call->status = std::move(status); });
                                           });
  }

  std::string Push(uint64_t step, uint32_t chunk, uint32_t worker) const {
    return EncodePush(config_, layout_, step, chunk, worker,
                      TestGradient(Length(chunk), step, worker));
  }

  config::RunConfig config_;
  JobLayout layout_;
  std::unique_ptr<Shard> shard_;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::vector<std::unique_ptr<rpc::ParameterServer::Stub>> stubs_;
};

TEST_F(ServiceTest, HandshakeAcceptsTheSameJob) {
  for (uint32_t worker = 0; worker < kWorkers; ++worker) {
    rpc::HandshakeRequest request;
    FillHandshake(layout_, config_, worker, 0, 16, 32, &request);
    rpc::HandshakeResponse response;
    const grpc::Status status = Handshake(worker, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.server_rank(), 0u);
    EXPECT_EQ(response.step(), 0u);
  }
}

TEST_F(ServiceTest, HandshakeRefusesAnotherJobWithTheReason) {
  const config::RunConfig other =
      TestConfig([](config::RunConfig& c) { c.mutable_cluster()->set_num_workers(3); });
  rpc::HandshakeRequest request;
  FillHandshake(TestLayout(other), other, 1, 0, 16, 32, &request);
  rpc::HandshakeResponse response;
  const grpc::Status status = Handshake(1, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(), "num_workers: worker says 3, server 0 says 2");
}

TEST_F(ServiceTest, FirstHandshakeFixesTheRunLengthAndLaterOnesMustAgree) {
  rpc::HandshakeResponse response;
  // A refused handshake fixes nothing.
  const config::RunConfig other =
      TestConfig([](config::RunConfig& c) { c.mutable_cluster()->set_num_workers(3); });
  rpc::HandshakeRequest refused;
  FillHandshake(TestLayout(other), other, 1, 0, 99, 99, &refused);
  EXPECT_EQ(Handshake(1, refused, &response).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  rpc::HandshakeRequest first;
  FillHandshake(layout_, config_, 0, 0, 16, 32, &first);
  grpc::Status status = Handshake(0, first, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  // Worker 1 counted another number of steps per epoch (e.g. other data): refused.
  rpc::HandshakeRequest mismatch;
  FillHandshake(layout_, config_, 1, 0, 8, 32, &mismatch);
  status = Handshake(1, mismatch, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(),
            "steps_per_epoch: worker says 8, server 0 has 16 from the first handshake");
  FillHandshake(layout_, config_, 1, 0, 16, 40, &mismatch);
  status = Handshake(1, mismatch, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(status.error_message(),
            "total_steps: worker says 40, server 0 has 32 from the first handshake");

  // The same values are accepted again (a worker retrying, or the other worker).
  rpc::HandshakeRequest agreeing;
  FillHandshake(layout_, config_, 1, 0, 16, 32, &agreeing);
  status = Handshake(1, agreeing, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();

  // A worker that sends no run length (0) is refused.
  rpc::HandshakeRequest empty;
  FillHandshake(layout_, config_, 1, 0, 0, 0, &empty);
  EXPECT_EQ(Handshake(1, empty, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceTest, ConcurrentPushesGetTheClosedFormUpdate) {
  constexpr uint64_t kSteps = 3;
  const std::vector<uint32_t> ids = shard_->chunk_ids();
  uint64_t step = 1;
  std::vector<std::vector<float>> weights = PullWeights(&step);
  EXPECT_EQ(step, 0u);
  for (uint32_t id : ids) {
    const ChunkPlan& plan = layout_.chunks[id];
    std::vector<float> initial(plan.chunk.length);
    InitTensorSlice(layout_.tensor_of(plan), config_.model().init_seed(), plan.chunk.tensor,
                    plan.chunk.offset, absl::MakeSpan(initial));
    ASSERT_EQ(weights[id], initial) << "chunk " << id;
  }

  for (step = 0; step < kSteps; ++step) {
    // Every push of the step in flight at once, both workers, all chunks.
    std::vector<std::vector<std::unique_ptr<PushCall>>> calls(kWorkers);
    for (uint32_t id : ids) {
      for (uint32_t worker = 0; worker < kWorkers; ++worker) {
        calls[worker].push_back(std::make_unique<PushCall>());
        StartPush(
            worker, step, id,
            EncodePush(config_, layout_, step, id, worker, TestGradient(Length(id), step, worker)),
            calls[worker].back().get());
      }
    }
    for (size_t k = 0; k < ids.size(); ++k) {
      const uint32_t id = ids[k];
      for (uint32_t worker = 0; worker < kWorkers; ++worker) {
        PushCall& call = *calls[worker][k];
        call.done.WaitForNotification();
        ASSERT_TRUE(call.status.ok()) << call.status.error_message();
        EXPECT_EQ(call.response.step(), step + 1);
      }
      const std::string& payload = calls[0][k]->response.payload();
      EXPECT_EQ(payload, calls[1][k]->response.payload()) << "workers got different bytes";
      // w1 = w0 - lr * mean(g); the update is w1 - w0, both in the server's fp32 operations.
      const std::vector<float> g0 = TestGradient(Length(id), step, 0);
      const std::vector<float> g1 = TestGradient(Length(id), step, 1);
      std::vector<float> expected_update(Length(id));
      for (size_t i = 0; i < expected_update.size(); ++i) {
        const float next = weights[id][i] - kLr * ((g0[i] + g1[i]) / 2);
        expected_update[i] = next - weights[id][i];
        weights[id][i] = next;
      }
      EXPECT_EQ(DecodePull(config_, layout_, step, id, payload), expected_update)
          << "chunk " << id << " step " << step;
    }
  }
  uint64_t final_step = 0;
  const std::vector<std::vector<float>> pulled = PullWeights(&final_step);
  EXPECT_EQ(final_step, kSteps);
  for (uint32_t id : ids) EXPECT_EQ(pulled[id], weights[id]) << "chunk " << id;
}

// Tensor fusion: worker 0 pushes all of the shard's chunks in one batch, worker 1 each in
// its own call; every chunk completes as usual and both get the same bytes.
TEST_F(ServiceTest, ABatchIsAnsweredAsItsPushesOneByOne) {
  const std::vector<uint32_t> ids = shard_->chunk_ids();
  ASSERT_GE(ids.size(), 2u);
  uint64_t step = 1;
  const std::vector<std::vector<float>> weights = PullWeights(&step);
  BatchCall batch;
  std::vector<std::pair<uint32_t, std::string>> pushes;
  for (auto id = ids.rbegin(); id != ids.rend(); ++id) pushes.push_back({*id, Push(0, *id, 0)});
  StartBatch(0, 0, std::move(pushes), &batch);
  std::vector<std::unique_ptr<PushCall>> singles;
  for (uint32_t id : ids) {
    singles.push_back(std::make_unique<PushCall>());
    StartPush(1, 0, id, Push(0, id, 1), singles.back().get());
  }
  batch.done.WaitForNotification();
  ASSERT_TRUE(batch.status.ok()) << batch.status.error_message();
  ASSERT_EQ(batch.response.answers_size(), static_cast<int>(ids.size()));
  for (size_t k = 0; k < ids.size(); ++k) {
    const uint32_t id = ids[k];
    const rpc::BatchedAnswer& answer = batch.response.answers(ids.size() - 1 - k);
    PushCall& single = *singles[k];
    single.done.WaitForNotification();
    ASSERT_TRUE(single.status.ok()) << single.status.error_message();
    EXPECT_EQ(answer.chunk_id(), id);
    EXPECT_EQ(answer.code(), 0) << answer.message();
    EXPECT_EQ(answer.step(), 1u);
    EXPECT_EQ(answer.payload(), single.response.payload()) << "chunk " << id;
    const std::vector<float> g0 = TestGradient(Length(id), 0, 0);
    const std::vector<float> g1 = TestGradient(Length(id), 0, 1);
    std::vector<float> expected_update(Length(id));
    for (size_t i = 0; i < expected_update.size(); ++i) {
      expected_update[i] = (weights[id][i] - kLr * ((g0[i] + g1[i]) / 2)) - weights[id][i];
    }
    EXPECT_EQ(DecodePull(config_, layout_, 0, id, answer.payload()), expected_update)
        << "chunk " << id;
  }
}

TEST_F(ServiceTest, ABadBatchIsRefusedWholeAndChangesNothing) {
  const std::vector<uint32_t> ids = shard_->chunk_ids();
  ASSERT_GE(ids.size(), 2u);
  BatchCall empty;
  StartBatch(0, 0, {}, &empty);
  empty.done.WaitForNotification();
  EXPECT_EQ(empty.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(empty.status.error_message(), HasSubstr("holds no push"));

  BatchCall twice;
  StartBatch(0, 0, {{ids[0], Push(0, ids[0], 0)}, {ids[1], Push(0, ids[1], 0)},
                    {ids[0], Push(0, ids[0], 0)}},
             &twice);
  twice.done.WaitForNotification();
  EXPECT_EQ(twice.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(twice.status.error_message(),
              HasSubstr(absl::StrCat("chunk ", ids[0], " is pushed twice in one batch")));
  for (uint32_t id : ids) {
    EXPECT_FALSE(shard_->Snapshot(id)->arrived[0]) << "a refused batch took chunk " << id;
  }
}

TEST_F(ServiceTest, APushTheShardRefusesFailsAloneInItsBatch) {
  const std::vector<uint32_t> ids = shard_->chunk_ids();
  ASSERT_GE(ids.size(), 2u);
  BatchCall batch;
  StartBatch(0, 0, {{ids[0], Push(0, ids[0], 0)}, {ids[1], "not a payload"}}, &batch);
  PushCall other;
  StartPush(1, 0, ids[0], Push(0, ids[0], 1), &other);
  batch.done.WaitForNotification();
  other.done.WaitForNotification();
  ASSERT_TRUE(batch.status.ok()) << batch.status.error_message();
  ASSERT_TRUE(other.status.ok()) << other.status.error_message();
  ASSERT_EQ(batch.response.answers_size(), 2);
  EXPECT_EQ(batch.response.answers(0).code(), 0) << batch.response.answers(0).message();
  EXPECT_EQ(batch.response.answers(0).step(), 1u);
  EXPECT_EQ(batch.response.answers(0).payload(), other.response.payload());
  EXPECT_EQ(batch.response.answers(1).chunk_id(), ids[1]);
  EXPECT_EQ(batch.response.answers(1).code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_THAT(batch.response.answers(1).message(), HasSubstr(absl::StrCat("chunk ", ids[1], " step 0")));
  EXPECT_FALSE(shard_->Snapshot(ids[1])->arrived[0]);
}

TEST_F(ServiceTest, ErrorsCrossTheWireWithTheirCode) {
  const uint32_t chunk = shard_->chunk_ids().front();
  PushCall bad;
  StartPush(0, 0, chunk, "not a payload", &bad);
  bad.done.WaitForNotification();
  EXPECT_EQ(bad.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.status.error_message(), HasSubstr(absl::StrCat("chunk ", chunk, " step 0")));

  PushCall future;
  StartPush(1, 5, chunk,
            EncodePush(config_, layout_, 5, chunk, 1, TestGradient(Length(chunk), 5, 1)), &future);
  future.done.WaitForNotification();
  EXPECT_EQ(future.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(future.status.error_message(),
            absl::StrCat("chunk ", chunk, " is at step 0, push was for step 5"));

  grpc::ClientContext context;
  rpc::PullWeightsRequest request;
  request.set_worker_rank(kWorkers);
  rpc::PullWeightsResponse response;
  EXPECT_EQ(stubs_[0]->PullWeights(&context, request, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// The response of every worker refers to the one shared update (no copy per worker): what
// gRPC sends is the answer's fields, then the payload field whose bytes are the answer's own.
TEST(PushPullResponseBytesTest, ParsesAsTheResponseAndRefersToTheSharedUpdate) {
  std::shared_ptr<PullBuffers> pool = PullBuffers::Create(2);
  std::string encoded(300000, 'p');
  encoded[7] = '\0';
  const std::string aggregate = "round answer";
  Shard::PushAnswer answer;
  answer.step = 12;
  answer.update = pool->Share(std::string(encoded));
  answer.aggregate = &aggregate;
  for (int worker = 0; worker < 2; ++worker) {
    grpc::ByteBuffer bytes = PushPullResponseBytes(answer);
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(bytes.Dump(&slices).ok());
    ASSERT_EQ(slices.size(), 2u);
    EXPECT_EQ(static_cast<const void*>(slices[1].begin()),
              static_cast<const void*>(answer.update->data()))
        << "worker " << worker << "'s payload is a copy";
    rpc::PushPullResponse parsed;
    ASSERT_TRUE(grpc::SerializationTraits<rpc::PushPullResponse>::Deserialize(&bytes, &parsed)
                    .ok());
    EXPECT_EQ(parsed.step(), 12u);
    EXPECT_EQ(parsed.payload(), encoded);
    EXPECT_EQ(parsed.aggregate(), aggregate);
  }
  // The buffers hold the answer until gRPC lets go of them: the pool gets it back then.
  std::weak_ptr<const std::string> held = answer.update;
  {
    grpc::ByteBuffer in_flight = PushPullResponseBytes(answer);
    answer.update.reset();
    EXPECT_FALSE(held.expired()) << "freed while gRPC still sends it";
    EXPECT_EQ(pool->spare(), 0u);
  }
  EXPECT_TRUE(held.expired());
  EXPECT_EQ(pool->spare(), 1u);

  Shard::PushAnswer empty;
  empty.step = 3;
  empty.aggregate = &aggregate;
  grpc::ByteBuffer bytes = PushPullResponseBytes(empty);
  rpc::PushPullResponse parsed;
  ASSERT_TRUE(grpc::SerializationTraits<rpc::PushPullResponse>::Deserialize(&bytes, &parsed).ok());
  EXPECT_EQ(parsed.step(), 3u);
  EXPECT_EQ(parsed.payload(), "");
}

TEST_F(ServiceTest, ARequestThatIsNotAPushPullRequestIsRefusedAndChangesNothing) {
  const std::vector<float> before = shard_->Snapshot(shard_->chunk_ids().front())->weights;
  grpc::GenericStub generic(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
  const std::string garbage = "\x22\xff\xff\xff\xff\x0f";  // A field longer than the message.
  grpc::Slice slice(garbage);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ClientContext context;
  context.set_deadline(Soon());
  grpc::ByteBuffer response;
  std::promise<grpc::Status> answered;
  generic.UnaryCall(&context, "/tamp.rpc.ParameterServer/PushPull", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status status) { answered.set_value(std::move(status)); });
  const grpc::Status status = answered.get_future().get();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("not a tamp.rpc.PushPullRequest"));
  EXPECT_EQ(shard_->Snapshot(shard_->chunk_ids().front())->weights, before);
}

TEST_F(ServiceTest, APushForAnotherServerIncarnationIsRefusedUnavailable) {
  rpc::HandshakeRequest hello;
  FillHandshake(layout_, config_, 0, 0, 16, 32, &hello);
  rpc::HandshakeResponse response;
  ASSERT_TRUE(Handshake(0, hello, &response).ok());
  EXPECT_EQ(response.incarnation(), shard_->incarnation());
  EXPECT_NE(response.incarnation(), 0u);

  const uint32_t chunk = shard_->chunk_ids().front();
  const std::string payload =
      EncodePush(config_, layout_, 0, chunk, 0, TestGradient(Length(chunk), 0, 0));
  PushCall stale;
  stale.request.set_server_incarnation(response.incarnation() + 1);  // A restarted server's.
  StartPush(0, 0, chunk, payload, &stale);
  stale.done.WaitForNotification();
  EXPECT_EQ(stale.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(stale.status.error_message(), HasSubstr("server 0 restarted"));
  EXPECT_FALSE(shard_->Snapshot(chunk)->arrived[0]) << "a refused push must change nothing";

  PushCall current;  // The incarnation the handshake returned is accepted (parked).
  current.request.set_server_incarnation(response.incarnation());
  StartPush(0, 0, chunk, payload, &current);
  for (int i = 0; i < 200 && !shard_->Snapshot(chunk)->arrived[0]; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(shard_->Snapshot(chunk)->arrived[0]);
  shard_->Close(absl::UnavailableError("test over"));
  current.done.WaitForNotification();
}

// A restarted server of a REGISTERED model knows no tensors until a worker handshakes: a
// push carrying the earlier process's incarnation must make that worker re-handshake
// (UNAVAILABLE), not fail it; one without an incarnation is told why it cannot go.
TEST(ServiceWithoutShardTest, APushOfAWorkerThatKnewAnEarlierProcessIsUnavailable) {
  const config::RunConfig config = TestConfig([](config::RunConfig& c) {
    c.mutable_model()->Clear();
    c.mutable_model()->set_kind(config::Model::REGISTERED);
  });
  absl::StatusOr<std::unique_ptr<ShardHost>> host = ShardHost::Create(config, 0, nullptr);
  ASSERT_TRUE(host.ok()) << host.status();
  ParameterServerService service(host->get(), "");
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = rpc::ParameterServer::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  auto push = [&](uint64_t incarnation) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    rpc::PushPullRequest request;
    request.set_server_incarnation(incarnation);
    rpc::PushPullResponse response;
    return stub->PushPull(&context, request, &response);
  };
  const grpc::Status restarted = push(1234);
  EXPECT_EQ(restarted.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(restarted.error_message(), HasSubstr("server 0 restarted: re-handshake"));
  const grpc::Status fresh = push(0);
  EXPECT_EQ(fresh.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(fresh.error_message(), HasSubstr("does not know the job's tensors yet"));
  server->Shutdown();
}

TEST_F(ServiceTest, ShutdownAnswersAPushWaitingForItsStep) {
  const uint32_t chunk = shard_->chunk_ids().front();
  PushCall lonely;
  StartPush(0, 0, chunk,
            EncodePush(config_, layout_, 0, chunk, 0, TestGradient(Length(chunk), 0, 0)), &lonely);
  // Wait until the push is parked: worker 0 has arrived.
  while (!shard_->Snapshot(chunk)->arrived[0]) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_FALSE(lonely.done.HasBeenNotified());
  shard_->Close(absl::UnavailableError("server shutting down"));
  lonely.done.WaitForNotification();
  EXPECT_EQ(lonely.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(lonely.status.error_message(), "server shutting down");
}

// A worker rejoining (consistency.worker_timeout_ms, docs/consistency.md): the handshake
// reports the shard's latest step, a rejoin_at_step the shard has passed is refused with
// the reason, and an accepted one releases the step that waited only for the worker.
TEST_F(ServiceTest, RejoinHandshakeCountsTheWorkerFromTheAnnouncedStep) {
  const uint32_t chunk = shard_->chunk_ids().front();
  PushCall waiting;
  StartPush(0, 0, chunk,
            EncodePush(config_, layout_, 0, chunk, 0, TestGradient(Length(chunk), 0, 0)),
            &waiting);
  rpc::HandshakeRequest request;
  FillHandshake(layout_, config_, 1, 0, 16, 32, &request);
  rpc::HandshakeResponse response;
  ASSERT_TRUE(Handshake(1, request, &response).ok());
  EXPECT_EQ(response.latest_step(), 0u);
  EXPECT_FALSE(waiting.done.WaitForNotificationWithTimeout(absl::Milliseconds(100)));

  request.set_rejoin_at_step(1);
  const grpc::Status rejoined = Handshake(1, request, &response);
  ASSERT_TRUE(rejoined.ok()) << rejoined.error_message();
  waiting.done.WaitForNotification();
  ASSERT_TRUE(waiting.status.ok()) << waiting.status.error_message();
  EXPECT_EQ(waiting.response.step(), 1u);

  FillHandshake(layout_, config_, 1, 0, 16, 32, &request);
  ASSERT_TRUE(Handshake(1, request, &response).ok());
  EXPECT_EQ(response.latest_step(), 1u);
  EXPECT_EQ(response.step(), 0u) << "the shard's other chunks are at step 0";
  PushCall alone;
  StartPush(0, 1, chunk,
            EncodePush(config_, layout_, 1, chunk, 0, TestGradient(Length(chunk), 1, 0)),
            &alone);
  EXPECT_FALSE(alone.done.WaitForNotificationWithTimeout(absl::Milliseconds(100)))
      << "step 1 waits for the rejoined worker";
  PushCall late;
  StartPush(1, 1, chunk,
            EncodePush(config_, layout_, 1, chunk, 1, TestGradient(Length(chunk), 1, 1)),
            &late);
  alone.done.WaitForNotification();
  late.done.WaitForNotification();
  ASSERT_TRUE(late.status.ok()) << late.status.error_message();
  EXPECT_EQ(late.response.payload(), alone.response.payload());

  request.set_rejoin_at_step(1);
  const grpc::Status passed = Handshake(1, request, &response);
  EXPECT_EQ(passed.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(passed.error_message(),
              HasSubstr(absl::StrCat("chunk ", chunk, " is at step 2; rejoin at a later step")));
}

}  // namespace
}  // namespace tamp
