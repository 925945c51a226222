#include "server/message_pool.h"

#include <utility>

namespace tamp {

class PushPullMessagePool::Holder final
    : public grpc::MessageHolder<rpc::PushPullRequest, rpc::PushPullResponse> {
 public:
  explicit Holder(PushPullMessagePool* pool) : pool_(pool) {
    set_request(&request_);
    set_response(&response_);
  }
  void Release() override { pool_->Recycle(this); }
  // Clear() empties the messages and hands their payload strings' memory back to the heap.
  // Holders go out in any order, so a string kept its capacity from the largest chunk it
  // ever carried: the idle bound then held a fraction of the holders a step needs, the
  // others were made and freed every step with mismatched sizes, and the servers' heaps
  // grew for hundreds of steps (issue 19). Exact-size strings freed to glibc's free lists
  // (base/malloc_settings.h keeps them) are reused by the next step's same sizes.
  void Clear() {
    request_.Clear();
    response_.Clear();
    request_.mutable_payload()->shrink_to_fit();
    response_.mutable_payload()->shrink_to_fit();
    response_.mutable_aggregate()->shrink_to_fit();
  }
  // What the holder keeps allocated: itself and its strings' capacity.
  size_t Bytes() const {
    return sizeof(*this) + request_.payload().capacity() + response_.payload().capacity() +
           response_.aggregate().capacity();
  }

 private:
  PushPullMessagePool* const pool_;
  rpc::PushPullRequest request_;
  rpc::PushPullResponse response_;
};

PushPullMessagePool::PushPullMessagePool(size_t max_idle_bytes)
    : max_idle_bytes_(max_idle_bytes) {}

PushPullMessagePool::~PushPullMessagePool() = default;

grpc::MessageHolder<rpc::PushPullRequest, rpc::PushPullResponse>*
PushPullMessagePool::AllocateMessages() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      Holder* holder = idle_.back().release();
      idle_.pop_back();
      idle_bytes_ -= holder->Bytes();
      return holder;
    }
  }
  return new Holder(this);
}

void PushPullMessagePool::Recycle(Holder* holder) {
  std::unique_ptr<Holder> owned(holder);
  owned->Clear();
  const size_t bytes = owned->Bytes();
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_bytes_ + bytes > max_idle_bytes_) return;
  idle_bytes_ += bytes;
  idle_.push_back(std::move(owned));
}

void PushPullMessagePool::set_max_idle_bytes(size_t max_idle_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  max_idle_bytes_ = max_idle_bytes;
}

size_t PushPullMessagePool::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

size_t PushPullMessagePool::idle_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_bytes_;
}

}  // namespace tamp
