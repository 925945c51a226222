#include "server/checkpoint.h"

#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "job/config.h"
#include "server/checkpointer.h"
#include "server/shard.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

std::string Floats(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// A state with every field set, shaped like shard 1 of the test job.
checkpoint::ShardState SomeState() {
  checkpoint::ShardState state;
  for (uint32_t id : {1u, 3u}) {
    checkpoint::ChunkState* chunk = state.add_chunks();
    chunk->set_chunk_id(id);
    chunk->set_step(40 + id);
    chunk->set_weights(Floats({0.5f, -1.25f, 3.0f, static_cast<float>(id)}));
    chunk->add_optimizer_state(Floats({0.125f, 0.25f, 0.0f, -2.0f}));
    chunk->add_pull_feedback_state(Floats({1e-3f, 0, 0, 0}));
    chunk->set_nonfinite_skipped(id);
  }
  return state;
}

class CheckpointTest : public ::testing::Test {
 protected:
  const config::RunConfig config_ = testing::TestConfig();
  const JobLayout layout_ = testing::TestLayout(config_);
  const checkpoint::JobIdentity job_ = DescribeJob(config_, layout_, 1);
};

TEST_F(CheckpointTest, RoundTripsThroughBytes) {
  const std::string bytes = SerializeCheckpoint(job_, SomeState());
  absl::StatusOr<checkpoint::ShardState> read = ParseCheckpoint(bytes, "mem", job_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*read, SomeState()));
  // The header: magic, version 1, then the body length that makes the file add up.
  EXPECT_EQ(bytes.substr(0, 8), "TAMPCKPT");
  uint32_t version;
  std::memcpy(&version, bytes.data() + 8, 4);
  EXPECT_EQ(version, kCheckpointVersion);
  uint64_t body;
  std::memcpy(&body, bytes.data() + 20, 8);
  EXPECT_EQ(body + 28 + 4, bytes.size());
}

TEST_F(CheckpointTest, RefusesEverySingleByteCorruption) {
  const std::string bytes = SerializeCheckpoint(job_, SomeState());
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (const unsigned char flip : {0x01, 0x80, 0xff}) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(static_cast<unsigned char>(bad[i]) ^ flip);
      absl::StatusOr<checkpoint::ShardState> read = ParseCheckpoint(bad, "ckpt/shard-1.ckpt", job_);
      ASSERT_FALSE(read.ok()) << "byte " << i << " ^ " << int{flip} << " was accepted";
      EXPECT_THAT(read.status().message(), HasSubstr("ckpt/shard-1.ckpt: "));
    }
  }
}

TEST_F(CheckpointTest, RefusesEveryTruncationAndTrailingBytes) {
  const std::string bytes = SerializeCheckpoint(job_, SomeState());
  for (size_t size = 0; size < bytes.size(); ++size) {
    absl::StatusOr<checkpoint::ShardState> read =
        ParseCheckpoint(bytes.substr(0, size), "f", job_);
    ASSERT_FALSE(read.ok()) << "a prefix of " << size << " bytes was accepted";
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  }
  absl::StatusOr<checkpoint::ShardState> longer = ParseCheckpoint(bytes + "x", "f", job_);
  EXPECT_EQ(longer.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(longer.status().message(), HasSubstr("trailing bytes"));
  EXPECT_THAT(ParseCheckpoint(bytes.substr(0, bytes.size() - 1), "f", job_).status().message(),
              HasSubstr("truncated"));
}

// SomeState() in a file of format `version`, sealed with a valid CRC, as a build of that
// version would have written it.
std::string WithVersion(const checkpoint::JobIdentity& job, uint32_t version) {
  std::string bytes = SerializeCheckpoint(job, SomeState());
  std::memcpy(&bytes[8], &version, 4);
  bytes.resize(bytes.size() - 4);
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));
  bytes.append(reinterpret_cast<const char*>(&crc), 4);
  return bytes;
}

