#include "worker/batcher.h"

#include <numeric>
#include <utility>

#include "base/philox.h"
#include "glog/logging.h"

namespace tamp {

Batcher::Batcher(const Dataset& data, uint32_t worker, uint32_t num_workers, uint32_t batch_size,
                 uint64_t seed)
    : data_(data),
      worker_(worker),
      batch_size_(batch_size),
      seed_(seed),
      first_(data.size * worker / num_workers) {
  const int64_t shard = data.size / num_workers;  // Equal for all workers.
  order_.resize(shard);
  steps_per_epoch_ = shard / batch_size;
  CHECK_GT(steps_per_epoch_, 0) << "shard of " << shard << " examples < batch " << batch_size;
}

void Batcher::Shuffle(uint32_t epoch) {
  std::iota(order_.begin(), order_.end(), int64_t{0});
  const PhiloxStream rng({.seed = seed_, .step = epoch, .chunk = 0, .worker = worker_});
  for (int64_t i = static_cast<int64_t>(order_.size()) - 1; i > 0; --i) {
    // 64-bit draw reduced by multiply-shift: unbiased enough for a shuffle.
    const uint64_t bits = (uint64_t{rng.Bits(2 * i)} << 32) | rng.Bits(2 * i + 1);
    const int64_t j = static_cast<int64_t>((static_cast<unsigned __int128>(bits) * (i + 1)) >> 64);
    std::swap(order_[i], order_[j]);
  }
  shuffled_epoch_ = epoch;
}

void Batcher::Fill(uint32_t epoch, int64_t index, float* x, uint8_t* labels) {
  CHECK_LT(index, steps_per_epoch_);
  if (shuffled_epoch_ != epoch) Shuffle(epoch);
  const int64_t pixels = int64_t{data_.rows} * data_.cols;
  for (uint32_t b = 0; b < batch_size_; ++b) {
    const int64_t example = first_ + order_[index * batch_size_ + b];
    NormalizeImages(&data_.images[example * pixels], pixels, x + b * pixels);
    labels[b] = data_.labels[example];
  }
}

}  // namespace tamp
