// The CUDA DeviceBackend against its contract (worker/device_backend.h), which
// worker/client_device_test.cc's host stand-in keeps on the CPU: a device chunk's push
// payloads are the CPU codec's and error feedback's bytes, step after step (the residual
// carries on the device) and after ResetResiduals(); ApplyPull() adds (or writes) exactly
// the CPU's decoded update; the copies move values unchanged; a multi-round codec's rounds
// (powersgd) are the CPU's bytes too. Skips without a GPU.
#include "worker/cuda_backend.h"

#include <memory>
#include <string>
#include <vector>

#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "compress/registry.h"
#include "gtest/gtest.h"
#include "kernels/cuda_testing.h"
#include "protocol/keys.h"
#include "protocol/test_job.h"

namespace tamp {
namespace {

#if TAMP_HAVE_CUDA

using kernels::testing::CompareBitwise;
using kernels::testing::CompareBytes;
using kernels::testing::Download;
using kernels::testing::Upload;

struct BackendCase {
  std::string push;
  std::string pull;
  config::ErrorFeedback::Kind feedback;
};

// One worker, `push` + `feedback` (RESIDUAL at scale 0.75, DGC_MOMENTUM at m = 0.8) and
// `pull` on every chunk (fc1.weight: 4 chunks of 784).
config::RunConfig Codecs(const BackendCase& c) {
  return testing::TestConfig([&](config::RunConfig& config) {
    config.mutable_cluster()->set_num_workers(1);
    config::Compression& compression = *config.mutable_compression();
    compression.set_min_compress_bytes(0);
    config::ChunkCompression& all = *compression.mutable_default_compression();
    all.mutable_push()->set_name(c.push);
    if (c.push == "topk") all.mutable_push()->set_ratio(0.25);
    if (c.push == "qsgd") all.mutable_push()->set_levels(4);
    if (c.push == "threshold") all.mutable_push()->set_threshold(0.01);
    all.mutable_push_feedback()->set_kind(c.feedback);
    if (c.feedback == config::ErrorFeedback::RESIDUAL) {
      all.mutable_push_feedback()->set_scale(0.75f);
    } else {
      all.mutable_push_feedback()->set_momentum(0.8f);
    }
    all.mutable_pull()->set_name(c.pull);
    if (c.pull == "topk") all.mutable_pull()->set_ratio(0.25);
    if (c.pull == "threshold") all.mutable_pull()->set_threshold(0.01);
  });
}

class CudaBackendTest : public ::testing::TestWithParam<BackendCase> {};

TEST_P(CudaBackendTest, PushPayloadsAndAppliedUpdatesAreTheCpusBitForBit) {
  TAMP_SKIP_WITHOUT_CUDA();
  const config::RunConfig config = Codecs(GetParam());
  const JobLayout layout = testing::TestLayout(config);
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
      CreateCudaBackend(layout, PlanDeviceChunks(config, layout), 0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  constexpr uintptr_t kStream = 1;  // The legacy default stream, as DLPack numbers it.
  for (const ChunkPlan& chunk : layout.chunks) {
    const uint32_t id = chunk.chunk.id;
    const size_t n = chunk.chunk.length;
    SCOPED_TRACE(layout.tensor_of(chunk).name + " chunk " + std::to_string(id));
    auto cpu_push = *compress::CreateCodec(chunk.compression.push(), n);
    auto cpu_feedback = *compress::ErrorFeedback::Create(chunk.compression.push_feedback(), n);
    // Three steps: the memory carries; then a reset forgets it on both sides.
    for (uint64_t step = 0; step < 4; ++step) {
      if (step == 3) {
        ASSERT_TRUE((*backend)->ResetResiduals(kStream).ok());
        cpu_feedback->Reset();
      }
      const std::vector<float> grad = testing::TestGradient(n, step, id);
      const auto d_grad = Upload<float>(grad);
      const RandomKey key = PushKey(config, step, id, 0);
      std::string gpu, cpu;
      ASSERT_TRUE((*backend)->EncodePush(id, d_grad.data(), key, &gpu, kStream).ok());
      ASSERT_TRUE(cpu_feedback->Compress(*cpu_push, grad, key, &cpu).ok());
      EXPECT_TRUE(CompareBytes("payload", gpu, cpu)) << "step " << step;
    }
    // An update, decoded onto device weights: added, then written.
    auto cpu_pull = *compress::CreateCodec(chunk.compression.pull(), n);
    const std::vector<float> update = testing::TestGradient(n, 9, id);
    const RandomKey key = PullKey(config, 0, id);
    std::string payload;
    ASSERT_TRUE(cpu_pull->Encode(update, key, &payload).ok());
    std::vector<float> decoded(n);
    ASSERT_TRUE(cpu_pull->Decode(payload, key, absl::MakeSpan(decoded)).ok());
    std::vector<float> weights = testing::TestGradient(n, 5, id);
    auto d_weights = Upload<float>(weights);
    ASSERT_TRUE((*backend)->ApplyPull(id, payload, key, d_weights.data(), false, kStream).ok());
    for (size_t i = 0; i < n; ++i) weights[i] += decoded[i];
    EXPECT_TRUE(CompareBitwise("added", Download(d_weights), weights));
    ASSERT_TRUE((*backend)->ApplyPull(id, payload, key, d_weights.data(), true, kStream).ok());
    EXPECT_TRUE(CompareBitwise("written", Download(d_weights), decoded));
    // A corrupt payload is refused and leaves the weights alone.
    std::string corrupt = payload.substr(0, payload.size() - 1);
    EXPECT_FALSE((*backend)->ApplyPull(id, corrupt, key, d_weights.data(), false, kStream).ok());
    EXPECT_TRUE(CompareBitwise("untouched", Download(d_weights), decoded));
  }
  // Copies through the staging buffer move values unchanged.
  const std::vector<float> values = testing::TestGradient(1000, 1, 1);
  auto d_values = Upload<float>(values);
  absl::StatusOr<absl::Span<float>> staging = (*backend)->Staging(values.size());
  ASSERT_TRUE(staging.ok()) << staging.status();
  ASSERT_TRUE(
      (*backend)->CopyToHost(d_values.data(), staging->data(), values.size(), kStream).ok());
  EXPECT_TRUE(CompareBitwise("to host", *staging, values));
  for (float& v : *staging) v = -v;
  ASSERT_TRUE(
      (*backend)->CopyToDevice(staging->data(), d_values.data(), values.size(), kStream).ok());
  EXPECT_TRUE(CompareBitwise("to device", Download(d_values), *staging));
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, CudaBackendTest,
    ::testing::Values(BackendCase{"topk", "fp16", config::ErrorFeedback::RESIDUAL},
                      BackendCase{"qsgd", "topk", config::ErrorFeedback::RESIDUAL},
                      BackendCase{"terngrad", "bf16", config::ErrorFeedback::RESIDUAL},
                      BackendCase{"threshold", "threshold", config::ErrorFeedback::RESIDUAL},
                      BackendCase{"topk", "fp16", config::ErrorFeedback::DGC_MOMENTUM},
                      BackendCase{"threshold", "topk", config::ErrorFeedback::DGC_MOMENTUM}));

// powersgd (two rounds; RESIDUAL at scale 0.75, rank 1 so that every chunk's view allows
// it): round 0 from EncodePush(), round 1, the finish and a replay are the CPU's bytes step
// after step, the server's answers being those a one-worker shard gives; the residual and
// the warm start carry on the device (each step's payloads depend on them).
TEST(CudaBackendRoundsTest, PowerSgdRoundsAreTheCpusBitForBit) {
  TAMP_SKIP_WITHOUT_CUDA();
  const config::RunConfig config = testing::TestConfig([](config::RunConfig& config) {
    config.mutable_cluster()->set_num_workers(1);
    config.mutable_compression()->set_min_compress_bytes(0);
    config::ChunkCompression& all = *config.mutable_compression()->mutable_default_compression();
    all.mutable_push()->set_name("powersgd");
    all.mutable_push()->set_rank(1);
    all.mutable_push_feedback()->set_kind(config::ErrorFeedback::RESIDUAL);
    all.mutable_push_feedback()->set_scale(0.75f);
    all.mutable_pull()->set_name("fp16");
  });
  const JobLayout layout = testing::TestLayout(config);
  absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
      CreateCudaBackend(layout, PlanDeviceChunks(config, layout), 0);
  ASSERT_TRUE(backend.ok()) << backend.status();
  constexpr uintptr_t kStream = 1;
  for (const ChunkPlan& chunk : layout.chunks) {
    const uint32_t id = chunk.chunk.id;
    const size_t n = chunk.chunk.length;
    SCOPED_TRACE(layout.tensor_of(chunk).name + " chunk " + std::to_string(id));
    const compress::ChunkShape shape =
        compress::ChunkShapeInTensor(layout.tensor_of(chunk).shape, chunk.chunk.offset, n);
    auto cpu = *compress::CreateCodec(chunk.compression.push(), shape);
    auto server = *compress::CreateCodec(chunk.compression.push(), shape);
    auto cpu_feedback = *compress::ErrorFeedback::Create(chunk.compression.push_feedback(), n);
    for (uint64_t step = 0; step < 3; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const std::vector<float> grad = testing::TestGradient(n, step, id);
      const auto d_grad = Upload<float>(grad);
      const RandomKey key = PushKey(config, step, id, 0);
      std::string gpu, cpu_payload, answer;
      ASSERT_TRUE((*backend)->EncodePush(id, d_grad.data(), key, &gpu, kStream).ok());
      ASSERT_TRUE(cpu_feedback->BeginRounds(*cpu, grad, key, &cpu_payload).ok());
      EXPECT_TRUE(CompareBytes("round 0", gpu, cpu_payload));
      if (step == 2) {
        ASSERT_TRUE((*backend)->ReplayPushRounds(id, key, &gpu, kStream).ok());
        ASSERT_TRUE(cpu_feedback->ReplayRounds(*cpu, key, &cpu_payload).ok());
        EXPECT_TRUE(CompareBytes("replayed round 0", gpu, cpu_payload));
      }
      for (int round = 0; round < 2; ++round) {
        if (round == 1) {
          ASSERT_TRUE((*backend)->PushRound(id, 1, answer, key, &gpu, kStream).ok());
          ASSERT_TRUE(cpu_feedback->NextRound(*cpu, 1, answer, key, &cpu_payload).ok());
          EXPECT_TRUE(CompareBytes("round 1", gpu, cpu_payload));
        }
        std::vector<float> sum(server->RoundValues(round), 0.0f);
        ASSERT_TRUE(server->DecodeAddRound(round, cpu_payload, key, absl::MakeSpan(sum)).ok());
        std::vector<float> aggregate(round == 1 ? n : 0);
        server->FinishRound(round, 1, absl::MakeSpan(sum), key, &answer,
                            absl::MakeSpan(aggregate));
      }
      ASSERT_TRUE((*backend)->FinishPushRounds(id, answer, key, kStream).ok());
      ASSERT_TRUE(cpu_feedback->FinishRounds(*cpu, answer, key).ok());
      // Round 1 again, after the finish: out of order.
      EXPECT_EQ((*backend)->PushRound(id, 1, answer, key, &gpu, kStream).code(),
                absl::StatusCode::kFailedPrecondition);
    }
  }
}

#else  // TAMP_HAVE_CUDA

TEST(CudaBackendTest, PushPayloadsAndAppliedUpdatesAreTheCpusBitForBit) {
  GTEST_SKIP() << "no CUDA device: skipping (built without CUDA)";
}

#endif  // TAMP_HAVE_CUDA

}  // namespace
}  // namespace tamp