TEST_F(CheckpointTest, RefusesAnotherFormatVersionEvenWithAValidChecksum) {
  for (const uint32_t version : {kOldestCheckpointVersion - 1, kCheckpointVersion + 1}) {
    absl::StatusOr<checkpoint::ShardState> read =
        ParseCheckpoint(WithVersion(job_, version), "f", job_);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(read.status().message(),
                HasSubstr(absl::StrCat("format version ", version,
                                       ", this build reads versions 1 to 2")));
  }
}

// Version 1 (SYNC only, no worker counts) is what version 2 writes for SYNC: read as is.
TEST_F(CheckpointTest, ReadsVersionOneFiles) {
  absl::StatusOr<checkpoint::ShardState> read = ParseCheckpoint(WithVersion(job_, 1), "f", job_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*read, SomeState()));
}

TEST_F(CheckpointTest, RefusesACheckpointOfAnotherShardOrConfig) {
  const std::string bytes = SerializeCheckpoint(job_, SomeState());

  absl::StatusOr<checkpoint::ShardState> other_shard =
      ParseCheckpoint(bytes, "f", DescribeJob(config_, layout_, 0));
  EXPECT_EQ(other_shard.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other_shard.status().message(), HasSubstr("written for another job"));
  EXPECT_THAT(other_shard.status().message(), HasSubstr("shard_rank: 1"))
      << other_shard.status();

  const config::RunConfig adam = testing::TestConfig([](config::RunConfig& c) {
    c.mutable_optimizer()->set_name("adam");
    c.mutable_optimizer()->set_learning_rate(0.001f);
  });
  absl::StatusOr<checkpoint::ShardState> other_optimizer =
      ParseCheckpoint(bytes, "f", DescribeJob(adam, testing::TestLayout(adam), 1));
  EXPECT_EQ(other_optimizer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other_optimizer.status().message(), HasSubstr("optimizer.name"))
      << other_optimizer.status();

  const config::RunConfig topk = testing::TestConfig([](config::RunConfig& c) {
    c.mutable_compression()->set_min_compress_bytes(0);
    config::Codec* push = c.mutable_compression()->mutable_default_compression()->mutable_push();
    push->set_name("topk");
    push->set_ratio(0.5);
  });
  absl::StatusOr<checkpoint::ShardState> other_codec =
      ParseCheckpoint(bytes, "f", DescribeJob(topk, testing::TestLayout(topk), 1));
  EXPECT_EQ(other_codec.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other_codec.status().message(), HasSubstr("compression.push"))
      << other_codec.status();

  const config::RunConfig bigger = testing::TestConfig(
      [](config::RunConfig& c) { c.mutable_model()->set_hidden(0, 8); });
  EXPECT_EQ(ParseCheckpoint(bytes, "f", DescribeJob(bigger, testing::TestLayout(bigger), 1))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);

  // model.kind REGISTERED: another model is named by its first differing tensor, before the
  // chunk ranges that follow from it.
  checkpoint::JobIdentity registered = job_;
  rpc::TensorInfo* weight = registered.add_tensors();
  weight->set_name("fc1.weight");
  weight->add_shape(256);
  weight->add_shape(784);
  checkpoint::JobIdentity narrower = registered;
  narrower.mutable_tensors(0)->set_shape(0, 128);
  absl::StatusOr<checkpoint::ShardState> other_model =
      ParseCheckpoint(SerializeCheckpoint(registered, SomeState()), "f", narrower);
  EXPECT_EQ(other_model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other_model.status().message(),
              HasSubstr("written for another job (checkpoint -> this server): tensor 0: "
                        "\"fc1.weight\" [256, 784] -> \"fc1.weight\" [128, 784]; "))
      << other_model.status();
}

