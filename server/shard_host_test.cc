// model.kind REGISTERED on the server: the shard is made from the first accepted handshake's
// tensors (a refused one makes nothing), and worker 0 sets its initial weights once, before
// which pulls wait and pushes are refused; a restarted server resumes its checkpoint at the
// first handshake, refusing one of other tensors.
#include "server/shard_host.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/handshake.h"
#include "server/checkpoint.h"
#include "server/checkpointer.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

config::RunConfig RegisteredConfig() {
  return testing::TestConfig([](config::RunConfig& config) {
    config.mutable_model()->Clear();
    config.mutable_model()->set_kind(config::Model::REGISTERED);
  });
}

// A user's model: two tensors the built-in models do not have.
std::vector<TensorSpec> UserTensors() {
  TensorSpec a;
  a.name = "encoder.weight";
  a.shape = {3, 700};  // 2100 values: split into chunks of 1024 (partition_bytes 4096).
  TensorSpec b;
  b.name = "head.bias";
  b.shape = {5};
  return {a, b};
}

rpc::HandshakeRequest Request(const config::RunConfig& config, uint32_t worker,
                             std::vector<TensorSpec> tensors = UserTensors()) {
  absl::StatusOr<JobLayout> layout = BuildJobLayout(config, std::move(tensors));
  CHECK(layout.ok()) << layout.status();
  rpc::HandshakeRequest request;
  FillHandshake(*layout, config, worker, /*server_rank=*/0, 10, 20, &request);
  return request;
}

// Shard::InitWeights() with a response, which only the broadcast test reads.
absl::Status SetWeights(Shard& shard, uint32_t worker, const rpc::InitWeightsRequest& request,
                        rpc::InitWeightsResponse* response = nullptr) {
  rpc::InitWeightsResponse unread;
  return shard.InitWeights(worker, request, response != nullptr ? response : &unread);
}

rpc::InitWeightsRequest InitRequest(const Shard& shard, float value) {
  rpc::InitWeightsRequest request;
  for (uint32_t id : shard.layout().ChunksOfShard(shard.rank())) {
    const std::vector<float> values(shard.layout().chunks[id].chunk.length, value);
    rpc::ChunkWeights* weights = request.add_chunks();
    weights->set_chunk_id(id);
    weights->set_values(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  }
  return request;
}

TEST(ShardHostTest, RefusedHandshakesMakeNoShard) {
  const config::RunConfig config = RegisteredConfig();
  absl::StatusOr<std::unique_ptr<ShardHost>> host = ShardHost::Create(config, 0, nullptr);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ((*host)->shard(), nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition((*host)->Ready().status()));

  rpc::HandshakeRequest duplicate = Request(config, 1);
  duplicate.mutable_tensors(1)->set_name("encoder.weight");
  absl::StatusOr<Shard*> shard = (*host)->Join(duplicate);
  EXPECT_TRUE(absl::IsInvalidArgument(shard.status())) << shard.status();
  EXPECT_THAT(shard.status().message(), HasSubstr("the name is taken by an earlier tensor"));

  rpc::HandshakeRequest empty_dim = Request(config, 1);
  empty_dim.mutable_tensors(0)->set_shape(1, 0);
  EXPECT_TRUE(absl::IsInvalidArgument((*host)->Join(empty_dim).status()));

  rpc::HandshakeRequest no_length = Request(config, 1);
  no_length.set_total_steps(0);
  EXPECT_TRUE(absl::IsInvalidArgument((*host)->Join(no_length).status()));

  rpc::HandshakeRequest wrong_length = Request(config, 1);
  wrong_length.set_total_steps(7);  // The config's 2 epochs of 10 steps make 20.
  EXPECT_TRUE(absl::IsInvalidArgument((*host)->Join(wrong_length).status()));

  rpc::HandshakeRequest rejoin = Request(config, 1);
  rejoin.set_rejoin_at_step(1000000);
  EXPECT_TRUE(absl::IsFailedPrecondition((*host)->Join(rejoin).status()));
  EXPECT_EQ((*host)->shard(), nullptr) << "a refused handshake made the shard";

  // The first good one makes it; one with other tensors is refused naming the difference.
  shard = (*host)->Join(Request(config, 1));
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_NE(*shard, nullptr);
  EXPECT_EQ((*shard)->layout().tensors.size(), 2u);
  EXPECT_EQ((*shard)->layout().total_elements, 2105u);
  rpc::HandshakeRequest other = Request(config, 0);
  other.mutable_tensors(1)->set_shape(0, 6);
  const absl::Status refused = (*host)->Join(other).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("tensor 1: worker \"head.bias\" [6] vs server \"head.bias\" [5]"));
  // Worker 0 may be the one with the right tensors: the message names who set the layout.
  EXPECT_THAT(refused.message(),
              HasSubstr("(server 0 took the job's tensors from worker 1's handshake"));
  EXPECT_EQ(*(*host)->Join(Request(config, 0)), *shard);
}

