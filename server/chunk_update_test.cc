#include "server/chunk_update.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "compress/topk.h"
#include "gtest/gtest.h"
#include "optim/optimizer.h"

namespace tamp {
namespace {

std::unique_ptr<Optimizer> MakeSgd(size_t n) {
  config::Optimizer spec;
  spec.set_name("sgd");
  spec.set_learning_rate(0.1f);
  spec.set_momentum(0.9f);
  return *CreateOptimizer(spec, n);
}

std::unique_ptr<compress::ErrorFeedback> MakeMemory(config::ErrorFeedback::Kind kind, size_t n) {
  config::ErrorFeedback spec;
  spec.set_kind(kind);
  return *compress::ErrorFeedback::Create(spec, n);
}

// Each memory kind: the weights, payloads and memory UpdateChunk() leaves are those of
// Apply() into a delta and then Compress() of it (RESIDUAL takes the added path, the other
// kinds the plain one).
TEST(UpdateChunkTest, SameAsApplyThenCompress) {
  const size_t n = 5000;
  for (const auto kind : {config::ErrorFeedback::NONE, config::ErrorFeedback::RESIDUAL,
                          config::ErrorFeedback::DGC_MOMENTUM}) {
    SCOPED_TRACE(config::ErrorFeedback::Kind_Name(kind));
    auto optimizer = MakeSgd(n), reference_optimizer = MakeSgd(n);
    auto memory = MakeMemory(kind, n), reference_memory = MakeMemory(kind, n);
    compress::TopKCodec codec(n, 50), reference_codec(n, 50);
    std::vector<float> weights(n), reference_weights(n), update(n), delta(n), gradient(n);
    for (size_t i = 0; i < n; ++i) weights[i] = reference_weights[i] = std::sin(0.1f * i);
    for (int64_t step = 0; step < 5; ++step) {
      for (size_t i = 0; i < n; ++i) gradient[i] = std::cos(0.37f * i + step) / 3;
      const RandomKey key{.seed = 1, .step = static_cast<uint64_t>(step)};
      std::string payload, expected;
      ASSERT_TRUE(UpdateChunk(*optimizer, absl::MakeSpan(weights), gradient, step, 0.05f, *memory,
                              codec, key, absl::MakeSpan(update), &payload)
                      .ok());
      reference_optimizer->Apply(absl::MakeSpan(reference_weights), gradient, step, 0.05f,
                                 absl::MakeSpan(delta));
      ASSERT_TRUE(reference_memory->Compress(reference_codec, delta, key, &expected).ok());
      ASSERT_EQ(weights, reference_weights) << "step " << step;
      ASSERT_EQ(payload, expected) << "step " << step;
      const absl::Span<const float> owed = memory->residual();
      const absl::Span<const float> reference_owed = reference_memory->residual();
      ASSERT_EQ(std::vector<float>(owed.begin(), owed.end()),
                std::vector<float>(reference_owed.begin(), reference_owed.end()))
          << "step " << step;
    }
  }
}

}  // namespace
}  // namespace tamp
