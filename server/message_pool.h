// PushPullMessagePool: the request and response messages of PushPull calls, kept for the
// next call instead of freed (issue 18).
//
// Pooled messages are cleared on release and give their payload strings' memory back to
// the heap: a holder goes to whichever call comes next, so a kept capacity grew to the
// largest chunk the holder ever carried, and the pool held far more than a step needs
// (issue 19). The payloads' megabytes are reused through the heap instead, which keeps
// freed memory and serves every thread from it (base/malloc_settings.h). The idle messages
// hold at most `max_idle_bytes` between calls (their size plus their strings' capacity); a
// message released beyond that is freed, so no client can make the pool keep more than that.
//
// Thread safety: AllocateMessages() and the holders' Release() may run on any thread. The
// pool must outlive every call that took messages from it (register it on a service that
// outlives its server).
//
// Example:
//   PushPullMessagePool pool(/*max_idle_bytes=*/64 << 20);
//   service.SetMessageAllocatorFor_PushPull(&pool);
#ifndef TAMP_SERVER_MESSAGE_POOL_H_
#define TAMP_SERVER_MESSAGE_POOL_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "grpcpp/support/message_allocator.h"
#include "proto/tamp.pb.h"

namespace tamp {

class PushPullMessagePool final
    : public grpc::MessageAllocator<rpc::PushPullRequest, rpc::PushPullResponse> {
 public:
  explicit PushPullMessagePool(size_t max_idle_bytes);
  ~PushPullMessagePool() override;
  PushPullMessagePool(const PushPullMessagePool&) = delete;
  PushPullMessagePool& operator=(const PushPullMessagePool&) = delete;

  // An idle holder (messages cleared, capacity kept) or a new one.
  grpc::MessageHolder<rpc::PushPullRequest, rpc::PushPullResponse>* AllocateMessages() override;

  // Bounds what later releases may keep (holders already idle stay until taken).
  void set_max_idle_bytes(size_t max_idle_bytes);

  // Holders released and kept for later calls, and the bytes they hold.
  size_t idle() const;
  size_t idle_bytes() const;

 private:
  class Holder;
  // Holder::Release(): clears its messages and keeps it, or frees it when keeping it would
  // pass max_idle_bytes.
  void Recycle(Holder* holder);

  mutable std::mutex mu_;
  size_t max_idle_bytes_;                      // Guarded by mu_.
  std::vector<std::unique_ptr<Holder>> idle_;  // Guarded by mu_.
  size_t idle_bytes_ = 0;                      // Guarded by mu_.
};

}  // namespace tamp

#endif  // TAMP_SERVER_MESSAGE_POOL_H_