TEST_F(CheckpointTest, WritesAtomicallyAndReadsBack) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/ckpt-", getpid(), "/nested");
  const std::string path = CheckpointPath(dir, 1);
  EXPECT_EQ(path, dir + "/shard-1.ckpt");
  EXPECT_EQ(ReadCheckpoint(path, job_).status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(WriteCheckpoint(path, job_, SomeState()).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  absl::StatusOr<checkpoint::ShardState> read = ReadCheckpoint(path, job_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*read, SomeState()));

  // A second write replaces the first whole.
  checkpoint::ShardState later = SomeState();
  later.mutable_chunks(0)->set_step(99);
  ASSERT_TRUE(WriteCheckpoint(path, job_, later).ok());
  read = ReadCheckpoint(path, job_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->chunks(0).step(), 99u);

  // A damaged file on disk is refused, naming it.
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(40);
    const char byte = static_cast<char>(file.get());
    file.seekp(40);
    file.put(static_cast<char>(byte ^ 0x10));
  }
  read = ReadCheckpoint(path, job_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr(path));

  // A directory where the file should be is named as such (read, it seemed an empty file).
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  read = ReadCheckpoint(path, job_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(read.status().message(), HasSubstr(path + " is a directory, not a checkpoint file"));
  std::filesystem::remove_all(absl::StrCat(::testing::TempDir(), "/ckpt-", getpid()));
}

// ---- Shard::ExportState / Restore, and how a restored shard follows the workers ----

// Momentum SGD (optimizer state) and a top-k pull with a residual (pull-side memory).
config::RunConfig StatefulConfig() {
  return testing::TestConfig([](config::RunConfig& c) {
    c.mutable_optimizer()->set_momentum(0.9f);
    c.mutable_compression()->set_min_compress_bytes(0);
    config::ChunkCompression* chunk = c.mutable_compression()->mutable_default_compression();
    chunk->mutable_pull()->set_name("topk");
    chunk->mutable_pull()->set_ratio(0.25);
    chunk->mutable_pull_feedback()->set_kind(config::ErrorFeedback::RESIDUAL);
    c.mutable_checkpoint()->set_dir("unused");
  });
}

using ::tamp::testing::Answer;

void Push(Shard& shard, const JobLayout& layout, uint32_t worker, uint64_t step, uint32_t chunk,
          Answer* answer) {
  const std::string payload = testing::EncodePush(
      shard.config(), layout, step, chunk, worker,
      testing::TestGradient(layout.chunks[chunk].chunk.length, step, worker));
  shard.PushPullRound(worker, step, 0, chunk, payload, testing::Record(answer));
}

// Both workers push every chunk of `shard` for `step`; the answers, by chunk.
std::vector<Answer> Step(Shard& shard, const JobLayout& layout, uint64_t step) {
  std::vector<Answer> answers(layout.chunks.size());
  for (uint32_t id : shard.chunk_ids()) {
    for (uint32_t worker = 0; worker < 2; ++worker) {
      Push(shard, layout, worker, step, id, &answers[id]);
    }
  }
  return answers;
}

std::unique_ptr<Shard> NewShard(const config::RunConfig& config, const JobLayout& layout) {
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config, layout, 1);
  CHECK(shard.ok()) << shard.status();
  return *std::move(shard);
}

