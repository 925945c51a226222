// PushPullMessagePool: the request and response messages of PushPull calls, kept for the
// next call instead of freed (issue 18).
//
// gRPC's default allocator makes fresh messages for every call, so each push parsed its
// payload into new memory and each answer copied the chunk's update into a new string: with
// a raw pull, megabytes of fresh memory per step. Pooled messages are cleared on release,
// which keeps their strings' capacity, so a steady-state call reuses the memory of an
// earlier one. The pool holds at most `max_idle` messages between calls; more in flight are
// freed when they end.
//
// Thread safety: AllocateMessages() and the holders' Release() may run on any thread. The
// pool must outlive every call that took messages from it (register it on a service that
// outlives its server).
//
// Example:
//   PushPullMessagePool pool;
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
  // Enough for every push of a large job in flight at once; each idle message keeps at
  // most one chunk's payload.
  static constexpr size_t kDefaultMaxIdle = 1024;

  explicit PushPullMessagePool(size_t max_idle = kDefaultMaxIdle);
  ~PushPullMessagePool() override;
  PushPullMessagePool(const PushPullMessagePool&) = delete;
  PushPullMessagePool& operator=(const PushPullMessagePool&) = delete;

  // An idle holder (messages cleared, capacity kept) or a new one.
  grpc::MessageHolder<rpc::PushPullRequest, rpc::PushPullResponse>* AllocateMessages() override;

  // Holders released and kept for later calls.
  size_t idle() const;

 private:
  class Holder;
  // Holder::Release(): clears its messages and keeps it, or frees it when max_idle are kept.
  void Recycle(Holder* holder);

  const size_t max_idle_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Holder>> idle_;  // Guarded by mu_.
};

}  // namespace tamp

#endif  // TAMP_SERVER_MESSAGE_POOL_H_
