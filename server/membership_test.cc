// Membership alone: drops, rejoins and the barrier's view of them; the run's length fixed once,
// all or nothing with the admission a handshake brings.
#include "server/membership.h"

#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::tamp::testing::TestConfig;

using Entry = Membership::Entry;

TEST(MembershipTest, DropsOnlyTheLiveWorkersMissingFromTheBarrier) {
  const config::RunConfig config = TestConfig();  // 2 workers.
  Membership members(config, /*rank=*/0);
  EXPECT_TRUE(members.CheckMember(1, 0).ok());
  EXPECT_FALSE(members.AllLiveArrived({true, false}, 3));

  EXPECT_THAT(members.DropMissing({true, false}, 3, 250), ElementsAre(1u));
  EXPECT_THAT(members.members(), ElementsAre(Entry{0, false}, Entry{0, true}));
  EXPECT_TRUE(members.AllLiveArrived({true, false}, 3)) << "worker 1 is no longer waited for";
  EXPECT_TRUE(members.DropMissing({true, false}, 3, 900).empty()) << "dropped once";
  const absl::Status refused = members.CheckMember(1, 3);
  EXPECT_EQ(refused.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(refused.message(),
            "worker 1 was dropped at step 3 after 250 ms without a push "
            "(consistency.worker_timeout_ms); rejoin with a handshake");
  EXPECT_EQ(members.FirstLiveStep(), 0u);
}

TEST(MembershipTest, ARejoinedWorkerIsWaitedForFromItsStepOn) {
  const config::RunConfig config = TestConfig();
  Membership members(config, 0);
  members.DropMissing({true, false}, 3, 250);
  members.Admit(1, 5);
  EXPECT_THAT(members.members(), ElementsAre(Entry{0, false}, Entry{5, false}));
  EXPECT_EQ(members.CheckMember(1, 4),
            absl::AbortedError("worker 1 rejoined at step 5, push was for step 4"));
  EXPECT_TRUE(members.CheckMember(1, 5).ok());
  EXPECT_TRUE(members.AllLiveArrived({true, false}, 4)) << "step 4 does not wait for it";
  EXPECT_FALSE(members.AllLiveArrived({true, false}, 5));
  EXPECT_EQ(members.FirstLiveStep(), 0u);

  // Both gone to later steps (every worker restarted): the first step anyone pushes.
  members.Admit(0, 7);
  EXPECT_EQ(members.FirstLiveStep(), 5u);
  members.DropMissing({false, false}, 7, 1);
  EXPECT_EQ(members.FirstLiveStep(), std::numeric_limits<uint64_t>::max());
}

TEST(MembershipTest, TheFirstHandshakeFixesTheRunLength) {
  const config::RunConfig config = TestConfig();  // 2 epochs.
  Membership members(config, 1);
  EXPECT_EQ(members.KnownTotalSteps(), 0u);
  EXPECT_EQ(members.FixRunLength(16, 31, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(members.FixRunLength(0, 32, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((members.run_length() == Membership::RunLength{}));

  ASSERT_TRUE(members.FixRunLength(16, 32, nullptr).ok());
  EXPECT_TRUE((members.run_length() == Membership::RunLength{16, 32}));
  EXPECT_EQ(members.KnownTotalSteps(), 32u);
  EXPECT_EQ(*members.steps_per_epoch(), 16u);
  EXPECT_TRUE(members.FixRunLength(16, 32, nullptr).ok());
  EXPECT_EQ(members.FixRunLength(8, 16, nullptr),
            absl::FailedPreconditionError(
                "steps_per_epoch: worker says 8, server 1 has 16 from the first handshake"));
}

TEST(MembershipTest, ARefusedAdmissionFixesNothing) {
  const config::RunConfig config = TestConfig();
  Membership members(config, 0);
  int admitted = 0;
  EXPECT_EQ(members.FixRunLength(16, 32,
                                 [&] {
                                   ++admitted;
                                   return absl::FailedPreconditionError("chunk ahead");
                                 }),
            absl::FailedPreconditionError("chunk ahead"));
  EXPECT_EQ(admitted, 1);
  EXPECT_TRUE((members.run_length() == Membership::RunLength{}));
  // A pair that cannot be the job's is refused before the admission runs.
  EXPECT_EQ(members.FixRunLength(16, 30, [&] { return absl::OkStatus(); }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(members.FixRunLength(16, 32, [&] { return absl::OkStatus(); }).ok());
  EXPECT_TRUE((members.run_length() == Membership::RunLength{16, 32}));
}

TEST(MembershipTest, AWarmupWaitsForTheRunLength) {
  const config::RunConfig config = TestConfig();  // Constant learning rate.
  Membership members(config, 0);
  EXPECT_TRUE(members.CheckScheduleReady().ok());
  EXPECT_EQ(members.LearningRateAt(3), 0.5f);
  members.NeedRunLengthForWarmup();
  EXPECT_THAT(std::string(members.CheckScheduleReady().message()),
              HasSubstr("push codec ratio_warmup needs steps_per_epoch"));
  ASSERT_TRUE(members.FixRunLength(16, 32, nullptr).ok());
  EXPECT_TRUE(members.CheckScheduleReady().ok());
}

}  // namespace
}  // namespace tamp