TEST(ShardRestoreTest, ARestoredShardContinuesBitForBit) {
  const config::RunConfig config = StatefulConfig();
  const JobLayout layout = testing::TestLayout(config);
  std::unique_ptr<Shard> original = NewShard(config, layout);
  for (uint64_t step = 0; step < 3; ++step) Step(*original, layout, step);

  // Through the file format, as a restarted server reads it.
  const checkpoint::JobIdentity job = DescribeJob(config, layout, 1);
  absl::StatusOr<checkpoint::ShardState> saved =
      ParseCheckpoint(SerializeCheckpoint(job, original->ExportState()), "mem", job);
  ASSERT_TRUE(saved.ok()) << saved.status();
  std::unique_ptr<Shard> restored = NewShard(config, layout);
  ASSERT_TRUE(restored->Restore(*saved).ok());
  EXPECT_EQ(restored->step(), 3u);
  EXPECT_NE(restored->incarnation(), original->incarnation());
  for (uint32_t id : original->chunk_ids()) {
    const Shard::ChunkSnapshot a = *original->Snapshot(id);
    const Shard::ChunkSnapshot b = *restored->Snapshot(id);
    EXPECT_EQ(a.weights, b.weights);
    EXPECT_EQ(a.pull_residual, b.pull_residual);
    EXPECT_NE(std::count(a.pull_residual.begin(), a.pull_residual.end(), 0.0f),
              static_cast<long>(a.pull_residual.size()))
        << "the test needs a non-zero pull residual";
  }
  // Two more steps: the same answers and weights (momentum and residual were restored).
  for (uint64_t step = 3; step < 5; ++step) {
    const std::vector<Answer> want = Step(*original, layout, step);
    const std::vector<Answer> got = Step(*restored, layout, step);
    for (uint32_t id : original->chunk_ids()) {
      ASSERT_TRUE(got[id].status.ok()) << got[id].status;
      EXPECT_EQ(got[id].update, want[id].update) << "chunk " << id << " step " << step;
      EXPECT_EQ(got[id].step, step + 1);
    }
  }
  for (uint32_t id : original->chunk_ids()) {
    EXPECT_EQ(restored->Snapshot(id)->weights, original->Snapshot(id)->weights);
  }
}

// The run's steps per epoch travel with the state: a shard restored from it refuses workers
// that count other steps per epoch (another data.batch_size), whose epochs and schedule are
// not the checkpoint's; the run's total length may change (a run resumed to train longer).
TEST(ShardRestoreTest, ARestoredShardHoldsWorkersToTheCheckpointsStepsPerEpoch) {
  const config::RunConfig config = StatefulConfig();
  const JobLayout layout = testing::TestLayout(config);
  std::unique_ptr<Shard> original = NewShard(config, layout);
  ASSERT_TRUE(original->Join(0, 16, TotalSteps(config.training(), 16), 0).ok());
  Step(*original, layout, 0);
  const checkpoint::JobIdentity job = DescribeJob(config, layout, 1);
  absl::StatusOr<checkpoint::ShardState> saved =
      ParseCheckpoint(SerializeCheckpoint(job, original->ExportState()), "mem", job);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->steps_per_epoch(), 16u);

  std::unique_ptr<Shard> restored = NewShard(config, layout);
  ASSERT_TRUE(restored->Restore(*saved).ok());
  EXPECT_TRUE(restored->run_length() == Shard::RunLength{}) << "the first handshake fixes it";
  const absl::Status other = restored->Join(0, 8, TotalSteps(config.training(), 8), 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(other)) << other;
  EXPECT_THAT(other.message(), HasSubstr("steps_per_epoch: worker says 8, but server 1's "
                                         "checkpoint was written with 16 steps per epoch "
                                         "(changed since: data.batch_size"));
  EXPECT_TRUE(restored->run_length() == Shard::RunLength{}) << "a refusal fixes nothing";
  config::RunConfig longer = config;
  longer.mutable_training()->set_epochs(config.training().epochs() + 1);
  std::unique_ptr<Shard> resumed_longer = NewShard(longer, layout);
  ASSERT_TRUE(resumed_longer->Restore(*saved).ok());
  const uint64_t total = TotalSteps(longer.training(), 16);
  ASSERT_GT(total, TotalSteps(config.training(), 16));
  EXPECT_TRUE(resumed_longer->Join(0, 16, total, 0).ok());

  // A state saved before any handshake pins nothing.
  std::unique_ptr<Shard> from_unjoined = NewShard(config, layout);
  ASSERT_TRUE(from_unjoined->Restore(NewShard(config, layout)->ExportState()).ok());
  EXPECT_TRUE(from_unjoined->Join(0, 8, TotalSteps(config.training(), 8), 0).ok());
}

