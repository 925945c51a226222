// GPU codecs (compress/cuda/device_codec.h) against the CPU codecs, byte for byte. Tests that
// need a device skip without one ("no CUDA device: skipping (...)").
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "compress/codec.h"
#include "compress/cuda/internal/powersgd_cases.h"
#include "compress/cuda/internal/test_cases.h"
#include "compress/error_feedback.h"
#include "compress/registry.h"
#include "compress/wire_format.h"
#include "gtest/gtest.h"
#include "kernels/cuda_testing.h"
#include "kernels/device.h"
#if TAMP_HAVE_CUDA
#include "compress/cuda/device_codec.h"
#include "compress/cuda/device_powersgd.h"
#endif

namespace tamp::compress::cuda {
namespace {

#if TAMP_HAVE_CUDA

using cuda_testing::Flavor;
using kernels::DeviceArray;
using kernels::testing::Allocate;
using kernels::testing::CompareBitwise;
using kernels::testing::CompareBytes;
using kernels::testing::Download;
using kernels::testing::Upload;

// Runs without a device: the checks before any device work.
TEST(DeviceCodecCreateTest, RefusesWhatItCannotDo) {
  config::Codec powersgd;
  powersgd.set_name("powersgd");
  powersgd.set_rank(2);
  EXPECT_EQ(DeviceCodec::Create(powersgd, 10).status().code(), absl::StatusCode::kUnimplemented);
  config::Codec bad;
  bad.set_name("qsgd");  // 'levels' missing.
  EXPECT_EQ(DeviceCodec::Create(bad, 10).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasDeviceCodec("topk"));
  EXPECT_TRUE(HasDeviceCodec("none"));
  EXPECT_TRUE(HasDeviceCodec("randomblock"));
  EXPECT_TRUE(HasDeviceCodec("randomk"));
  EXPECT_TRUE(HasDeviceCodec("threshold"));
  config::Codec threshold = cuda_testing::NamedSpec("threshold");
  threshold.set_threshold(0.5);
  EXPECT_EQ(DeviceCodec::Create(threshold, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasDeviceCodec("powersgd"));  // As a PowerSgdWorker (device_powersgd.h).
  EXPECT_TRUE(HasDeviceRounds("powersgd"));
  EXPECT_FALSE(HasDeviceRounds("topk"));
  if (!kernels::CudaDeviceAvailable()) {
    config::Codec fp16;
    fp16.set_name("fp16");
    EXPECT_EQ(DeviceCodec::Create(fp16, 10).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

class DeviceCodecTest : public ::testing::TestWithParam<cuda_testing::SpecCase> {};

void ExpectMatchesCpu(const config::Codec& spec, size_t n, Flavor flavor) {
  SCOPED_TRACE(::testing::Message() << "n " << n << " flavor " << static_cast<int>(flavor));
  auto cpu = CreateCodec(spec, n);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto gpu = DeviceCodec::Create(spec, n);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_EQ((*gpu)->PayloadBytes(), (*cpu)->MaxPayloadBytes());
  const std::vector<float> x = cuda_testing::Values(n, 1000 + n, flavor);
  const RandomKey key = cuda_testing::Key(static_cast<uint32_t>(n));
  DeviceArray<float> d_x;
  ASSERT_TRUE(Upload<float>(x, &d_x));

  // Encode.
  std::string cpu_payload, gpu_payload;
  ASSERT_TRUE((*cpu)->Encode(x, key, &cpu_payload).ok());
  ASSERT_TRUE((*gpu)->EncodeToPayload(d_x.data(), {}, key, &gpu_payload, nullptr).ok());
  ASSERT_TRUE(CompareBytes("payload", gpu_payload, cpu_payload));

  // Decode (=, +=).
  std::vector<float> cpu_out(n);
  ASSERT_TRUE((*cpu)->Decode(cpu_payload, key, absl::MakeSpan(cpu_out)).ok());
  DeviceArray<float> d_out;
  ASSERT_TRUE(Allocate<float>(n, &d_out));
  ASSERT_TRUE((*gpu)->DecodePayload(cpu_payload, key, d_out.data(), false, nullptr).ok());
  EXPECT_TRUE(CompareBitwise("decoded", d_out, cpu_out));
  std::vector<float> acc = cuda_testing::Values(n, 7, Flavor::kGradient);
  DeviceArray<float> d_acc;
  ASSERT_TRUE(Upload<float>(acc, &d_acc));
  ASSERT_TRUE((*cpu)->DecodeAdd(cpu_payload, key, absl::MakeSpan(acc)).ok());
  ASSERT_TRUE((*gpu)->DecodePayload(cpu_payload, key, d_acc.data(), true, nullptr).ok());
  EXPECT_TRUE(CompareBitwise("accumulated", d_acc, acc));

  // Fused error feedback: two steps against ErrorFeedback RESIDUAL.
  for (const float scale : {1.0f, 0.5f}) {
    SCOPED_TRACE(::testing::Message() << "residual scale " << scale);
    config::ErrorFeedback ef;
    ef.set_kind(config::ErrorFeedback::RESIDUAL);
    ef.set_scale(scale);
    auto memory = ErrorFeedback::Create(ef, n);
    ASSERT_TRUE(memory.ok());
    DeviceArray<float> d_residual;
    ASSERT_TRUE(Upload<float>(std::vector<float>(n, 0.0f), &d_residual));
    for (int step = 0; step < 2; ++step) {
      const std::vector<float> g = step == 0 ? x : cuda_testing::Values(n, 2000 + n, Flavor::kGradient);
      const RandomKey step_key{.seed = 42, .step = static_cast<uint64_t>(step), .chunk = 1, .worker = 0};
      DeviceArray<float> d_g;
      ASSERT_TRUE(Upload<float>(g, &d_g));
      ASSERT_TRUE((*memory)->Compress(**cpu, g, step_key, &cpu_payload).ok());
      ASSERT_TRUE((*gpu)->EncodeToPayload(d_g.data(),
                                          DeviceFeedback::Residual(d_residual.data(), scale),
                                          step_key, &gpu_payload, nullptr)
                      .ok());
      ASSERT_TRUE(CompareBytes("EF payload", gpu_payload, cpu_payload)) << "step " << step;
      ASSERT_TRUE(CompareBitwise("residual", d_residual, (*memory)->residual()))
          << "step " << step;
    }
  }
}

TEST_P(DeviceCodecTest, MatchesCpuCodec) {
  TAMP_SKIP_WITHOUT_CUDA();
  for (const size_t n : cuda_testing::Sizes()) {
    for (const Flavor flavor : {Flavor::kGradient, Flavor::kSpecial, Flavor::kHuge}) {
      ExpectMatchesCpu(GetParam().spec, n, flavor);
      if (HasFatalFailure()) return;
    }
  }
}

// Many blocks, tiles and buckets.
TEST_P(DeviceCodecTest, MatchesCpuCodecOnLargeChunks) {
  TAMP_SKIP_WITHOUT_CUDA();
  ExpectMatchesCpu(GetParam().spec, (size_t{1} << 20) + 3, Flavor::kGradient);
}

// Corrupted payloads: rejected (INVALID_ARGUMENT, output untouched) exactly when the CPU
// decoder rejects them.
TEST_P(DeviceCodecTest, RejectsWhatCpuRejects) {
  TAMP_SKIP_WITHOUT_CUDA();
  const config::Codec& spec = GetParam().spec;
  std::mt19937 rng(5);
  for (const size_t n : {size_t{33}, size_t{8199}}) {
    auto cpu = CreateCodec(spec, n);
    auto gpu = DeviceCodec::Create(spec, n);
    ASSERT_TRUE(cpu.ok() && gpu.ok());
    const std::vector<float> x = cuda_testing::Values(n, 300 + n, Flavor::kSpecial);
    const RandomKey key = cuda_testing::Key(1);
    std::string payload;
    ASSERT_TRUE((*cpu)->Encode(x, key, &payload).ok());
    const std::vector<float> sentinel(n, 12345.0f);
    for (int trial = 0; trial < 60; ++trial) {
      std::string bad = payload;
      const size_t at = kHeaderBytes + rng() % (payload.size() - kHeaderBytes);
      bad[at] = static_cast<char>(rng());
      std::vector<float> out(n);
      const bool cpu_ok = (*cpu)->Decode(bad, key, absl::MakeSpan(out)).ok();
      DeviceArray<float> d_out;
      ASSERT_TRUE(Upload<float>(sentinel, &d_out));
      const absl::Status status = (*gpu)->DecodePayload(bad, key, d_out.data(), false, nullptr);
      ASSERT_EQ(status.ok(), cpu_ok) << "trial " << trial << ": " << status;
      if (!cpu_ok) {
        EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
        EXPECT_TRUE(CompareBitwise("untouched", d_out, sentinel));
      }
    }
    // A truncated payload never reaches the device.
    DeviceArray<float> d_out;
    ASSERT_TRUE(Upload<float>(sentinel, &d_out));
    EXPECT_EQ((*gpu)->DecodePayload(absl::string_view(payload).substr(0, payload.size() - 1), key,
                                    d_out.data(), false, nullptr)
                  .code(),
              absl::StatusCode::kInvalidArgument);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllCodecs, DeviceCodecTest, ::testing::ValuesIn(cuda_testing::AllSpecs()),
    [](const ::testing::TestParamInfo<cuda_testing::SpecCase>& info) { return info.param.label; });

// The asynchronous calls: two encodes in flight on one stream wait for each other's pinned
// copy; Payload() is the CPU payload; DecodeAsync() of a corrupted body reports it from
// Checked() and writes nothing.
TEST(DeviceCodecAsyncTest, PinnedPayloadsAndDeferredVerdicts) {
  TAMP_SKIP_WITHOUT_CUDA();
  for (const char* name : {"qsgd", "topk", "fp16", "threshold"}) {
    SCOPED_TRACE(name);
    config::Codec spec = cuda_testing::NamedSpec(name);
    if (spec.name() == "qsgd") spec.set_levels(127);
    if (spec.name() == "topk") spec.set_ratio(0.01);
    if (spec.name() == "threshold") spec.set_threshold(0.5);  // A body shorter than the largest.
    const size_t n = 100003;
    auto cpu = CreateCodec(spec, n);
    auto gpu = DeviceCodec::Create(spec, n);
    ASSERT_TRUE(cpu.ok() && gpu.ok());
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    for (uint32_t step = 0; step < 2; ++step) {
      const std::vector<float> x = cuda_testing::Values(n, 50 + step, Flavor::kSpecial);
      const RandomKey key = cuda_testing::Key(step);
      DeviceArray<float> d_x;
      ASSERT_TRUE(Upload<float>(x, &d_x));
      std::string cpu_payload;
      ASSERT_TRUE((*cpu)->Encode(x, key, &cpu_payload).ok());
      ASSERT_TRUE((*gpu)->EncodeToHost(d_x.data(), {}, key, stream).ok());
      auto payload = (*gpu)->Payload();
      ASSERT_TRUE(payload.ok()) << payload.status();
      EXPECT_TRUE(CompareBytes("payload", *payload, cpu_payload)) << "step " << step;
    }
    if (spec.name() != "fp16") {  // fp16 bodies have no invalid form.
      std::string bad;
      const std::vector<float> x = cuda_testing::Values(n, 9, Flavor::kGradient);
      ASSERT_TRUE((*cpu)->Encode(x, {}, &bad).ok());
      // Indices out of order / norms negative / a count above n.
      std::memset(&bad[kHeaderBytes], 0xff, 8);
      DeviceArray<unsigned char> d_body;
      ASSERT_TRUE(Upload<unsigned char>(
          absl::MakeConstSpan(reinterpret_cast<const unsigned char*>(bad.data()) + kHeaderBytes,
                              bad.size() - kHeaderBytes),
          &d_body));
      const std::vector<float> sentinel(n, 3.0f);
      DeviceArray<float> d_out;
      ASSERT_TRUE(Upload<float>(sentinel, &d_out));
      ASSERT_TRUE((*gpu)->DecodeAsync(d_body.data(), {}, d_out.data(), true, stream).ok());
      EXPECT_EQ((*gpu)->Checked().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_TRUE(CompareBitwise("untouched", d_out, sentinel));
    }
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  }
}

// DGC_MOMENTUM fused into the sparse encodes: payloads, v and u against ErrorFeedback
// DGC_MOMENTUM around the CPU codec, step after step (NaNs and infinities at step 2); other
// codecs refuse it.
class DeviceCodecDgcTest : public ::testing::TestWithParam<cuda_testing::SpecCase> {};

TEST_P(DeviceCodecDgcTest, MomentumCorrectionAndMaskingAsTheCpu) {
  TAMP_SKIP_WITHOUT_CUDA();
  const config::Codec& spec = GetParam().spec;
  for (const size_t n : {size_t{33}, size_t{8199}, (size_t{1} << 20) + 3}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    auto cpu = CreateCodec(spec, n);
    auto gpu = DeviceCodec::Create(spec, n);
    ASSERT_TRUE(cpu.ok() && gpu.ok());
    ASSERT_TRUE((*gpu)->FusesDgcMomentum());
    ASSERT_TRUE(HasDeviceDgcMomentum(spec.name()));
    config::ErrorFeedback ef;
    ef.set_kind(config::ErrorFeedback::DGC_MOMENTUM);
    ef.set_momentum(0.9f);
    auto memory = ErrorFeedback::Create(ef, n);
    ASSERT_TRUE(memory.ok());
    DeviceArray<float> d_u, d_v;
    ASSERT_TRUE(Upload<float>(std::vector<float>(n, 0.0f), &d_u));
    ASSERT_TRUE(Upload<float>(std::vector<float>(n, 0.0f), &d_v));
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> g = cuda_testing::Values(
          n, 3000 + 7 * step + n, step == 2 ? Flavor::kSpecial : Flavor::kGradient);
      const RandomKey key{.seed = 42, .step = static_cast<uint64_t>(step), .chunk = 1, .worker = 0};
      DeviceArray<float> d_g;
      ASSERT_TRUE(Upload<float>(g, &d_g));
      std::string cpu_payload, gpu_payload;
      ASSERT_TRUE((*memory)->Compress(**cpu, g, key, &cpu_payload).ok());
      ASSERT_TRUE((*gpu)->EncodeToPayload(d_g.data(),
                                          DeviceFeedback::DgcMomentum(d_u.data(), d_v.data(), 0.9f),
                                          key, &gpu_payload, nullptr)
                      .ok());
      ASSERT_TRUE(CompareBytes("payload", gpu_payload, cpu_payload)) << "step " << step;
      ASSERT_TRUE(CompareBitwise("v", d_v, (*memory)->residual())) << "step " << step;
      ASSERT_TRUE(CompareBitwise("u", d_u, (*memory)->velocity())) << "step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    SparseCodecs, DeviceCodecDgcTest, ::testing::ValuesIn(cuda_testing::DgcMomentumSpecs()),
    [](const ::testing::TestParamInfo<cuda_testing::SpecCase>& info) { return info.param.label; });

TEST(DeviceCodecDgcRefusalTest, DenseCodecsRefuseDgcMomentum) {
  TAMP_SKIP_WITHOUT_CUDA();
  config::Codec spec = cuda_testing::NamedSpec("qsgd");
  spec.set_levels(127);
  auto gpu = DeviceCodec::Create(spec, 100);
  ASSERT_TRUE(gpu.ok());
  EXPECT_FALSE((*gpu)->FusesDgcMomentum());
  EXPECT_FALSE(HasDeviceDgcMomentum("qsgd"));
  DeviceArray<float> d_x, d_u, d_v;
  ASSERT_TRUE(Upload<float>(std::vector<float>(100, 1.0f), &d_x));
  ASSERT_TRUE(Upload<float>(std::vector<float>(100, 0.0f), &d_u));
  ASSERT_TRUE(Upload<float>(std::vector<float>(100, 0.0f), &d_v));
  std::string payload;
  EXPECT_EQ((*gpu)->EncodeToPayload(d_x.data(),
                                    DeviceFeedback::DgcMomentum(d_u.data(), d_v.data(), 0.9f), {},
                                    &payload, nullptr)
                .code(),
            absl::StatusCode::kUnimplemented);
}

// Top-k when the k-th magnitude is shared by most of the chunk (all ties resolved by index),
// and fp16/bf16 over a wide sample of bit patterns.
TEST(DeviceCodecEdgeTest, TopKWithMassiveTies) {
  TAMP_SKIP_WITHOUT_CUDA();
  const size_t n = 300007;
  std::vector<float> x(n, 0.0f);
  for (size_t i = 0; i < n; i += 1001) x[i] = (i % 2 ? -1.0f : 1.0f) * 0.5f;
  for (const uint64_t count : {uint64_t{1}, uint64_t{250}, uint64_t{5000}, uint64_t{n}}) {
    config::Codec spec;
    spec.set_name("topk");
    spec.set_count(count);
    auto cpu = CreateCodec(spec, n);
    auto gpu = DeviceCodec::Create(spec, n);
    ASSERT_TRUE(cpu.ok() && gpu.ok());
    DeviceArray<float> d_x;
    ASSERT_TRUE(Upload<float>(x, &d_x));
    std::string cpu_payload, gpu_payload;
    ASSERT_TRUE((*cpu)->Encode(x, {}, &cpu_payload).ok());
    ASSERT_TRUE((*gpu)->EncodeToPayload(d_x.data(), {}, {}, &gpu_payload, nullptr).ok());
    EXPECT_TRUE(CompareBytes("payload", gpu_payload, cpu_payload)) << "k " << count;
  }
}

// Top-k's paths to its cutoff (topk_agent.h TopKPath), candidates gathered in whatever order
// the blocks' atomics give: level 0's gather above the sampled floor (most cases), the
// candidates pass (sample_misses), the whole chunk (the *_large cases); emulation_test
// checks that these inputs take these paths. Plain, then two steps of RESIDUAL and of
// DGC_MOMENTUM against the CPU.
class DeviceCodecTopKTest : public ::testing::TestWithParam<cuda_testing::TopKCase> {};

TEST_P(DeviceCodecTopKTest, BothPathsGiveTheCpuSelection) {
  TAMP_SKIP_WITHOUT_CUDA();
  const cuda_testing::TopKCase& c = GetParam();
  const size_t n = c.x.size();
  auto cpu = CreateCodec(c.Spec(), n);
  auto gpu = DeviceCodec::Create(c.Spec(), n);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  std::vector<float> rotated = c.x;
  std::rotate(rotated.begin(), rotated.begin() + n / 3, rotated.end());
  DeviceArray<float> d_x, d_rotated;
  ASSERT_TRUE(Upload<float>(c.x, &d_x));
  ASSERT_TRUE(Upload<float>(rotated, &d_rotated));
  std::string cpu_payload, gpu_payload;
  ASSERT_TRUE((*cpu)->Encode(c.x, {}, &cpu_payload).ok());
  ASSERT_TRUE((*gpu)->EncodeToPayload(d_x.data(), {}, {}, &gpu_payload, nullptr).ok());
  ASSERT_TRUE(CompareBytes("payload", gpu_payload, cpu_payload));
  for (const auto kind : {config::ErrorFeedback::RESIDUAL, config::ErrorFeedback::DGC_MOMENTUM}) {
    SCOPED_TRACE(config::ErrorFeedback::Kind_Name(kind));
    const bool dgc = kind == config::ErrorFeedback::DGC_MOMENTUM;
    config::ErrorFeedback ef;
    ef.set_kind(kind);
    if (dgc) {
      ef.set_momentum(0.9f);
    } else {
      ef.set_scale(0.5f);
    }
    auto memory = ErrorFeedback::Create(ef, n);
    ASSERT_TRUE(memory.ok());
    DeviceArray<float> d_u, d_v;
    ASSERT_TRUE(Upload<float>(std::vector<float>(n, 0.0f), &d_u));
    ASSERT_TRUE(Upload<float>(std::vector<float>(n, 0.0f), &d_v));
    const DeviceFeedback feedback = dgc ? DeviceFeedback::DgcMomentum(d_u.data(), d_v.data(), 0.9f)
                                        : DeviceFeedback::Residual(d_v.data(), 0.5f);
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE((*memory)->Compress(**cpu, step == 0 ? c.x : rotated, {}, &cpu_payload).ok());
      ASSERT_TRUE((*gpu)->EncodeToPayload(step == 0 ? d_x.data() : d_rotated.data(), feedback, {},
                                          &gpu_payload, nullptr)
                      .ok());
      ASSERT_TRUE(CompareBytes("payload", gpu_payload, cpu_payload)) << "step " << step;
      ASSERT_TRUE(CompareBitwise("residual or v", d_v, (*memory)->residual())) << "step " << step;
      if (dgc) {
        ASSERT_TRUE(CompareBitwise("u", d_u, (*memory)->velocity())) << "step " << step;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DeviceCodecTopKTest, ::testing::ValuesIn(cuda_testing::TopKCases()),
    [](const ::testing::TestParamInfo<cuda_testing::TopKCase>& info) { return info.param.label; });

TEST(DeviceCodecEdgeTest, HalfConversionsOverManyBitPatterns) {
  TAMP_SKIP_WITHOUT_CUDA();
  const size_t n = size_t{1} << 24;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    // Every upper half-word, with low bits that hit the ties, +-1 around them and the rest.
    const uint32_t low[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x7fff, 0x8000, 0x8001,
                            0xffff, 0x1234, 0x2fff, 0x3000, 0xc000, 0xefff, 0xf000, 0x5555};
    // Low 16 bits for bf16; bits 12..0 matter for fp16, covered by the same table shifted.
    const uint32_t bits = (static_cast<uint32_t>(i >> 4) << 16) | low[i & 15];
    std::memcpy(&x[i], &bits, 4);
  }
  for (const char* name : {"fp16", "bf16"}) {
    config::Codec spec;
    spec.set_name(name);
    auto cpu = CreateCodec(spec, n);
    auto gpu = DeviceCodec::Create(spec, n);
    ASSERT_TRUE(cpu.ok() && gpu.ok());
    DeviceArray<float> d_x;
    ASSERT_TRUE(Upload<float>(x, &d_x));
    std::string cpu_payload, gpu_payload;
    ASSERT_TRUE((*cpu)->Encode(x, {}, &cpu_payload).ok());
    ASSERT_TRUE((*gpu)->EncodeToPayload(d_x.data(), {}, {}, &gpu_payload, nullptr).ok());
    EXPECT_TRUE(CompareBytes(name, gpu_payload, cpu_payload));
  }
}

// ---------------------------------------------------------------------------------------
// powersgd: the worker's rounds (device_powersgd.h) against the CPU codec, step after step
// (internal/powersgd_cases.h; powersgd_emulation_test.cc runs the same on the host).
// ---------------------------------------------------------------------------------------

class DeviceMemory final : public cuda_testing::WorkerMemory {
 public:
  // The residual starts at zero.
  explicit DeviceMemory(size_t n) {
    Report(Upload<float>(std::vector<float>(n, 0.0f), &residual_));
  }
  bool SetGradient(const std::vector<float>& g) override {
    return Report(Upload<float>(g, &gradient_));
  }
  const float* gradient() override { return gradient_.data(); }
  float* residual() override { return residual_.data(); }
  bool ReadResidual(std::vector<float>* out) override { return Report(Download(residual_, out)); }

 private:
  static bool Report(const ::testing::AssertionResult& r) {
    if (!r) ADD_FAILURE() << r.message();
    return static_cast<bool>(r);
  }
  DeviceArray<float> gradient_, residual_;
};

void ExpectDevicePowerSgdMatchesCpu(const cuda_testing::PowerSgdCase& c, int steps) {
  auto worker = CreateDevicePowerSgd(cuda_testing::PowerSgdSpec(c.rank), c.shape);
  ASSERT_TRUE(worker.ok()) << worker.status();
  DeviceMemory memory(c.shape.elements);
  cuda_testing::ExpectPowerSgdMatchesCpu(c, **worker, memory, steps);
}

// Runs without a device: the checks before any device work.
TEST(DevicePowerSgdCreateTest, RefusesWhatItCannotDo) {
  const ChunkShape thin{.elements = 30, .offset = 0, .row_length = 10};  // 3 x 10.
  EXPECT_EQ(CreateDevicePowerSgd(cuda_testing::PowerSgdSpec(4), thin).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateDevicePowerSgd(cuda_testing::NamedSpec("fp16"), thin).status().code(),
            absl::StatusCode::kUnimplemented);
  if (!kernels::CudaDeviceAvailable()) {
    EXPECT_EQ(CreateDevicePowerSgd(cuda_testing::PowerSgdSpec(2), thin).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

class DevicePowerSgdTest : public ::testing::TestWithParam<cuda_testing::PowerSgdCase> {};

TEST_P(DevicePowerSgdTest, MatchesCpuCodecStepAfterStep) {
  TAMP_SKIP_WITHOUT_CUDA();
  ExpectDevicePowerSgdMatchesCpu(GetParam(), 4);
}

INSTANTIATE_TEST_SUITE_P(PowerSgdCases, DevicePowerSgdTest,
                         ::testing::ValuesIn(cuda_testing::PowerSgdCases()),
                         [](const auto& info) { return info.param.label; });

// Many blocks and grid-stride loops: a 2^20-value slice of a 1000-column tensor that starts
// mid-row (1049 x 1000), and a vector of 300001 values (548 x 548).
TEST(DevicePowerSgdLargeTest, MatchesCpuCodecOnLargeChunks) {
  TAMP_SKIP_WITHOUT_CUDA();
  ExpectDevicePowerSgdMatchesCpu(
      {"tensor", {.elements = 1 << 20, .offset = 1000 * 7 + 333, .row_length = 1000}, 4}, 2);
  ExpectDevicePowerSgdMatchesCpu({"vector", {.elements = 300001}, 2}, 2);
}

#else  // !TAMP_HAVE_CUDA

TEST(DeviceCodecTest, BuiltWithoutCuda) { TAMP_SKIP_WITHOUT_CUDA(); }

#endif  // TAMP_HAVE_CUDA

}  // namespace
}  // namespace tamp::compress::cuda
