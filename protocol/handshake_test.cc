#include "protocol/handshake.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protocol/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::TestConfig;
using ::tamp::testing::TestLayout;

// Server 0 of the test job checks what `worker_config` makes worker `worker` send to the
// server `addressed`.
absl::Status Check(const config::RunConfig& worker_config, uint32_t worker = 1,
                   uint32_t addressed = 0) {
  rpc::HandshakeRequest request;
  FillHandshake(TestLayout(worker_config), worker_config, worker, addressed, 16, 32, &request);
  const config::RunConfig server_config = TestConfig();
  return CheckHandshake(TestLayout(server_config), server_config, 0, request);
}

// Server 0 checks a request edited by `edit` after FillHandshake.
template <typename Edit>
absl::Status CheckEdited(Edit edit) {
  const config::RunConfig config = TestConfig();
  const JobLayout layout = TestLayout(config);
  rpc::HandshakeRequest request;
  FillHandshake(layout, config, 1, 0, 16, 32, &request);
  edit(request);
  return CheckHandshake(layout, config, 0, request);
}

void ExpectRefused(const absl::Status& status, absl::StatusCode code, const std::string& message) {
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_EQ(status.message(), message);
}

TEST(HandshakeTest, FillDescribesEveryChunk) {
  const config::RunConfig config = TestConfig();
  const JobLayout layout = TestLayout(config);
  rpc::HandshakeRequest request;
  FillHandshake(layout, config, 1, 0, 16, 32, &request);
  EXPECT_EQ(request.protocol_version(), kProtocolVersion);
  EXPECT_EQ(request.worker_rank(), 1u);
  EXPECT_EQ(request.num_workers(), 2u);
  EXPECT_EQ(request.num_servers(), 2u);
  EXPECT_EQ(request.server_rank(), 0u);
  EXPECT_EQ(request.steps_per_epoch(), 16u);
  EXPECT_EQ(request.total_steps(), 32u);
  // fc1.weight in four chunks of 784, then fc1.bias, fc2.weight, fc2.bias.
  ASSERT_EQ(request.chunks_size(), 7);
  const rpc::ChunkInfo& chunk = request.chunks(1);
  EXPECT_EQ(chunk.chunk_id(), 1u);
  EXPECT_EQ(chunk.tensor(), "fc1.weight");
  EXPECT_EQ(chunk.offset(), 784u);
  EXPECT_EQ(chunk.length(), 784u);
  EXPECT_EQ(chunk.shard(), layout.chunks[1].chunk.shard);
  EXPECT_EQ(chunk.compression().push().name(), "none");
  EXPECT_EQ(request.chunks(6).tensor(), "fc2.bias");
  // The tensors, in layout order, with their shapes.
  ASSERT_EQ(request.tensors_size(), 4);
  EXPECT_EQ(request.tensors(0).name(), "fc1.weight");
  EXPECT_EQ(std::vector<int64_t>(request.tensors(0).shape().begin(),
                                 request.tensors(0).shape().end()),
            (std::vector<int64_t>{4, 784}));
  EXPECT_EQ(request.tensors(3).name(), "fc2.bias");
}

TEST(HandshakeTest, TensorsThatDifferAreRefusedNamingTheFirstDifference) {
  ExpectRefused(CheckEdited([](rpc::HandshakeRequest& r) { r.mutable_tensors(2)->set_shape(0, 11); }),
                absl::StatusCode::kFailedPrecondition,
                "worker 1's tensors differ from server 0's: tensor 2: worker \"fc2.weight\" "
                "[11, 4] vs server \"fc2.weight\" [10, 4]");
  ExpectRefused(CheckEdited([](rpc::HandshakeRequest& r) { r.mutable_tensors(1)->set_name("fc1.b"); }),
                absl::StatusCode::kFailedPrecondition,
                "worker 1's tensors differ from server 0's: tensor 1: worker \"fc1.b\" [4] vs "
                "server \"fc1.bias\" [4]");
  ExpectRefused(CheckEdited([](rpc::HandshakeRequest& r) { r.mutable_tensors()->RemoveLast(); }),
                absl::StatusCode::kFailedPrecondition,
                "worker 1's tensors differ from server 0's: worker has 3 tensors, server 4; the "
                "first extra is tensor 3 (server) "
                "\"fc2.bias\" [10]");
}

