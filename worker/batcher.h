// Batcher: one worker's shard of a data set, shuffled each epoch, served as normalised batches.
//
// Worker r of W owns examples [r*N/W, (r+1)*N/W). Every worker takes the same number of
// steps per epoch, floor((N/W) / batch), so synchronous steps line up. The shuffle of epoch e
// is a Fisher-Yates permutation drawn from Philox keyed by (seed, e, 0, worker): the same on
// every run and platform.
#ifndef TAMP_WORKER_BATCHER_H_
#define TAMP_WORKER_BATCHER_H_

#include <cstdint>
#include <vector>

#include "worker/fashion_mnist.h"

namespace tamp {

class Batcher {
 public:
  // `data` must outlive the batcher. CHECKs that each worker gets at least one batch.
  Batcher(const Dataset& data, uint32_t worker, uint32_t num_workers, uint32_t batch_size,
          uint64_t seed);

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  uint32_t batch_size() const { return batch_size_; }

  // Fills x (batch_size * 784 normalised pixels) and labels (batch_size) with batch
  // `index` (< steps_per_epoch) of `epoch`.
  void Fill(uint32_t epoch, int64_t index, float* x, uint8_t* labels);

 private:
  void Shuffle(uint32_t epoch);

  const Dataset& data_;
  const uint32_t worker_;
  const uint32_t batch_size_;
  const uint64_t seed_;
  const int64_t first_;        // First example of this worker's shard.
  std::vector<int64_t> order_; // Shard-relative indices in this epoch's order.
  int64_t steps_per_epoch_;
  int64_t shuffled_epoch_ = -1;
};

}  // namespace tamp

#endif  // TAMP_WORKER_BATCHER_H_