TEST(ShardRestoreTest, ARestoredChunkFollowsTheFurthestWorker) {
  const config::RunConfig config = StatefulConfig();
  const JobLayout layout = testing::TestLayout(config);
  std::unique_ptr<Shard> original = NewShard(config, layout);
  Step(*original, layout, 0);
  Step(*original, layout, 1);
  const checkpoint::ShardState saved = original->ExportState();  // At step 2.
  std::unique_ptr<Shard> restored = NewShard(config, layout);
  ASSERT_TRUE(restored->Restore(saved).ok());
  const uint32_t chunk = restored->chunk_ids()[0];
  const std::vector<float> weights = restored->Snapshot(chunk)->weights;

  // The lost server reached step 6: worker 1 had all of step 5's answers, worker 0 lost one.
  Answer behind, ahead, behind_again, caught_up;
  Push(*restored, layout, 0, 5, chunk, &behind);
  EXPECT_EQ(behind.calls, 0);  // Parked: the chunk now follows step 5.
  Push(*restored, layout, 1, 6, chunk, &ahead);
  EXPECT_EQ(behind.calls, 1);
  EXPECT_EQ(behind.status.code(), absl::StatusCode::kOutOfRange) << behind.status;
  EXPECT_THAT(std::string(behind.status.message()), HasSubstr("step 5 is behind it"));
  Push(*restored, layout, 0, 4, chunk, &behind_again);
  EXPECT_EQ(behind_again.status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ahead.calls, 0);
  // Nothing of step 5 was applied; worker 0 pushes step 6 and the step completes.
  EXPECT_EQ(restored->Snapshot(chunk)->weights, weights);
  Push(*restored, layout, 0, 6, chunk, &caught_up);
  ASSERT_TRUE(caught_up.status.ok()) << caught_up.status;
  EXPECT_EQ(caught_up.step, 7u);
  EXPECT_EQ(ahead.update, caught_up.update);
  EXPECT_NE(restored->Snapshot(chunk)->weights, weights);
  // In lock step again: a late push of an old step is the ordinary error.
  Answer late;
  Push(*restored, layout, 1, 5, chunk, &late);
  EXPECT_EQ(late.status.code(), absl::StatusCode::kFailedPrecondition) << late.status;
}

// A restored chunk does not know the workers' step, so a push or rejoin past its own step is
// bounded by the run's end instead (the test job: 16 steps per epoch, 2 epochs).
TEST(ShardRestoreTest, ARestoredShardBoundsStepsByTheRunsEnd) {
  const config::RunConfig config = StatefulConfig();
  const JobLayout layout = testing::TestLayout(config);
  std::unique_ptr<Shard> original = NewShard(config, layout);
  Step(*original, layout, 0);
  Step(*original, layout, 1);
  const checkpoint::ShardState saved = original->ExportState();  // At step 2.
  std::unique_ptr<Shard> restored = NewShard(config, layout);
  ASSERT_TRUE(restored->Restore(saved).ok());
  ASSERT_TRUE(restored->Join(0, 16, 32, 0).ok());
  const uint32_t chunk = restored->chunk_ids()[0];
  const Shard::ChunkSnapshot before = *restored->Snapshot(chunk);

  Answer past;
  Push(*restored, layout, 0, 32, chunk, &past);
  EXPECT_EQ(past.status.code(), absl::StatusCode::kInvalidArgument) << past.status;
  EXPECT_EQ(restored->Snapshot(chunk)->step, before.step);
  EXPECT_EQ(restored->Snapshot(chunk)->arrived, before.arrived);
  EXPECT_EQ(testing::Rejoin(*restored, 1, 33).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(restored->members()[1].from_step, 0u);
  // The workers may be well past the checkpoint's step 2.
  EXPECT_TRUE(testing::Rejoin(*restored, 1, 20).ok());
  EXPECT_EQ(restored->members()[1].from_step, 20u);
}

TEST(ShardRestoreTest, RefusesAStateThatDoesNotFitAndChangesNothing) {
  const config::RunConfig config = StatefulConfig();
  const JobLayout layout = testing::TestLayout(config);
  std::unique_ptr<Shard> shard = NewShard(config, layout);
  Step(*shard, layout, 0);
  const checkpoint::ShardState good = shard->ExportState();
  std::unique_ptr<Shard> fresh = NewShard(config, layout);
  const uint32_t chunk = fresh->chunk_ids().back();
  const std::vector<float> before = fresh->Snapshot(chunk)->weights;

  checkpoint::ShardState short_weights = good;
  short_weights.mutable_chunks(short_weights.chunks_size() - 1)->mutable_weights()->pop_back();
  absl::Status status = fresh->Restore(short_weights);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(absl::StrCat("chunk ", chunk, ": weights")));

  checkpoint::ShardState no_momentum = good;
  no_momentum.mutable_chunks(0)->clear_optimizer_state();
  status = fresh->Restore(no_momentum);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("0 optimizer state buffers, this job has 1"));

  checkpoint::ShardState fewer = good;
  fewer.mutable_chunks()->RemoveLast();
  EXPECT_EQ(fresh->Restore(fewer).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(fresh->step(), 0u);
  EXPECT_EQ(fresh->Snapshot(chunk)->weights, before);
  ASSERT_TRUE(fresh->Restore(good).ok());
  EXPECT_EQ(fresh->step(), 1u);
}