TEST(HandshakeTest, AcceptsTheSameJob) {
  EXPECT_TRUE(Check(TestConfig()).ok()) << Check(TestConfig());
}

TEST(HandshakeTest, LeavesTheRunLengthToTheShard) {
  // The shard fixes the run's length from the first handshake (Membership::FixRunLength, through Shard::Join), so the
  // layout check neither needs nor compares it.
  EXPECT_TRUE(CheckEdited([](rpc::HandshakeRequest& r) {
                r.set_steps_per_epoch(7);
                r.set_total_steps(9);
              }).ok());
}

TEST(HandshakeTest, ProtocolVersion) {
  ExpectRefused(CheckEdited([](rpc::HandshakeRequest& r) { r.set_protocol_version(1); }),
                absl::StatusCode::kFailedPrecondition,
                "protocol_version: worker 1 speaks 1, server 0 speaks 3");
}

TEST(HandshakeTest, AddressedAnotherServer) {
  ExpectRefused(Check(TestConfig(), 1, 1), absl::StatusCode::kFailedPrecondition,
                "worker 1 addressed server 1 but this is server 0");
}

TEST(HandshakeTest, NumWorkers) {
  ExpectRefused(
      Check(TestConfig([](config::RunConfig& c) { c.mutable_cluster()->set_num_workers(3); })),
      absl::StatusCode::kFailedPrecondition, "num_workers: worker says 3, server 0 says 2");
}

TEST(HandshakeTest, NumServers) {
  ExpectRefused(
      Check(TestConfig([](config::RunConfig& c) { c.mutable_cluster()->set_num_servers(3); })),
      absl::StatusCode::kFailedPrecondition, "num_servers: worker says 3, server 0 says 2");
}

TEST(HandshakeTest, WorkerRankOutOfRange) {
  ExpectRefused(Check(TestConfig(), 2), absl::StatusCode::kInvalidArgument,
                "worker_rank 2 out of range: the job has 2 workers");
}

// Workers and servers started from configs of other modes would train wrongly without an
// error: an OPTIMIZER worker adds an AGGREGATE server's mean gradient to its weights.
TEST(HandshakeTest, ServerAndConsistencyModes) {
  ExpectRefused(Check(TestConfig([](config::RunConfig& c) {
                  c.mutable_server()->set_mode(config::Server::AGGREGATE);
                })),
                absl::StatusCode::kFailedPrecondition,
                "worker 1: server.mode differs: worker AGGREGATE vs server OPTIMIZER (started "
                "from another config)");
  ExpectRefused(Check(TestConfig([](config::RunConfig& c) {
                  c.mutable_consistency()->set_mode(config::Consistency::ASYNC);
                })),
                absl::StatusCode::kFailedPrecondition,
                "worker 1: consistency.mode differs: worker ASYNC vs server SYNC (started from "
                "another config)");
  // A worker that sends no server mode is not compared on it.
  EXPECT_TRUE(CheckEdited([](rpc::HandshakeRequest& r) {
                r.set_server_mode(config::Server::MODE_UNSPECIFIED);
              }).ok());
}

TEST(HandshakeTest, ChunkCount) {
  // 2048-byte partitions split fc1.weight (12544 bytes) into 7 chunks instead of 4.
  ExpectRefused(Check(TestConfig([](config::RunConfig& c) {
                  c.mutable_compression()->set_partition_bytes(2048);
                })),
                absl::StatusCode::kFailedPrecondition, "worker 1 has 10 chunks, server 0 has 7");
}

