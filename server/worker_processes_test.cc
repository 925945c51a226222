#include "server/worker_processes.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

TEST(WorkerProcessesTest, TheLatestHandshakeOfARankHoldsIt) {
  WorkerProcesses holders;
  EXPECT_TRUE(holders.CheckHolder(1, 0xa1, 0).ok()) << "no handshake of rank 1 yet";
  EXPECT_FALSE(holders.Joined(1, 0xa1));
  EXPECT_TRUE(holders.CheckHolder(1, 0xa1, 0).ok());
  EXPECT_FALSE(holders.Joined(1, 0xa1)) << "its own handshake again displaces no one";
  EXPECT_TRUE(holders.Joined(1, 0xb2));
  const absl::Status refused = holders.CheckHolder(1, 0xa1, 3);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("worker 1: another process with rank 1 (id b2) handshook with server 3 "
                        "after this one (id a1)"));
  EXPECT_TRUE(holders.CheckHolder(1, 0xb2, 3).ok());
  EXPECT_TRUE(holders.CheckHolder(0, 0xa1, 3).ok()) << "rank 0 is another rank";
  EXPECT_TRUE(holders.Joined(1, 0xa1));  // The first one's handshake again takes it back.
  EXPECT_TRUE(holders.CheckHolder(1, 0xa1, 3).ok());
  EXPECT_FALSE(holders.CheckHolder(1, 0xb2, 3).ok());
}

TEST(WorkerProcessesTest, AClientWithoutAnIdIsNotChecked) {
  WorkerProcesses holders;
  holders.Joined(2, 0xc3);
  EXPECT_TRUE(holders.CheckHolder(2, 0, 0).ok());
  EXPECT_FALSE(holders.Joined(2, 0));  // Changes nothing.
  EXPECT_FALSE(holders.CheckHolder(2, 0xd4, 0).ok());
  EXPECT_TRUE(holders.CheckHolder(2, 0xc3, 0).ok());
}

}  // namespace
}  // namespace tamp
