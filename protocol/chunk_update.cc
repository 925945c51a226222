#include "protocol/chunk_update.h"

#include "glog/logging.h"

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

bool SparseUpdateApplies(const Optimizer* optimizer, const compress::ErrorFeedback& memory) {
  return memory.kind() == config::ErrorFeedback::RESIDUAL &&
         (optimizer == nullptr || optimizer->KeepsZeroGradientWeights());
}

void GatherSparseAggregate(absl::Span<float> accumulator, absl::Span<const size_t> touched,
                           const compress::Codec& push_codec, int num_contributors,
                           compress::SparseEntries* aggregate) {
  aggregate->indices.clear();
  aggregate->values.clear();
  for (const size_t i : touched) {
    if (accumulator[i] == 0.0f) continue;
    aggregate->indices.push_back(i);
    aggregate->values.push_back(accumulator[i]);
    accumulator[i] = 0.0f;
  }
  push_codec.FinishAggregate(num_contributors, absl::MakeSpan(aggregate->values));
}

absl::Status UpdateChunkSparse(Optimizer* optimizer, absl::Span<float> weights,
                               const compress::SparseEntries& aggregate, float learning_rate,
                               compress::ErrorFeedback& memory, compress::Codec& codec,
                               const RandomKey& key, std::string* payload) {
  CHECK(SparseUpdateApplies(optimizer, memory));
  if (optimizer != nullptr) {
    optimizer->ApplySparse(weights, aggregate.indices, aggregate.values, learning_rate,
                           memory.AddTarget());
  } else {
    compress::AddSparseEntries(aggregate, memory.AddTarget());
  }
  return memory.CompressAdded(codec, key, payload);
}

}  // namespace tamp
