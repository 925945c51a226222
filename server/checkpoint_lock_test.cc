#include "server/checkpoint_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

std::string Path() { return absl::StrCat(getenv("TEST_TMPDIR"), "/shard-0.ckpt"); }

// Whether a child process (another server) can take the lock: its exit status says.
bool AnotherProcessCanLock(const std::string& path) {
  const pid_t child = fork();
  if (child == 0) _exit(CheckpointLock::Acquire(path).ok() ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(CheckpointLockTest, ASecondHolderIsRefusedNamingTheFirstsPid) {
  const std::string path = Path() + "_second";
  absl::StatusOr<CheckpointLock> first = CheckpointLock::Acquire(path);
  ASSERT_TRUE(first.ok()) << first.status();
  std::ifstream pid_file(path + ".lock");
  std::string pid;
  pid_file >> pid;
  EXPECT_EQ(pid, absl::StrCat(getpid()));
  // flock is per open file: a second Acquire in this process is refused as another's is.
  const absl::StatusOr<CheckpointLock> second = CheckpointLock::Acquire(path);
  ASSERT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat(path, " is in use by another server of this shard (pid ",
                                     getpid(), "), which holds ", path, ".lock")));
  EXPECT_FALSE(AnotherProcessCanLock(path));
}

TEST(CheckpointLockTest, ReleasedWhenTheHolderGoesOrMoves) {
  const std::string path = Path() + "_released";
  {
    absl::StatusOr<CheckpointLock> held = CheckpointLock::Acquire(path);
    ASSERT_TRUE(held.ok()) << held.status();
    CheckpointLock moved = *std::move(held);
    EXPECT_FALSE(AnotherProcessCanLock(path));
  }
  EXPECT_TRUE(AnotherProcessCanLock(path));
  EXPECT_TRUE(CheckpointLock::Acquire(path).ok());
}

TEST(CheckpointLockTest, ADirectoryThatIsNotThereIsUnavailable) {
  const absl::StatusOr<CheckpointLock> lock = CheckpointLock::Acquire("/no/such/dir/shard-0.ckpt");
  ASSERT_EQ(lock.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(lock.status().message()),
              HasSubstr("cannot make the checkpoint's lock /no/such/dir/shard-0.ckpt.lock: No "
                        "such file or directory"));
}

}  // namespace
}  // namespace tamp