TEST(ShardHostTest, AShardBeyondTheMachinesMemoryIsRefusedAndTheServerStaysUp) {
  config::RunConfig config = RegisteredConfig();
  config.mutable_compression()->set_partition_bytes(uint64_t{1} << 30);
  absl::StatusOr<std::unique_ptr<ShardHost>> host = ShardHost::Create(config, 0, nullptr);
  ASSERT_TRUE(host.ok()) << host.status();
  TensorSpec huge;
  huge.name = "embedding.weight";
  huge.shape = {int64_t{1} << 20, int64_t{1} << 20};  // 2^40 values: 4 TiB of fp32.
  const absl::Status refused = (*host)->Join(Request(config, 1, {huge})).status();
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("worker 1's tensors put "));
  EXPECT_THAT(refused.message(), HasSubstr("values on shard 0, which needs at least "));
  EXPECT_THAT(refused.message(), HasSubstr("GiB (the weights and the sum of the pushes"));
  EXPECT_THAT(refused.message(), HasSubstr("this machine has "));
  EXPECT_EQ((*host)->shard(), nullptr);
  // The server goes on: a job that fits takes it.
  absl::StatusOr<Shard*> shard = (*host)->Join(Request(config, 1));
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ((*shard)->layout().total_elements, 2105u);
}

TEST(ShardHostTest, WorkerZeroSetsTheInitialWeightsOnce) {
  const config::RunConfig config = RegisteredConfig();
  absl::StatusOr<std::unique_ptr<ShardHost>> host = ShardHost::Create(config, 0, nullptr);
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<Shard*> made = (*host)->Join(Request(config, 1));
  ASSERT_TRUE(made.ok()) << made.status();
  Shard& shard = **made;

  rpc::PullWeightsResponse pulled;
  ASSERT_TRUE(shard.PullWeights(1, &pulled).ok());
  EXPECT_TRUE(pulled.awaiting_initial_weights());
  EXPECT_EQ(pulled.chunks_size(), 0);
  absl::Status pushed;
  shard.PushPullRound(1, 0, 0, shard.layout().ChunksOfShard(0)[0], "",
                      [&](absl::Status status, const Shard::PushAnswer*) { pushed = status; });
  EXPECT_TRUE(absl::IsFailedPrecondition(pushed)) << pushed;
  EXPECT_THAT(pushed.message(), HasSubstr("worker 0 sets the initial weights"));

  EXPECT_TRUE(absl::IsFailedPrecondition(SetWeights(shard, 1, InitRequest(shard, 2.0f))));
  rpc::InitWeightsRequest short_chunk = InitRequest(shard, 2.0f);
  short_chunk.mutable_chunks(0)->mutable_values()->resize(4);
  const absl::Status refused = SetWeights(shard, 0, short_chunk);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("(encoder.weight) needs"));
  ASSERT_TRUE(shard.PullWeights(1, &pulled).ok());
  EXPECT_TRUE(pulled.awaiting_initial_weights()) << "a refused InitWeights set weights";

  ASSERT_TRUE(SetWeights(shard, 0, InitRequest(shard, 2.0f)).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(SetWeights(shard, 0, InitRequest(shard, 3.0f))));
  ASSERT_TRUE(shard.PullWeights(1, &pulled).ok());
  EXPECT_FALSE(pulled.awaiting_initial_weights());
  ASSERT_EQ(static_cast<size_t>(pulled.chunks_size()), shard.layout().ChunksOfShard(0).size());
  for (const rpc::ChunkWeights& chunk : pulled.chunks()) {
    std::vector<float> values(chunk.values().size() / sizeof(float));
    std::memcpy(values.data(), chunk.values().data(), chunk.values().size());
    for (float v : values) ASSERT_EQ(v, 2.0f) << "chunk " << chunk.chunk_id();
  }
}

