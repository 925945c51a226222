// PowerSGD's worker side with the kernels of powersgd.cu emulated on the host
// (internal/emulation.h EmulatedPowerSgdKernels) against PowerSgdCodec under ErrorFeedback:
// payloads of both rounds, residuals and warm starts bit for bit over several steps
// (internal/powersgd_cases.h), and the worker's refusals. Runs on any machine;
// device_codec_test.cc runs the same cases on the kernels themselves.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compress/codec.h"
#include "compress/cuda/internal/emulation.h"
#include "compress/cuda/internal/powersgd_cases.h"
#include "compress/cuda/powersgd_rounds.h"
#include "compress/error_feedback.h"
#include "compress/powersgd.h"
#include "compress/registry.h"
#include "gtest/gtest.h"
#include "kernels/cuda_testing.h"

namespace tamp::compress::cuda_internal {
namespace {

using cuda_testing::PowerSgdCase;
using cuda_testing::PowerSgdSpec;
using kernels::testing::CompareBitwise;
using kernels::testing::CompareBytes;

class HostMemory final : public cuda_testing::WorkerMemory {
 public:
  explicit HostMemory(size_t n) : residual_(n, 0.0f) {}
  bool SetGradient(const std::vector<float>& g) override {
    gradient_ = g;
    return true;
  }
  const float* gradient() override { return gradient_.data(); }
  float* residual() override { return residual_.data(); }
  bool ReadResidual(std::vector<float>* out) override {
    *out = residual_;
    return true;
  }

