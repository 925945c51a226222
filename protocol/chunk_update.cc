#include "protocol/chunk_update.h"

namespace tamp {

absl::Status UpdateChunk(Optimizer& optimizer, absl::Span<float> weights,
                         absl::Span<const float> gradient, int64_t step, float learning_rate,
                         compress::ErrorFeedback& memory, compress::Codec& codec,
                         const RandomKey& key, absl::Span<float> update, std::string* payload) {
  if (const absl::Span<float> residual = memory.AddTarget(); !residual.empty()) {
    optimizer.Apply(weights, gradient, step, learning_rate, residual, Optimizer::DeltaMode::kAdd);
    return memory.CompressAdded(codec, key, payload);
  }
  optimizer.Apply(weights, gradient, step, learning_rate, update);
  return memory.Compress(codec, update, key, payload);
}

}  // namespace tamp
