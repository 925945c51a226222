// The shard's side of the small test job (protocol/test_job.h): callbacks that record what
// a push was answered.
#ifndef TAMP_SERVER_TEST_JOB_H_
#define TAMP_SERVER_TEST_JOB_H_

#include <string>
#include <utility>

#include "protocol/test_job.h"
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

}  // namespace tamp::testing

#endif  // TAMP_SERVER_TEST_JOB_H_
