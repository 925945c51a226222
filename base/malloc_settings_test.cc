// KeepFreedMemory(): a loop that allocates, touches and frees the same megabytes faults in no
// fresh pages once it runs, on the main thread's heap and on another thread's.
#include "base/malloc_settings.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tamp {
namespace {

long MinorFaults() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Minor faults per round of: allocate eight blocks of 1 MiB, write them, free them all (a
// step's payloads), counted over rounds 3 .. `rounds` once the heap has grown.
long FaultsPerRound(int rounds) {
  constexpr size_t kBlock = 1 << 20;
  std::vector<char*> blocks(8);
  long start = 0;
  for (int round = 0; round < rounds; ++round) {
    if (round == 2) start = MinorFaults();
    for (char*& block : blocks) {
      block = static_cast<char*>(std::malloc(kBlock));
      std::memset(block, round, kBlock);
      // Keeps the compiler from eliding the malloc / free pair.
      asm volatile("" : : "r"(block) : "memory");
    }
    for (char* block : blocks) std::free(block);
  }
  return (MinorFaults() - start) / (rounds - 2);
}

TEST(KeepFreedMemoryTest, ReusedMegabytesFaultInNothing) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator replaces glibc's malloc";
#endif
  ASSERT_TRUE(KeepFreedMemory().ok());
  // 8 MiB of fresh pages would be 2048 faults per round; glibc's defaults cost about that.
  EXPECT_LT(FaultsPerRound(20), 32);
  long other_thread = 0;
  std::thread([&] { other_thread = FaultsPerRound(20); }).join();
  EXPECT_LT(other_thread, 32);
}

}  // namespace
}  // namespace tamp