// StatefulConfig() in ASYNC, or in SSP with staleness `tau` (> 0).
config::RunConfig AsyncConfig(uint64_t tau = 0) {
  config::RunConfig config = StatefulConfig();
  config.mutable_consistency()->set_mode(tau == 0 ? config::Consistency::ASYNC
                                                  : config::Consistency::SSP);
  config.mutable_consistency()->set_staleness(tau);
  return config;
}

// The state through the file format, as a restarted server reads it, restored into a new
// shard.
std::unique_ptr<Shard> RestartFrom(const Shard& original, const JobLayout& layout) {
  const checkpoint::JobIdentity job = DescribeJob(original.config(), layout, 1);
  absl::StatusOr<checkpoint::ShardState> saved =
      ParseCheckpoint(SerializeCheckpoint(job, original.ExportState()), "mem", job);
  CHECK(saved.ok()) << saved.status();
  std::unique_ptr<Shard> restored = NewShard(original.config(), layout);
  const absl::Status status = restored->Restore(*saved);
  CHECK(status.ok()) << status;
  return restored;
}

// ASYNC: the checkpoint holds each worker's count; a restored chunk takes each worker's first
// push since as that worker's step (the steps in between were lost with the server), refuses
// older ones OUT_OF_RANGE, and a refused push changes nothing.
TEST(ShardRestoreTest, AnAsyncShardFollowsEachWorkerToItsStep) {
  const config::RunConfig config = AsyncConfig();
  const JobLayout layout = testing::TestLayout(config);
  std::unique_ptr<Shard> original = NewShard(config, layout);
  const uint32_t chunk = original->chunk_ids()[0];
  Answer answer;
  for (uint64_t step = 0; step < 3; ++step) Push(*original, layout, 0, step, chunk, &answer);
  Push(*original, layout, 1, 0, chunk, &answer);
  ASSERT_TRUE(answer.status.ok()) << answer.status;

  std::unique_ptr<Shard> restored = RestartFrom(*original, layout);
  Shard::ChunkSnapshot before = *restored->Snapshot(chunk);
  EXPECT_EQ(before.worker_steps, (std::vector<uint64_t>{3, 1}));
  EXPECT_EQ(before.step, 4u);
  EXPECT_EQ(before.weights, original->Snapshot(chunk)->weights);
  // Every worker's view is the weights: each resyncs before pushing to a restarted server.
  EXPECT_EQ(before.views, (std::vector<std::vector<float>>(2, before.weights)));

  // A push that does not decode is refused, and worker 0 is still followed.
  Answer bad;
  restored->PushPullRound(0, 5, 0, chunk, "garbage", testing::Record(&bad));
  EXPECT_EQ(bad.status.code(), absl::StatusCode::kInvalidArgument) << bad.status;
  EXPECT_EQ(restored->Snapshot(chunk)->worker_steps, before.worker_steps);
  EXPECT_EQ(restored->Snapshot(chunk)->weights, before.weights);

  // Worker 0 had reached step 5 on the lost server, worker 1 step 2.
  Answer ahead, behind, caught_up;
  Push(*restored, layout, 0, 5, chunk, &ahead);
  ASSERT_TRUE(ahead.status.ok()) << ahead.status;
  EXPECT_EQ(ahead.step, 6u);
  Push(*restored, layout, 1, 0, chunk, &behind);
  EXPECT_EQ(behind.status.code(), absl::StatusCode::kOutOfRange) << behind.status;
  EXPECT_THAT(std::string(behind.status.message()), HasSubstr("step 0 is behind it"));
  Push(*restored, layout, 1, 2, chunk, &caught_up);
  ASSERT_TRUE(caught_up.status.ok()) << caught_up.status;
  EXPECT_EQ(restored->Snapshot(chunk)->worker_steps, (std::vector<uint64_t>{6, 3}));
  // Both followed: in step again, a skipped step is the ordinary error.
  Answer skipped;
  Push(*restored, layout, 1, 5, chunk, &skipped);
  EXPECT_EQ(skipped.status.code(), absl::StatusCode::kFailedPrecondition) << skipped.status;
}