// A broadcast before the first step: worker 0's weights of generation g replace g - 1's
// once every worker has pulled g - 1 (till then it sets nothing and names those that have
// not), pulls for g wait until then, and once a step has completed the weights stay the
// run's.
TEST(ShardHostTest, ABroadcastReplacesTheWeightsBeforeTheFirstStepOnly) {
  const config::RunConfig config = RegisteredConfig();
  absl::StatusOr<std::unique_ptr<ShardHost>> host = ShardHost::Create(config, 0, nullptr);
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<Shard*> made = (*host)->Join(Request(config, 0));
  ASSERT_TRUE(made.ok()) << made.status();
  Shard& shard = **made;
  ASSERT_TRUE((*host)->Join(Request(config, 1)).ok());
  rpc::InitWeightsResponse response;
  auto generation = [&shard, &response](uint32_t g, float value) {
    rpc::InitWeightsRequest request = InitRequest(shard, value);
    request.set_generation(g);
    return SetWeights(shard, 0, request, &response);
  };
  auto pulled_value = [&shard](uint32_t min_generation) -> std::optional<float> {
    rpc::PullWeightsResponse pulled;
    const absl::Status status = shard.PullWeights(1, &pulled, min_generation);
    EXPECT_TRUE(status.ok()) << status;
    if (pulled.awaiting_initial_weights()) return std::nullopt;
    float value = 0;
    std::memcpy(&value, pulled.chunks(0).values().data(), sizeof(float));
    return value;
  };

  const absl::Status early = generation(2, 5.0f);
  EXPECT_TRUE(absl::IsFailedPrecondition(early)) << early;
  EXPECT_THAT(early.message(), HasSubstr("holds generation 0 (worker 0 has not set"));
  ASSERT_TRUE(SetWeights(shard, 0, InitRequest(shard, 2.0f)).ok());  // Generation 1.
  EXPECT_EQ(pulled_value(2), std::nullopt) << "a pull for generation 2 did not wait";
  EXPECT_TRUE(absl::IsFailedPrecondition(generation(3, 5.0f)));
  EXPECT_TRUE(absl::IsFailedPrecondition(SetWeights(shard, 1, [&] {
    rpc::InitWeightsRequest request = InitRequest(shard, 5.0f);
    request.set_generation(2);
    return request;
  }())));
  // Worker 1 has not pulled generation 1 yet: the broadcast waits for it.
  ASSERT_TRUE(generation(2, 5.0f).ok());
  EXPECT_TRUE(response.awaiting_readers());
  EXPECT_THAT(response.unread_workers(), ::testing::ElementsAre(1u));
  EXPECT_EQ(pulled_value(1), 2.0f) << "a broadcast that waited set weights";
  ASSERT_TRUE(generation(2, 5.0f).ok());
  EXPECT_FALSE(response.awaiting_readers());
  EXPECT_TRUE(absl::IsAlreadyExists(generation(2, 6.0f)));  // A retry: the first one stands.
  EXPECT_EQ(pulled_value(2), 5.0f);
  EXPECT_EQ(pulled_value(0), 5.0f);

  // Step 0 of one chunk completes: the weights are the run's from then on.
  const uint32_t chunk = shard.layout().ChunksOfShard(0)[0];
  const std::vector<float> gradient(shard.layout().chunks[chunk].chunk.length, 1.0f);
  for (uint32_t worker : {0u, 1u}) {
    testing::Answer answer;
    shard.PushPullRound(worker, 0, 0, chunk,
                        testing::EncodePush(config, shard.layout(), 0, chunk, worker, gradient),
                        testing::Record(&answer));
    if (worker == 1) {
      ASSERT_TRUE(answer.status.ok()) << answer.status;
    }
  }
  const absl::Status late = generation(3, 7.0f);
  EXPECT_TRUE(absl::IsFailedPrecondition(late)) << late;
  EXPECT_THAT(late.message(), HasSubstr("only before its first step"));
  EXPECT_NE(pulled_value(0), 7.0f);
}

TEST(ShardHostTest, BuiltInModelsGetTheirShardAtOnce) {
  const config::RunConfig config = testing::TestConfig();
  int created = 0;
  absl::StatusOr<std::unique_ptr<ShardHost>> host =
      ShardHost::Create(config, 1, [&](Shard&) {
        ++created;
        return absl::OkStatus();
      });
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_NE((*host)->shard(), nullptr);
  EXPECT_EQ(created, 1);
  rpc::InitWeightsRequest request = InitRequest(*(*host)->shard(), 1.0f);
  EXPECT_TRUE(absl::IsFailedPrecondition(SetWeights(*(*host)->shard(), 0, request)));
}