 private:
  std::vector<float> gradient_, residual_;
};

class PowerSgdEmulationTest : public ::testing::TestWithParam<PowerSgdCase> {};

TEST_P(PowerSgdEmulationTest, MatchesCpuCodecStepAfterStep) {
  const PowerSgdCase& c = GetParam();
  auto worker = MakeEmulatedPowerSgd(PowerSgdSpec(c.rank), c.shape);
  ASSERT_TRUE(worker.ok()) << worker.status();
  HostMemory memory(c.shape.elements);
  cuda_testing::ExpectPowerSgdMatchesCpu(c, **worker, memory, 4);
}

INSTANTIATE_TEST_SUITE_P(Cases, PowerSgdEmulationTest,
                         ::testing::ValuesIn(cuda_testing::PowerSgdCases()),
                         [](const auto& info) { return info.param.label; });

// Random inputs almost never tell a product's order of summation apart (products of floats
// are exact in fp64, and 29 spare bits hide the rest), so these answers are crafted: the
// worker accepts any well-formed P̂ and Q̄, and terms like x + 2^60 - 2^60 give 0 summed in
// the CPU's order and x in any other. Two steps of `g` with the answers `p_hat`, `q_bar`.
void ExpectCraftedStepsMatchCpu(const ChunkShape& shape, uint32_t rank, const std::vector<float>& g,
                                const std::vector<float>& p_hat, const std::vector<float>& q_bar) {
  auto twin = *CreateCodec(PowerSgdSpec(rank), shape);
  const auto& twin_codec = static_cast<const PowerSgdCodec&>(*twin);
  config::ErrorFeedback residual_spec;
  residual_spec.set_kind(config::ErrorFeedback::RESIDUAL);
  auto twin_memory = *ErrorFeedback::Create(residual_spec, shape.elements);
  auto worker = *MakeEmulatedPowerSgd(PowerSgdSpec(rank), shape);
  HostMemory memory(shape.elements);
  ASSERT_TRUE(memory.SetGradient(g));
  std::string answer0, answer1;
  twin_codec.AppendMessage(0, p_hat, &answer0);
  twin_codec.AppendMessage(1, q_bar, &answer1);
  for (uint64_t s = 0; s < 2; ++s) {
    SCOPED_TRACE(::testing::Message() << "step " << s);
    const RandomKey key{.seed = 3, .step = s};
    std::string cpu, gpu;
    ASSERT_TRUE(twin_memory->BeginRounds(*twin, g, key, &cpu).ok());
    ASSERT_TRUE(
        worker->BeginRounds(memory.gradient(), memory.residual(), 1.0f, key, &gpu, nullptr).ok());
    EXPECT_TRUE(CompareBytes("round 0", gpu, cpu));
    ASSERT_TRUE(twin_memory->NextRound(*twin, 1, answer0, key, &cpu).ok());
    ASSERT_TRUE(worker->NextRound(1, answer0, key, &gpu, nullptr).ok());
    EXPECT_TRUE(CompareBytes("round 1", gpu, cpu));
    ASSERT_TRUE(twin_memory->FinishRounds(*twin, answer1, key).ok());
    ASSERT_TRUE(worker->FinishRounds(answer1, key, nullptr).ok());
    std::vector<float> residual;
    ASSERT_TRUE(memory.ReadResidual(&residual));
    EXPECT_TRUE(CompareBitwise("residual", residual, twin_memory->residual()));
    EXPECT_TRUE(CompareBitwise("warm start", worker->warm_start(), twin_codec.warm_start()));
  }
}

constexpr float kHuge = 0x1p60f;

TEST(PowerSgdWorkerTest, QSumsOverTheRowsInTheCpuOrder) {
  // 3 x 1: Q_i = 0.5 * 1 + 1 * 2^60 + 1 * (-2^60).
  ExpectCraftedStepsMatchCpu({.elements = 3, .row_length = 1}, 1, {0.5f, 1.0f, 1.0f},
                             {1.0f, kHuge, -kHuge}, {1.0f});
}

TEST(PowerSgdWorkerTest, PSumsOverTheColumnsInTheCpuOrder) {
  // 1 x 3: from step 1 Q is Q̄ = (1, 2^60, -2^60) with a unit column, so P = tiny + q - q.
  ExpectCraftedStepsMatchCpu({.elements = 3, .row_length = 3}, 1, {1.0f, 1.0f, 1.0f}, {1.0f},
                             {1.0f, kHuge, -kHuge});
}

TEST(PowerSgdWorkerTest, SentSumsOverTheRankInTheCpuOrder) {
  // 3 x 3, rank 3: M's rows are 1, -1 and 1, P̂'s (1, 2^60, 2^60), (0, 0, 2^61) and 0, so
  // every row of Q_i is (1, 2^60, -2^60) and sent's first row 1 + 2^120 - 2^120.
  ExpectCraftedStepsMatchCpu({.elements = 9, .row_length = 3}, 3,
                             {1.0f, 1.0f, 1.0f, -1.0f, -1.0f, -1.0f, 1.0f, 1.0f, 1.0f},
                             {1.0f, kHuge, kHuge, 0.0f, 0.0f, 2 * kHuge, 0.0f, 0.0f, 0.0f},
                             std::vector<float>(9, 1.0f));
}

TEST(PowerSgdWorkerTest, CreateRefusesWhatTheCpuCodecRefuses) {
  const ChunkShape thin{.elements = 30, .offset = 0, .row_length = 10};  // 3 x 10.
  auto cpu = CreateCodec(PowerSgdSpec(4), thin);
  auto worker = MakeEmulatedPowerSgd(PowerSgdSpec(4), thin);
  ASSERT_EQ(cpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(worker.status(), cpu.status());
  config::Codec no_rank;
  no_rank.set_name("powersgd");
  EXPECT_EQ(MakeEmulatedPowerSgd(no_rank, thin).status().code(),
            absl::StatusCode::kInvalidArgument);
  config::Codec fp16;
  fp16.set_name("fp16");
  EXPECT_EQ(MakeEmulatedPowerSgd(fp16, thin).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(MakeEmulatedPowerSgd(PowerSgdSpec(3), thin).ok());
}

// The server's answers to step 0 of a one-worker job on a 12 x 10 matrix whose worker (a CPU
// codec) pushes g.
struct Answers {
  std::string round0, round1;
};
Answers ServerAnswers(const std::vector<float>& g, const RandomKey& key) {
  const ChunkShape shape{.elements = 120, .row_length = 10};
  auto cpu = *CreateCodec(PowerSgdSpec(2), shape);
  auto server = *CreateCodec(PowerSgdSpec(2), shape);
  Answers answers;
  std::string payload;
  EXPECT_TRUE(cpu->EncodeRound(0, g, {}, key, &payload).ok());
  std::vector<float> sum0(server->RoundValues(0), 0.0f);
  EXPECT_TRUE(server->DecodeAddRound(0, payload, key, absl::MakeSpan(sum0)).ok());
  server->FinishRound(0, 1, absl::MakeSpan(sum0), key, &answers.round0, {});
  EXPECT_TRUE(cpu->EncodeRound(1, {}, answers.round0, key, &payload).ok());
  std::vector<float> sum1(server->RoundValues(1), 0.0f);
  EXPECT_TRUE(server->DecodeAddRound(1, payload, key, absl::MakeSpan(sum1)).ok());
  std::vector<float> aggregate(120);
  server->FinishRound(1, 1, absl::MakeSpan(sum1), key, &answers.round1, absl::MakeSpan(aggregate));
  return answers;
}

TEST(PowerSgdWorkerTest, BadAnswersAreRejectedAndChangeNothing) {
  const ChunkShape shape{.elements = 120, .row_length = 10};
  auto worker = *MakeEmulatedPowerSgd(PowerSgdSpec(2), shape);
  const std::vector<float> g = cuda_testing::PowerSgdGradient(120, 1);
  std::vector<float> residual(120, 0.0f);
  const RandomKey key{.seed = 1};
  const Answers good = ServerAnswers(g, key);
  std::string payload;
  ASSERT_TRUE(worker->BeginRounds(g.data(), residual.data(), 1.0f, key, &payload, nullptr).ok());
  const std::vector<float> warm(worker->warm_start().begin(), worker->warm_start().end());

  // Round 1 is next: a wrong round, a short answer and another codec's are refused.
  EXPECT_EQ(worker->NextRound(1, good.round1, key, &payload, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(worker->NextRound(1, good.round0.substr(1), key, &payload, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  std::string other_codec = good.round0;
  other_codec[0] = static_cast<char>(CodecId::kFp16);
  EXPECT_EQ(worker->NextRound(1, other_codec, key, &payload, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(worker->NextRound(1, good.round0, key, &payload, nullptr).ok());

  // The aggregate: refused answers leave the residual and the warm start as they were.
  const absl::Status bad = worker->FinishRounds(good.round0, key, nullptr);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("aggregate"), std::string::npos) << bad;
  EXPECT_TRUE(CompareBitwise("residual", residual, std::vector<float>(120, 0.0f)));
  EXPECT_TRUE(CompareBitwise("warm start", worker->warm_start(), warm));
  ASSERT_TRUE(worker->FinishRounds(good.round1, key, nullptr).ok());
  EXPECT_FALSE(CompareBitwise("residual", residual, std::vector<float>(120, 0.0f)));
}

TEST(PowerSgdWorkerTest, RoundsMustComeInOrder) {
  const ChunkShape shape{.elements = 120, .row_length = 10};
  auto worker = *MakeEmulatedPowerSgd(PowerSgdSpec(2), shape);
  const RandomKey key{.seed = 1};
  std::string payload;
  EXPECT_EQ(worker->ReplayRounds(key, &payload, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(worker->NextRound(1, "", key, &payload, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(worker->FinishRounds("", key, nullptr).code(), absl::StatusCode::kFailedPrecondition);
  const std::vector<float> g = cuda_testing::PowerSgdGradient(120, 2);
  ASSERT_TRUE(worker->BeginRounds(g.data(), nullptr, 1.0f, key, &payload, nullptr).ok());
  EXPECT_EQ(worker->NextRound(0, "", key, &payload, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(worker->NextRound(2, "", key, &payload, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(worker->FinishRounds("", key, nullptr).code(), absl::StatusCode::kFailedPrecondition);
}

// The emulated kernels, whose Assemble() fails (a device fault) while `fail` is set.
class FaultyKernels final : public cuda::PowerSgdKernels {
 public:
  FaultyKernels(const PowerSgdLayout& l, const bool* fail) : kernels_(l), fail_(fail) {}
  absl::Status Assemble(const float* input, const float* residual, void* stream) override {
    if (*fail_) return absl::InternalError("device fault");
    return kernels_.Assemble(input, residual, stream);
  }
  absl::Status Project(absl::Span<const float> q, absl::Span<float> p, void* stream) override {
    return kernels_.Project(q, p, stream);
  }
  absl::Status ProjectBack(absl::Span<const float> p_hat, absl::Span<float> q_local,
                           void* stream) override {
    return kernels_.ProjectBack(p_hat, q_local, stream);
  }
  absl::Status Finish(float* residual, float residual_scale, void* stream) override {
    return kernels_.Finish(residual, residual_scale, stream);
  }

 private:
  EmulatedPowerSgdKernels kernels_;
  const bool* fail_;
};

TEST(PowerSgdWorkerTest, AFailedBeginLeavesNothingToReplay) {
  bool fail = false;
  auto worker = *cuda::PowerSgdWorker::Create(
      PowerSgdSpec(2), {.elements = 120, .row_length = 10},
      [&](const PowerSgdLayout& l) -> absl::StatusOr<std::unique_ptr<cuda::PowerSgdKernels>> {
        return std::make_unique<FaultyKernels>(l, &fail);
      });
  const std::vector<float> g = cuda_testing::PowerSgdGradient(120, 3);
  const RandomKey key{.seed = 1};
  std::string payload;
  ASSERT_TRUE(worker->BeginRounds(g.data(), nullptr, 1.0f, key, &payload, nullptr).ok());
  ASSERT_TRUE(worker->ReplayRounds(key, &payload, nullptr).ok());
  fail = true;
  EXPECT_EQ(worker->BeginRounds(g.data(), nullptr, 1.0f, key, &payload, nullptr).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(worker->ReplayRounds(key, &payload, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace tamp::compress::cuda_internal
