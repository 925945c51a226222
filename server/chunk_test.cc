// PullBuffers: a chunk's encoded answers are shared, never copied, and their buffers come back
// for later answers only once nobody holds them (gRPC may still be sending them).
#include "server/chunk.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace tamp {
namespace {

TEST(PullBuffersTest, ABufferComesBackOnlyAfterItsLastHolderLetsGo) {
  std::shared_ptr<PullBuffers> pool = PullBuffers::Create(/*keep=*/2);
  std::string encoded(100000, 'u');
  const char* bytes = encoded.data();
  std::shared_ptr<const std::string> first = pool->Share(std::move(encoded));
  EXPECT_EQ(first->data(), bytes) << "shared without a copy";
  std::shared_ptr<const std::string> second = first;  // Another worker's response.
  first.reset();
  EXPECT_EQ(pool->spare(), 0u);
  EXPECT_TRUE(pool->Take().empty()) << "still being sent: not for the next answer";
  EXPECT_EQ(*second, std::string(100000, 'u'));
  second.reset();
  EXPECT_EQ(pool->spare(), 1u);
  const std::string reused = pool->Take();
  EXPECT_EQ(reused.data(), bytes) << "the next answer is encoded into the same memory";
  EXPECT_GE(reused.capacity(), 100000u);
}

TEST(PullBuffersTest, KeepsAtMostKeepSpares) {
  std::shared_ptr<PullBuffers> pool = PullBuffers::Create(/*keep=*/2);
  for (int i = 0; i < 3; ++i) pool->Share(std::string(1000, 'x'));
  EXPECT_EQ(pool->spare(), 2u);
  pool = PullBuffers::Create(/*keep=*/2);
  pool->Share(std::string());  // Nothing to keep: a refusal's or an early round's answer.
  pool->Share(std::string("short"));
  EXPECT_EQ(pool->spare(), 0u);
}

TEST(PullBuffersTest, AnAnswerMayOutliveItsPool) {
  std::shared_ptr<PullBuffers> pool = PullBuffers::Create(/*keep=*/1);
  std::shared_ptr<const std::string> answer = pool->Share(std::string(5000, 'a'));
  pool.reset();  // The server shut the shard down while gRPC still sends the answer.
  EXPECT_EQ(*answer, std::string(5000, 'a'));
  answer.reset();  // Freed, not given to the destroyed pool (AddressSanitizer checks it).
}

}  // namespace
}  // namespace tamp
