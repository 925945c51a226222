// PushPullMessagePool: released messages come back cleared with their payloads' memory, up
// to max_idle_bytes of them.
#include "server/message_pool.h"

#include <string>

#include "gtest/gtest.h"

namespace tamp {
namespace {

using Holder = grpc::MessageHolder<rpc::PushPullRequest, rpc::PushPullResponse>;

TEST(PushPullMessagePoolTest, ReleasedMessagesComeBackClearedWithTheirMemory) {
  PushPullMessagePool pool(/*max_idle_bytes=*/1 << 20);
  Holder* first = pool.AllocateMessages();
  first->request()->set_step(7);
  first->request()->set_payload(std::string(100000, 'q'));
  first->response()->set_step(8);
  first->response()->set_payload(std::string(300000, 'u'));
  first->Release();
  EXPECT_EQ(pool.idle(), 1u);
  EXPECT_GE(pool.idle_bytes(), 400000u);

  Holder* second = pool.AllocateMessages();
  EXPECT_EQ(pool.idle(), 0u);
  EXPECT_EQ(pool.idle_bytes(), 0u);
  EXPECT_EQ(second->request()->step(), 0u);
  EXPECT_EQ(second->request()->payload(), "");
  EXPECT_GE(second->request()->payload().capacity(), 100000u);
  EXPECT_EQ(second->response()->step(), 0u);
  EXPECT_EQ(second->response()->payload(), "");
  // An answer of the same size fits without new memory.
  EXPECT_GE(second->response()->payload().capacity(), 300000u);
  second->Release();
}

TEST(PushPullMessagePoolTest, KeepsAtMostMaxIdleBytes) {
  PushPullMessagePool pool(/*max_idle_bytes=*/250000);
  Holder* a = pool.AllocateMessages();
  Holder* b = pool.AllocateMessages();
  Holder* c = pool.AllocateMessages();
  EXPECT_NE(a->request(), b->request());
  EXPECT_NE(b->request(), c->request());
  for (Holder* holder : {a, b, c}) holder->response()->set_payload(std::string(100000, 'u'));
  a->Release();
  b->Release();
  c->Release();  // A third would pass 250,000 bytes: freed.
  EXPECT_EQ(pool.idle(), 2u);
  EXPECT_GE(pool.idle_bytes(), 200000u);
  EXPECT_LE(pool.idle_bytes(), 250000u);
}

}  // namespace
}  // namespace tamp
