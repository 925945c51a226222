// BarrierWatchdog: a thread that calls Shard::ExpireBarriers() periodically, so a SYNC
// barrier that waits for a dead or stalled worker times out even when no push arrives.
//
// It checks every tenth of the shard's worker timeout (at least every 10 ms, at most every
// second), so a worker is dropped within about 1.1 timeouts. Start() returns null when the
// shard has no timeout (0, or ASYNC / SSP).
//
// Example (the shard must outlive the watchdog):
//   std::unique_ptr<BarrierWatchdog> watchdog = BarrierWatchdog::Start(shard.get());
//   ...
//   watchdog.reset();  // Stops and joins the thread.
#ifndef TAMP_SERVER_BARRIER_WATCHDOG_H_
#define TAMP_SERVER_BARRIER_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "server/shard.h"

namespace tamp {

class BarrierWatchdog {
 public:
  static std::unique_ptr<BarrierWatchdog> Start(Shard* shard);

  ~BarrierWatchdog();
  BarrierWatchdog(const BarrierWatchdog&) = delete;
  BarrierWatchdog& operator=(const BarrierWatchdog&) = delete;

  // How often it checks.
  std::chrono::milliseconds period() const { return period_; }

 private:
  BarrierWatchdog(Shard* shard, std::chrono::milliseconds period);
  void Loop();

  Shard* const shard_;
  const std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // Guarded by mu_.
  std::thread thread_;
};

}  // namespace tamp

#endif  // TAMP_SERVER_BARRIER_WATCHDOG_H_
