// The shard's side of the small test job (protocol/test_job.h): callbacks that record what
// a push was answered, and the fixture of the chunk types' own tests.
#ifndef TAMP_SERVER_TEST_JOB_H_
#define TAMP_SERVER_TEST_JOB_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "protocol/test_job.h"
#include "server/chunk.h"
#include "server/membership.h"
#include "server/shard.h"

namespace tamp::testing {

// What one push's callback was given.
struct Answer {
  int calls = 0;
  absl::Status status;
  std::string update;
  uint64_t step = 0;
  uint64_t slowest_pushes = 0;
};

// A Shard::RoundDoneCallback that records into *answer.
inline Shard::RoundDoneCallback Record(Answer* answer) {
  return [answer](absl::Status status, const Shard::PushAnswer* out) {
    ++answer->calls;
    answer->status = std::move(status);
    if (out != nullptr) {
      answer->update = *out->update;
      answer->step = out->step;
      answer->slowest_pushes = out->slowest_pushes;
    }
  };
}

// Worker `worker`'s handshake announcing that it rejoins at `step` (Shard::Join), with the
// test job's run length: 16 steps per epoch, 2 epochs.
inline absl::Status Rejoin(Shard& shard, uint32_t worker, uint64_t step) {
  return shard.Join(worker, 16, 32, step);
}

// The fixture of a chunk type's own tests (ChunkType: SyncChunk, AsyncChunk): the first
// chunk of shard 0 of a test job, with the shard's Membership, without a Shard.
template <typename ChunkType>
class ChunkTest : public ::testing::Test {
 protected:
  // Replaces the chunk with a fresh one of the job `config`, in its initial state.
  void InitChunk(const config::RunConfig& config) {
    chunk_.reset();
    config_ = config;
    layout_ = TestLayout(config_);
    id_ = layout_.ChunksOfShard(0).front();
    n_ = layout_.chunks[id_].chunk.length;
    membership_ = std::make_unique<Membership>(config_, 0);
    absl::StatusOr<std::unique_ptr<ChunkCore>> core =
        ChunkCore::Create(config_, layout_, id_, membership_->steps_per_epoch());
    CHECK(core.ok()) << core.status();
    chunk_ = std::make_unique<ChunkType>(*std::move(core), config_, membership_.get());
  }

  // `worker`'s push of TestGradient() for `step`, answered into *answer.
  void Push(uint32_t worker, uint64_t step, Answer* answer) {
    chunk_->Push(worker, step, 0,
                 EncodePush(config_, layout_, step, id_, worker, TestGradient(n_, step, worker)),
                 Record(answer));
  }

  config::RunConfig config_;
  JobLayout layout_;
  uint32_t id_ = 0;
  size_t n_ = 0;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<ChunkType> chunk_;
};

}  // namespace tamp::testing

#endif  // TAMP_SERVER_TEST_JOB_H_