TEST(ShardHostTest, AFailingHookRefusesTheHandshakeAndKeepsNoShard) {
  const config::RunConfig config = RegisteredConfig();
  bool fail = true;
  absl::StatusOr<std::unique_ptr<ShardHost>> host =
      ShardHost::Create(config, 0, [&](Shard&) {
        return fail ? absl::DataLossError("shard-0.ckpt: damaged") : absl::OkStatus();
      });
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<Shard*> refused = (*host)->Join(Request(config, 0));
  EXPECT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
  EXPECT_EQ((*host)->shard(), nullptr);
  fail = false;
  EXPECT_TRUE((*host)->Join(Request(config, 0)).ok());
  EXPECT_NE((*host)->shard(), nullptr);
}

// The checkpointer as tamp_server runs it: resuming each shard it makes.
absl::StatusOr<std::unique_ptr<ShardHost>> CheckpointedHost(
    const config::RunConfig& config, std::unique_ptr<Checkpointer>* checkpointer) {
  return ShardHost::Create(config, 0, [&config, checkpointer](Shard& shard) -> absl::Status {
    TAMP_ASSIGN_OR_RETURN(*checkpointer, Checkpointer::Start(&shard, config.checkpoint()));
    return absl::OkStatus();
  });
}

TEST(ShardHostTest, ARestartedShardResumesItsCheckpointAtTheFirstHandshake) {
  const std::string dir = ::testing::TempDir() + "/registered_checkpoint";
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  config::RunConfig config = RegisteredConfig();
  config.mutable_checkpoint()->set_dir(dir);
  {  // The first run: worker 0's weights, then a checkpoint (as at every_steps).
    absl::StatusOr<std::unique_ptr<ShardHost>> host = ShardHost::Create(config, 0, nullptr);
    ASSERT_TRUE(host.ok()) << host.status();
    absl::StatusOr<Shard*> shard = (*host)->Join(Request(config, 0));
    ASSERT_TRUE(shard.ok()) << shard.status();
    ASSERT_TRUE(SetWeights(**shard, 0, InitRequest(**shard, 2.5f)).ok());
    ASSERT_TRUE(WriteCheckpoint(CheckpointPath(dir, 0),
                                DescribeJob(config, (*shard)->layout(), 0),
                                (*shard)->ExportState())
                    .ok());
  }
  // Restarted: nothing until a handshake teaches it the tensors; then the checkpoint's
  // weights, with no InitWeights() to wait for.
  std::unique_ptr<Checkpointer> checkpointer;
  absl::StatusOr<std::unique_ptr<ShardHost>> host = CheckpointedHost(config, &checkpointer);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(checkpointer, nullptr);
  absl::StatusOr<Shard*> shard = (*host)->Join(Request(config, 1));
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_NE(checkpointer, nullptr);
  rpc::PullWeightsResponse pulled;
  ASSERT_TRUE((*shard)->PullWeights(1, &pulled).ok());
  EXPECT_FALSE(pulled.awaiting_initial_weights());
  ASSERT_GT(pulled.chunks_size(), 0);
  for (const rpc::ChunkWeights& chunk : pulled.chunks()) {
    std::vector<float> values(chunk.values().size() / sizeof(float));
    std::memcpy(values.data(), chunk.values().data(), chunk.values().size());
    for (float v : values) ASSERT_EQ(v, 2.5f) << "chunk " << chunk.chunk_id();
  }
  EXPECT_TRUE(absl::IsAlreadyExists(SetWeights(**shard, 0, InitRequest(**shard, 1.0f))));

  checkpointer.reset();  // That server has gone (its checkpoint's lock with it).

  // Tensors of the same sizes in other shapes chunk alike, yet are another model: the
  // checkpoint is refused, naming the file and the tensors, and no shard is kept.
  std::vector<TensorSpec> reshaped = UserTensors();
  reshaped[0].shape = {700, 3};
  std::unique_ptr<Checkpointer> other_checkpointer;
  absl::StatusOr<std::unique_ptr<ShardHost>> other = CheckpointedHost(config, &other_checkpointer);
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<Shard*> refused = (*other)->Join(Request(config, 0, reshaped));
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("shard-0.ckpt"));
  EXPECT_THAT(refused.status().message(), HasSubstr("another job"));
  EXPECT_THAT(refused.status().message(), HasSubstr("tensors"));
  EXPECT_EQ((*other)->shard(), nullptr);
  EXPECT_EQ(other_checkpointer, nullptr);
}

}  // namespace
}  // namespace tamp
