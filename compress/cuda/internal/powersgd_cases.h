// PowerSGD's worker side (compress/cuda/powersgd_rounds.h) against the CPU codec, step after
// step: the cases and the comparison that compress/cuda/powersgd_emulation_test.cc (host
// backend) and device_codec_test.cc (the GPU's) share. Internal, testonly.
//
// Each step runs two workers and a server, all CPU codecs but the worker under test: its
// CPU twin (same gradient, PowerSgdCodec under compress/error_feedback.h) and a second
// worker with another gradient, so that P̂ and Q̄ are not the twin's own factors. The worker
// under test must send the twin's payloads byte for byte (both rounds, and a replayed round 0
// at step 1) and keep its residual and warm start bit for bit.
#ifndef TAMP_COMPRESS_CUDA_INTERNAL_POWERSGD_CASES_H_
#define TAMP_COMPRESS_CUDA_INTERNAL_POWERSGD_CASES_H_

#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "base/philox.h"
#include "compress/codec.h"
#include "compress/cuda/powersgd_rounds.h"
#include "compress/error_feedback.h"
#include "compress/powersgd.h"
#include "compress/registry.h"
#include "gtest/gtest.h"
#include "kernels/cuda_testing.h"
#include "proto/config.pb.h"

namespace tamp::compress::cuda_testing {

struct PowerSgdCase {
  std::string label;
  ChunkShape shape;
  uint32_t rank = 1;
  bool residual = true;     // RESIDUAL memory, else NONE.
  float scale = 1.0f;       // RESIDUAL's.
  bool zero_first = false;  // Step 0's gradients are all zero: Q̄ = 0, Q is drawn again.
};

inline void PrintTo(const PowerSgdCase& c, std::ostream* os) { *os << c.label; }

inline config::Codec PowerSgdSpec(uint32_t rank) {
  config::Codec spec;
  spec.set_name("powersgd");
  spec.set_rank(rank);
  return spec;
}

// A tensor chunk starting and ending mid-row (lead 11 of 37 columns: 21 x 37), a vector
// chunk viewed near-square (990 values: 31 x 32, two zeros of padding), ranks 1 and 4, no
// memory and a scaled one, and a step of zero gradients.
inline std::vector<PowerSgdCase> PowerSgdCases() {
  const ChunkShape matrix{.elements = 37 * 20 + 5, .offset = 37 * 5 + 11, .row_length = 37};
  const ChunkShape vector{.elements = 990, .offset = 0, .row_length = 0};
  return {
      {"matrix_rank1", matrix, 1},
      {"matrix_rank4", matrix, 4},
      {"vector_rank1", vector, 1},
      {"vector_rank4", vector, 4},
      {"matrix_rank4_no_memory", matrix, 4, false},
      {"vector_rank4_scale_half", vector, 4, true, 0.5f},
      {"matrix_rank4_zero_step", matrix, 4, true, 1.0f, true},
      {"vector_rank1_zero_step", vector, 1, true, 1.0f, true},
  };
}

// Where the worker under test reads its gradient and keeps its residual: host memory for the
// emulation, device memory for the kernels. Failures are reported through ADD_FAILURE.
class WorkerMemory {
 public:
  virtual ~WorkerMemory() = default;
  // Makes gradient() hold g.
  virtual bool SetGradient(const std::vector<float>& g) = 0;
  virtual const float* gradient() = 0;
  // n values, zero before the first step.
  virtual float* residual() = 0;
  virtual bool ReadResidual(std::vector<float>* out) = 0;
};

inline std::vector<float> PowerSgdGradient(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& v : g) v = normal(rng);
  return g;
}

