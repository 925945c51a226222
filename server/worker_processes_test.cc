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
}

// A displaced process's handshakes are refused: were it to take the rank back, the two would
// take it from each other in turn.
TEST(WorkerProcessesTest, ADisplacedProcessNeverTakesTheRankBack) {
  WorkerProcesses holders;
  EXPECT_TRUE(holders.CheckNotDisplaced(1, 0xa1, 0).ok()) << "no handshake of rank 1 yet";
  holders.Joined(1, 0xa1);
  EXPECT_TRUE(holders.CheckNotDisplaced(1, 0xa1, 0).ok()) << "the holder";
  EXPECT_TRUE(holders.CheckNotDisplaced(1, 0xb2, 0).ok()) << "a newcomer may displace it";
  ASSERT_TRUE(holders.Joined(1, 0xb2));
  const absl::Status refused = holders.CheckNotDisplaced(1, 0xa1, 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("worker 1: another process with rank 1 (id b2) handshook with server 2 "
                        "after this one (id a1)"));
  EXPECT_TRUE(holders.CheckNotDisplaced(0, 0xa1, 2).ok()) << "rank 0 is another rank";
  ASSERT_TRUE(holders.Joined(1, 0xc3)) << "a third process displaces the second";
  EXPECT_THAT(holders.CheckNotDisplaced(1, 0xa1, 2).message(), HasSubstr("(id c3)"));
  EXPECT_FALSE(holders.CheckNotDisplaced(1, 0xb2, 2).ok());
  EXPECT_TRUE(holders.CheckNotDisplaced(1, 0xc3, 2).ok());
  EXPECT_TRUE(holders.CheckNotDisplaced(1, 0, 2).ok()) << "a client without an id";
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
