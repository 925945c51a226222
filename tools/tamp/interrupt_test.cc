#include "tools/tamp/interrupt.h"

#include <poll.h>
#include <signal.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tamp::launcher {
namespace {

bool Readable(int fd) {
  pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

TEST(InterruptWatcherTest, SignalsBecomeReadableAndCounted) {
  auto watcher = InterruptWatcher::Install(absl::ZeroDuration());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  EXPECT_FALSE(Readable((*watcher)->fd()));
  EXPECT_EQ((*watcher)->Consume(), 0);

  raise(SIGINT);  // Would kill the test without the handler.
  raise(SIGTERM);
  EXPECT_TRUE(Readable((*watcher)->fd()));
  EXPECT_EQ((*watcher)->last_signal(), SIGTERM);
  EXPECT_EQ((*watcher)->Consume(), 2);
  EXPECT_FALSE(Readable((*watcher)->fd()));
}

TEST(InterruptWatcherTest, ASignalSoonAfterTheLastCountedIsTheSameInterrupt) {
  auto watcher = InterruptWatcher::Install(absl::Milliseconds(300));
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  raise(SIGINT);
  raise(SIGINT);  // The same Ctrl-C, reaching the launcher twice.
  raise(SIGTERM);
  EXPECT_EQ((*watcher)->last_signal(), SIGTERM);
  EXPECT_EQ((*watcher)->Consume(), 1);
  EXPECT_FALSE(Readable((*watcher)->fd()));
  absl::SleepFor(absl::Milliseconds(400));
  raise(SIGINT);  // Another interrupt.
  EXPECT_EQ((*watcher)->Consume(), 1);
}

// A closed console: the first SIGPIPE interrupts; the next writes raise it again, and those
// must not count as a second interrupt (which kills everything at once).
TEST(InterruptWatcherTest, AClosedConsoleInterruptsOnce) {
  auto watcher = InterruptWatcher::Install(absl::ZeroDuration());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  raise(SIGPIPE);  // Would kill the test without the handler.
  raise(SIGPIPE);
  EXPECT_EQ((*watcher)->last_signal(), SIGPIPE);
  EXPECT_EQ((*watcher)->Consume(), 1);
  raise(SIGPIPE);
  EXPECT_EQ((*watcher)->Consume(), 0);
  raise(SIGINT);  // Still counts.
  EXPECT_EQ((*watcher)->Consume(), 1);
}

TEST(InterruptWatcherTest, OnlyOneAtATimeAndDispositionsRestored) {
  struct sigaction before;
  sigaction(SIGINT, nullptr, &before);
  {
    auto first = InterruptWatcher::Install();
    ASSERT_TRUE(first.ok());
    auto second = InterruptWatcher::Install();
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  }
  struct sigaction after;
  sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(before.sa_handler, after.sa_handler);
  auto again = InterruptWatcher::Install();
  EXPECT_TRUE(again.ok());
}

}  // namespace
}  // namespace tamp::launcher
