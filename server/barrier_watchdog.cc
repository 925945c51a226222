#include "server/barrier_watchdog.h"

#include <algorithm>

namespace tamp {

std::unique_ptr<BarrierWatchdog> BarrierWatchdog::Start(Shard* shard) {
  const std::chrono::milliseconds timeout = shard->worker_timeout();
  if (timeout.count() == 0) return nullptr;
  const std::chrono::milliseconds period = std::clamp(
      timeout / 10, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  return std::unique_ptr<BarrierWatchdog>(new BarrierWatchdog(shard, period));
}

BarrierWatchdog::BarrierWatchdog(Shard* shard, std::chrono::milliseconds period)
    : shard_(shard), period_(period), thread_([this] { Loop(); }) {}

BarrierWatchdog::~BarrierWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void BarrierWatchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, period_, [this] { return stop_; })) {
    lock.unlock();
    shard_->ExpireBarriers(std::chrono::steady_clock::now());
    lock.lock();
  }
}

}  // namespace tamp