// SSP: a worker that does not push to the restored chunk (it has finished, or is behind
// elsewhere) does not hold the others back with the checkpoint's stale count; once it pushes,
// the bound counts it again.
TEST(ShardRestoreTest, AnSspShardBoundsOnlyByTheWorkersItHasHeardFrom) {
  const config::RunConfig config = AsyncConfig(/*tau=*/2);
  const JobLayout layout = testing::TestLayout(config);
  std::unique_ptr<Shard> original = NewShard(config, layout);
  const uint32_t chunk = original->chunk_ids()[0];
  Answer answer;
  Push(*original, layout, 0, 0, chunk, &answer);
  Push(*original, layout, 0, 1, chunk, &answer);
  Push(*original, layout, 1, 0, chunk, &answer);
  ASSERT_EQ(original->Snapshot(chunk)->worker_steps, (std::vector<uint64_t>{2, 1}));

  std::unique_ptr<Shard> restored = RestartFrom(*original, layout);
  // Worker 0 at step 4: by the checkpoint's count of worker 1 (1) it would wait for step 2.
  Answer first;
  Push(*restored, layout, 0, 4, chunk, &first);
  EXPECT_EQ(first.calls, 1) << "answered at once";
  ASSERT_TRUE(first.status.ok()) << first.status;
  // Worker 1 shows up at step 3: the bound counts it from now on.
  Answer second, parked, release;
  Push(*restored, layout, 1, 3, chunk, &second);
  ASSERT_TRUE(second.status.ok()) << second.status;
  EXPECT_EQ(restored->Snapshot(chunk)->worker_steps, (std::vector<uint64_t>{5, 4}));
  Push(*restored, layout, 0, 5, chunk, &answer);
  ASSERT_TRUE(answer.status.ok()) << answer.status;
  Push(*restored, layout, 0, 6, chunk, &parked);  // 6 < 4 + 2 does not hold.
  EXPECT_EQ(parked.calls, 0);
  Push(*restored, layout, 1, 4, chunk, &release);
  EXPECT_EQ(parked.calls, 1);
  EXPECT_TRUE(parked.status.ok()) << parked.status;
}

// ---- Checkpointer: a server's resume and writes ----