TEST(HandshakeTest, ChunkIdOrder) {
  ExpectRefused(CheckEdited([](rpc::HandshakeRequest& r) { r.mutable_chunks(2)->set_chunk_id(3); }),
                absl::StatusCode::kFailedPrecondition,
                "chunk 2 (fc1.weight [1568, +784]): worker sent chunk_id 3 in its place "
                "(chunks go in id order)");
}

TEST(HandshakeTest, Tensor) {
  ExpectRefused(
      CheckEdited([](rpc::HandshakeRequest& r) { r.mutable_chunks(4)->set_tensor("fc1.b"); }),
      absl::StatusCode::kFailedPrecondition,
      "chunk 4 (fc1.bias [0, +4]): tensor differs: worker \"fc1.b\" vs server \"fc1.bias\"");
}

TEST(HandshakeTest, Range) {
  ExpectRefused(CheckEdited([](rpc::HandshakeRequest& r) { r.mutable_chunks(3)->set_length(783); }),
                absl::StatusCode::kFailedPrecondition,
                "chunk 3 (fc1.weight [2352, +784]): range differs: worker [2352, +783] vs server "
                "[2352, +784]");
}

TEST(HandshakeTest, Shard) {
  const uint32_t owner = TestLayout(TestConfig()).chunks[5].chunk.shard;
  ExpectRefused(
      CheckEdited([&](rpc::HandshakeRequest& r) { r.mutable_chunks(5)->set_shard(1 - owner); }),
      absl::StatusCode::kFailedPrecondition,
      absl::StrCat("chunk 5 (fc2.weight [0, +40]): shard differs: worker ", 1 - owner,
                   " vs server ", owner));
}

TEST(HandshakeTest, PushCodec) {
  ExpectRefused(Check(TestConfig([](config::RunConfig& c) {
                  config::Codec* push =
                      c.mutable_compression()->mutable_default_compression()->mutable_push();
                  push->set_name("topk");
                  push->set_ratio(0.01);
                })),
                absl::StatusCode::kFailedPrecondition,
                "chunk 0 (fc1.weight [0, +784]): push codec differs: worker {name: \"topk\" "
                "ratio: 0.01} vs server {name: \"none\"}");
}

TEST(HandshakeTest, FirstDifferenceIsReported) {
  // Only fc2.* differs, so chunk 5 is the first chunk to differ.
  ExpectRefused(Check(TestConfig([](config::RunConfig& c) {
                  config::TensorOverride* o = c.mutable_compression()->add_tensor_overrides();
                  o->set_pattern("fc2.*");
                  o->mutable_compression()->mutable_push()->set_name("none");
                  o->mutable_compression()->mutable_pull()->set_name("topk");
                  o->mutable_compression()->mutable_pull()->set_count(3);
                })),
                absl::StatusCode::kFailedPrecondition,
                "chunk 5 (fc2.weight [0, +40]): pull codec differs: worker {name: \"topk\" "
                "count: 3} vs server {name: \"none\"}");
}

TEST(HandshakeTest, Feedback) {
  ExpectRefused(CheckEdited([](rpc::HandshakeRequest& r) {
                  r.mutable_chunks(0)->mutable_compression()->mutable_push_feedback()->set_kind(
                      config::ErrorFeedback::RESIDUAL);
                }),
                absl::StatusCode::kFailedPrecondition,
                "chunk 0 (fc1.weight [0, +784]): push feedback differs: worker {kind: RESIDUAL} "
                "vs server {}");
  ExpectRefused(CheckEdited([](rpc::HandshakeRequest& r) {
                  r.mutable_chunks(6)->mutable_compression()->mutable_pull_feedback()->set_kind(
                      config::ErrorFeedback::RESIDUAL);
                }),
                absl::StatusCode::kFailedPrecondition,
                "chunk 6 (fc2.bias [0, +10]): pull feedback differs: worker {kind: RESIDUAL} vs "
                "server {}");
}

}  // namespace
}  // namespace tamp
