// PushPullMessagePool: released messages come back cleared, without their payloads' memory,
// up to max_idle_bytes of them.
#include "server/message_pool.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tamp {
namespace {

using Holder = grpc::MessageHolder<rpc::PushPullRequest, rpc::PushPullResponse>;

TEST(PushPullMessagePoolTest, ReleasedMessagesComeBackClearedWithoutTheirPayloadMemory) {
  PushPullMessagePool pool(/*max_idle_bytes=*/1 << 20);
  Holder* first = pool.AllocateMessages();
  first->request()->set_step(7);
  first->request()->set_payload(std::string(100000, 'q'));
  first->response()->set_step(8);
  first->response()->set_payload(std::string(300000, 'u'));
  first->response()->set_aggregate(std::string(50000, 'a'));
  first->Release();
  EXPECT_EQ(pool.idle(), 1u);
  // The messages themselves, not their payloads.
  EXPECT_LT(pool.idle_bytes(), 4096u);

  Holder* second = pool.AllocateMessages();
  EXPECT_EQ(pool.idle(), 0u);
  EXPECT_EQ(pool.idle_bytes(), 0u);
  EXPECT_EQ(second->request()->step(), 0u);
  EXPECT_EQ(second->request()->payload(), "");
  EXPECT_LT(second->request()->payload().capacity(), 100u);
  EXPECT_EQ(second->response()->step(), 0u);
  EXPECT_EQ(second->response()->payload(), "");
  EXPECT_LT(second->response()->payload().capacity(), 100u);
  EXPECT_LT(second->response()->aggregate().capacity(), 100u);
  second->Release();
}

// A step of a shard with chunks of many sizes: every call's holder comes back and the next
// step reuses them all, in whatever order. What the pool keeps does not grow with the steps
// nor with the largest payload seen: it used to keep each holder's largest payload, so its
// bound held a fraction of a step's holders and the rest were made and freed every step.
TEST(PushPullMessagePoolTest, KeepsEveryHolderOfAStepAndNoPayloadMemory) {
  constexpr int kCalls = 40;
  PushPullMessagePool pool(/*max_idle_bytes=*/kCalls * 4096);
  for (int step = 0; step < 20; ++step) {
    std::vector<Holder*> calls;
    for (int i = 0; i < kCalls; ++i) {
      calls.push_back(pool.AllocateMessages());
      // Chunk sizes from 1 KB to 200 KB, rotated so each holder meets every size.
      const size_t bytes = 1000 + 5000 * static_cast<size_t>((i + step) % kCalls);
      calls.back()->request()->set_payload(std::string(bytes, 'q'));
      calls.back()->response()->set_payload(std::string(bytes, 'u'));
    }
    for (Holder* holder : calls) holder->Release();
    EXPECT_EQ(pool.idle(), static_cast<size_t>(kCalls)) << "step " << step;
    EXPECT_LT(pool.idle_bytes(), kCalls * 4096u) << "step " << step;
  }
}

TEST(PushPullMessagePoolTest, KeepsAtMostMaxIdleBytes) {
  PushPullMessagePool pool(/*max_idle_bytes=*/1 << 20);
  Holder* a = pool.AllocateMessages();
  Holder* b = pool.AllocateMessages();
  Holder* c = pool.AllocateMessages();
  EXPECT_NE(a->request(), b->request());
  EXPECT_NE(b->request(), c->request());
  for (Holder* holder : {a, b, c}) holder->response()->set_step(1);
  a->Release();
  const size_t one = pool.idle_bytes();
  ASSERT_GT(one, 0u);
  pool.set_max_idle_bytes(2 * one + one / 2);
  b->Release();
  c->Release();  // A third would pass 2.5 holders' bytes: freed.
  EXPECT_EQ(pool.idle(), 2u);
  EXPECT_EQ(pool.idle_bytes(), 2 * one);
}

}  // namespace
}  // namespace tamp