TEST(CheckpointerTest, ResumesFromWhatItWroteWritesPeriodicallyAndRefusesDamage) {
  const config::RunConfig config = StatefulConfig();
  const JobLayout layout = testing::TestLayout(config);
  const std::string dir = absl::StrCat(::testing::TempDir(), "/checkpointer-", getpid());
  config::Checkpoint spec;
  spec.set_dir(dir);
  EXPECT_EQ(Checkpointer::Start(nullptr, config::Checkpoint()).status().code(),
            absl::StatusCode::kInvalidArgument);
  {  // A directory that cannot be made or written: refused at the start, naming it.
    std::unique_ptr<Shard> shard = NewShard(config, layout);
    const std::string file = absl::StrCat(::testing::TempDir(), "/a-file-", getpid());
    std::ofstream(file) << "x";
    for (const std::string& bad : {file + "/ckpt", std::string("/proc/tamp-ckpt")}) {
      config::Checkpoint unwritable;
      unwritable.set_dir(bad);
      const absl::Status refused = Checkpointer::Start(shard.get(), unwritable).status();
      EXPECT_TRUE(absl::IsUnavailable(refused)) << bad << ": " << refused;
      EXPECT_THAT(std::string(refused.message()), HasSubstr("cannot")) << refused;
      EXPECT_THAT(std::string(refused.message()), HasSubstr(bad)) << refused;
    }
    std::remove(file.c_str());
  }

  // A fresh start, three steps, the final checkpoint.
  std::unique_ptr<Shard> shard = NewShard(config, layout);
  absl::StatusOr<std::unique_ptr<Checkpointer>> writer = Checkpointer::Start(shard.get(), spec);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->resumed_step(), 0u);
  for (uint64_t step = 0; step < 3; ++step) Step(*shard, layout, step);
  shard->Close(absl::UnavailableError("shutting down"));
  ASSERT_TRUE((*writer)->WriteFinal().ok());

  // A second server of the shard on the directory while the first runs: refused, the file
  // untouched (server/checkpoint_lock.h).
  std::unique_ptr<Shard> restarted = NewShard(config, layout);
  const absl::Status duplicate = Checkpointer::Start(restarted.get(), spec).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(duplicate)) << duplicate;
  EXPECT_THAT(std::string(duplicate.message()),
              HasSubstr("is in use by another server of this shard"));
  EXPECT_EQ(restarted->step(), 0u);  // Nothing was read.
  writer->reset();  // The first server has gone.

  absl::StatusOr<std::unique_ptr<Checkpointer>> resumed =
      Checkpointer::Start(restarted.get(), spec);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ((*resumed)->resumed_step(), 3u);
  EXPECT_EQ(restarted->step(), 3u);
  for (uint32_t id : shard->chunk_ids()) {
    EXPECT_EQ(restarted->Snapshot(id)->weights, shard->Snapshot(id)->weights);
  }

  // Every 2 steps: after 4 more, the file holds step 5 or later within a few polls.
  const std::string path = CheckpointPath(dir, 1);
  resumed->reset();
  spec.set_every_steps(2);
  std::unique_ptr<Shard> periodic = NewShard(config, layout);
  absl::StatusOr<std::unique_ptr<Checkpointer>> every = Checkpointer::Start(periodic.get(), spec);
  ASSERT_TRUE(every.ok()) << every.status();
  for (uint64_t step = 3; step < 7; ++step) Step(*periodic, layout, step);
  const checkpoint::JobIdentity job = DescribeJob(config, layout, 1);
  uint64_t written = 0;
  for (int poll = 0; poll < 200 && written < 5; ++poll) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    absl::StatusOr<checkpoint::ShardState> state = ReadCheckpoint(path, job);
    if (state.ok()) written = state->chunks(0).step();
  }
  EXPECT_GE(written, 5u);
  every->reset();

  // A damaged file stops the start, naming it.
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(60);
    const char byte = static_cast<char>(file.get());
    file.seekp(60);
    file.put(static_cast<char>(byte ^ 0x01));
  }
  std::unique_ptr<Shard> refused = NewShard(config, layout);
  absl::StatusOr<std::unique_ptr<Checkpointer>> damaged = Checkpointer::Start(refused.get(), spec);
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(damaged.status().message()), HasSubstr(path));
  EXPECT_EQ(refused->step(), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tamp
