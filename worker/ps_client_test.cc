#include "worker/ps_client.h"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protocol/test_job.h"

namespace tamp {
namespace {

// Answers every handshake, and every push with its own payload reversed.
class EchoServer final : public rpc::ParameterServer::Service {
 public:
  grpc::Status Handshake(grpc::ServerContext*, const rpc::HandshakeRequest*,
                         rpc::HandshakeResponse* response) override {
    response->set_incarnation(1);
    return grpc::Status::OK;
  }
  grpc::Status PushPull(grpc::ServerContext*, const rpc::PushPullRequest* request,
                        rpc::PushPullResponse* response) override {
    response->set_payload(std::string(request->payload().rbegin(), request->payload().rend()));
    return grpc::Status::OK;
  }
};

class PsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    port_ = port;
    const std::string address = absl::StrCat("127.0.0.1:", port);
    // kTestJob has two shards; this one server plays both.
    absl::StatusOr<std::unique_ptr<PsClient>> client =
        PsClient::Connect(config_, layout_, /*worker_rank=*/0, {address, address},
                          /*steps_per_epoch=*/1, /*total_steps=*/1);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  void TearDown() override { server_->Shutdown(); }

  const config::RunConfig config_ = testing::TestConfig();
  const JobLayout layout_ = testing::TestLayout(config_);
  EchoServer service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<PsClient> client_;
};

TEST_F(PsClientTest, PushPullDeliversTheShardsAnswer) {
  std::promise<std::pair<absl::Status, std::string>> answered;
  client_->PushPull(0, 0, "abc", [&](absl::Status status, std::string update) {
    answered.set_value({std::move(status), std::move(update)});
  });
  const auto [status, update] = answered.get_future().get();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(update, "cba");
}

// The client must outlast every callback of its calls: each call's context holds a channel
// reference, and were the last one dropped on gRPC's thread after the owner had gone, gRPC
// would shut down on a detached thread racing the process's exit.
TEST_F(PsClientTest, DestructionWaitsForEveryCallbackInFlight) {
  std::promise<void> started;
  std::atomic<bool> finished{false};
  client_->PushPull(0, 0, "abc", [&](absl::Status status, std::string) {
    EXPECT_TRUE(status.ok()) << status;
    started.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    finished = true;
  });
  started.get_future().wait();
  client_.reset();
  EXPECT_TRUE(finished) << "~PsClient() returned while a callback was still running";
}

// A shard whose run is over: every handshake says the run's steps are done, and a pull
// gives its chunks' weights, all 0.5.
class FinishedShard final : public rpc::ParameterServer::Service {
 public:
  FinishedShard(const JobLayout& layout, uint32_t shard, uint64_t total_steps)
      : layout_(layout), shard_(shard), total_steps_(total_steps) {}
  grpc::Status Handshake(grpc::ServerContext*, const rpc::HandshakeRequest* request,
                         rpc::HandshakeResponse* response) override {
    if (request->rejoin_at_step() != 0) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "past the run's end");
    }
    response->set_incarnation(1);
    response->set_latest_step(total_steps_);
    return grpc::Status::OK;
  }
  grpc::Status PullWeights(grpc::ServerContext*, const rpc::PullWeightsRequest* request,
                           rpc::PullWeightsResponse* response) override {
    replica_pulls += request->replica() ? 1 : 0;
    response->set_step(total_steps_);
    for (uint32_t id : layout_.ChunksOfShard(shard_)) {
      const std::vector<float> values(layout_.chunks[id].chunk.length, 0.5f);
      rpc::ChunkWeights* chunk = response->add_chunks();
      chunk->set_chunk_id(id);
      chunk->set_values(reinterpret_cast<const char*>(values.data()),
                        values.size() * sizeof(float));
    }
    return grpc::Status::OK;
  }
  std::atomic<int> replica_pulls{0};

 private:
  const JobLayout& layout_;
  const uint32_t shard_;
  const uint64_t total_steps_;
};

// A worker dropped near the end, back once the run is over, has no step left to announce
// (a rejoin handshake would be refused): it takes the replica, the final weights the others
// hold, and hears that the run's steps are done.
TEST_F(PsClientTest, RejoinAfterTheRunEndedTakesTheFinalWeights) {
  constexpr uint64_t kTotalSteps = 20;
  std::vector<std::unique_ptr<FinishedShard>> shards;
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::vector<std::string> addresses;
  for (uint32_t shard = 0; shard < 2; ++shard) {
    shards.push_back(std::make_unique<FinishedShard>(layout_, shard, kTotalSteps));
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(shards.back().get());
    servers.push_back(builder.BuildAndStart());
    ASSERT_NE(servers.back(), nullptr);
    addresses.push_back(absl::StrCat("127.0.0.1:", port));
  }
  absl::StatusOr<std::unique_ptr<PsClient>> client =
      PsClient::Connect(config_, layout_, /*worker_rank=*/1, addresses,
                        /*steps_per_epoch=*/10, kTotalSteps);
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<float> params(layout_.total_elements, 0.0f);
  const absl::StatusOr<uint64_t> next = (*client)->Rejoin(absl::MakeSpan(params));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, kTotalSteps);
  for (float value : params) ASSERT_EQ(value, 0.5f);
  EXPECT_GT(shards[0]->replica_pulls, 0) << "the exact pull drops the others' pull residual";
  for (auto& server : servers) server->Shutdown();
}

// Each attempt waits for the server only what is left of checkpoint.reconnect_timeout_ms,
// not a whole cluster.connect_timeout_ms: a gone server is given up on near the budget.
TEST_F(PsClientTest, ReconnectGivesUpWithinItsBudget) {
  config::RunConfig config = config_;
  config.mutable_cluster()->set_connect_timeout_ms(20000);
  config.mutable_checkpoint()->set_reconnect_timeout_ms(500);
  const std::string address = absl::StrCat("127.0.0.1:", port_);
  absl::StatusOr<std::unique_ptr<PsClient>> client =
      PsClient::Connect(config, layout_, /*worker_rank=*/0, {address, address},
                        /*steps_per_epoch=*/1, /*total_steps=*/1);
  ASSERT_TRUE(client.ok()) << client.status();
  server_->Shutdown();
  const auto start = std::chrono::steady_clock::now();
  const absl::StatusOr<bool> back = (*client)->Reconnect(0, "a test");
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(absl::IsUnavailable(back.status())) << back.status();
  EXPECT_NE(back.status().message().find("did not come back within 500 ms"), std::string::npos)
      << back.status();
  // The budget and a backoff step, with room for a slow machine; 20 s were one attempt.
  EXPECT_LT(waited, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tamp