// `steps` steps of `worker` (fresh, for c.shape and c.rank) against the CPU codec.
inline void ExpectPowerSgdMatchesCpu(const PowerSgdCase& c, cuda::PowerSgdWorker& worker,
                                     WorkerMemory& memory, int steps) {
  using kernels::testing::CompareBitwise;
  using kernels::testing::CompareBytes;
  const config::Codec spec = PowerSgdSpec(c.rank);
  const size_t n = c.shape.elements;
  config::ErrorFeedback feedback;
  feedback.set_kind(c.residual ? config::ErrorFeedback::RESIDUAL : config::ErrorFeedback::NONE);
  if (c.residual && c.scale != 1.0f) feedback.set_scale(c.scale);
  std::unique_ptr<Codec> twin, other, server;
  std::unique_ptr<ErrorFeedback> twin_memory, other_memory;
  for (auto* codec : {&twin, &other, &server}) {
    auto made = CreateCodec(spec, c.shape);
    ASSERT_TRUE(made.ok()) << made.status();
    *codec = *std::move(made);
  }
  for (auto* kept : {&twin_memory, &other_memory}) {
    auto made = ErrorFeedback::Create(feedback, n);
    ASSERT_TRUE(made.ok()) << made.status();
    *kept = *std::move(made);
  }
  const auto& twin_codec = static_cast<const PowerSgdCodec&>(*twin);
  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE(::testing::Message() << "step " << s);
    const RandomKey key{.seed = 7, .step = static_cast<uint64_t>(s), .chunk = 3, .worker = 0};
    RandomKey other_key = key;
    other_key.worker = 1;
    const bool zero = c.zero_first && s == 0;
    const std::vector<float> g = zero ? std::vector<float>(n, 0.0f) : PowerSgdGradient(n, 100 + s);
    const std::vector<float> h = zero ? std::vector<float>(n, 0.0f) : PowerSgdGradient(n, 200 + s);
    ASSERT_TRUE(memory.SetGradient(g));
    float* residual = c.residual ? memory.residual() : nullptr;

    // Round 0, and at step 1 its replay.
    std::string cpu0, gpu0, other0;
    ASSERT_TRUE(twin_memory->BeginRounds(*twin, g, key, &cpu0).ok());
    ASSERT_TRUE(other_memory->BeginRounds(*other, h, other_key, &other0).ok());
    const absl::Status begun =
        worker.BeginRounds(memory.gradient(), residual, c.scale, key, &gpu0, nullptr);
    ASSERT_TRUE(begun.ok()) << begun;
    ASSERT_TRUE(CompareBytes("round 0", gpu0, cpu0));
    if (s == 1) {
      ASSERT_TRUE(twin_memory->ReplayRounds(*twin, key, &cpu0).ok());
      ASSERT_TRUE(worker.ReplayRounds(key, &gpu0, nullptr).ok());
      ASSERT_TRUE(CompareBytes("replayed round 0", gpu0, cpu0));
    }
    std::vector<float> sum0(server->RoundValues(0), 0.0f);
    ASSERT_TRUE(server->DecodeAddRound(0, cpu0, key, absl::MakeSpan(sum0)).ok());
    ASSERT_TRUE(server->DecodeAddRound(0, other0, key, absl::MakeSpan(sum0)).ok());
    std::string answer0;
    server->FinishRound(0, 2, absl::MakeSpan(sum0), key, &answer0, {});

    // Round 1.
    std::string cpu1, gpu1, other1;
    ASSERT_TRUE(twin_memory->NextRound(*twin, 1, answer0, key, &cpu1).ok());
    ASSERT_TRUE(other_memory->NextRound(*other, 1, answer0, other_key, &other1).ok());
    ASSERT_TRUE(worker.NextRound(1, answer0, key, &gpu1, nullptr).ok());
    ASSERT_TRUE(CompareBytes("round 1", gpu1, cpu1));
    std::vector<float> sum1(server->RoundValues(1), 0.0f);
    ASSERT_TRUE(server->DecodeAddRound(1, cpu1, key, absl::MakeSpan(sum1)).ok());
    ASSERT_TRUE(server->DecodeAddRound(1, other1, key, absl::MakeSpan(sum1)).ok());
    std::string answer1;
    std::vector<float> aggregate(n);
    server->FinishRound(1, 2, absl::MakeSpan(sum1), key, &answer1, absl::MakeSpan(aggregate));

    // Finish: the memory and the warm start.
    ASSERT_TRUE(twin_memory->FinishRounds(*twin, answer1, key).ok());
    ASSERT_TRUE(other_memory->FinishRounds(*other, answer1, other_key).ok());
    ASSERT_TRUE(worker.FinishRounds(answer1, key, nullptr).ok());
    if (c.residual) {
      std::vector<float> gpu_residual;
      ASSERT_TRUE(memory.ReadResidual(&gpu_residual));
      ASSERT_TRUE(CompareBitwise("residual", gpu_residual, twin_memory->residual()));
    }
    ASSERT_TRUE(CompareBitwise("warm start", worker.warm_start(), twin_codec.warm_start()));
  }
}

}  // namespace tamp::compress::cuda_testing

#endif  // TAMP_COMPRESS_CUDA_INTERNAL_POWERSGD_CASES_H_
