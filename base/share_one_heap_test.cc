// ShareOneHeap(): memory the main thread freed serves another thread's allocations, so the
// second thread faults in no fresh pages. Its own binary: a thread that ran before would have
// left an arena of its own for the next thread to take.
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "base/malloc_settings.h"
#include "gtest/gtest.h"

namespace tamp {
namespace {

long MinorFaults() {
  rusage usage;
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// Minor faults of this thread while it allocates, writes and frees 64 blocks of 1 MiB.
long FaultsOfOneStep() {
  constexpr size_t kBlock = 1 << 20;
  std::vector<char*> blocks(64);
  const long start = MinorFaults();
  for (char*& block : blocks) {
    block = static_cast<char*>(std::malloc(kBlock));
    std::memset(block, 1, kBlock);
    asm volatile("" : : "r"(block) : "memory");  // Keeps the malloc / free pair.
  }
  const long faults = MinorFaults() - start;
  for (char* block : blocks) std::free(block);
  return faults;
}

TEST(ShareOneHeapTest, AnotherThreadReusesWhatTheMainThreadFreed) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator replaces glibc's malloc";
#endif
  ASSERT_TRUE(KeepFreedMemory().ok());
  ASSERT_TRUE(ShareOneHeap().ok());
  // 64 MiB of fresh pages: 16,384 faults.
  EXPECT_GT(FaultsOfOneStep(), 8000);
  // With an arena of its own (glibc's default) the thread faults them all in again.
  long other_thread = 0;
  std::thread([&] { other_thread = FaultsOfOneStep(); }).join();
  EXPECT_LT(other_thread, 256);
}

}  // namespace
}  // namespace tamp
