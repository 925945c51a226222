// The GPU model (worker/gpu_model.h) against the CPU models it mirrors: the same loss,
// gradients, readiness order and predictions from the same weights and batch. Those tests
// need a device and skip without one; the refusals (no device, a kind without a GPU model,
// a broken tensor chain) run everywhere.
#include "worker/gpu_model.h"

#if TAMP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/model_layout.h"
#include "kernels/cuda_testing.h"
#include "kernels/device.h"
#include "proto/config.pb.h"
#include "worker/cpu_models.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

config::Model MlpConfig() {
  config::Model model;
  model.set_kind(config::Model::MLP);
  model.add_hidden(32);
  model.add_hidden(16);
  return model;
}

config::Model CnnConfig() {
  config::Model model;
  model.set_kind(config::Model::CNN);
  model.add_conv_channels(4);
  model.add_conv_channels(6);
  model.set_kernel_size(3);
  model.add_fc_hidden(8);
  return model;
}

std::vector<TensorSpec> Tensors(const config::Model& model) {
  auto tensors = ModelTensors(model);
  EXPECT_TRUE(tensors.ok()) << tensors.status();
  return tensors.ok() ? *tensors : std::vector<TensorSpec>{};
}

TEST(GpuModelTest, SelectCudaDeviceTakesTheDeviceOrNamesTheCause) {
  const absl::StatusOr<int> device = SelectCudaDevice(0);
  if (kernels::CudaDeviceAvailable()) {
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(*device, 0);  // Local rank 0 takes the first visible device.
    return;
  }
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
#if TAMP_HAVE_CUDA
  // The same probe as kernels::CudaDeviceUnavailableReason(), in the same words.
  EXPECT_EQ(device.status().message(), kernels::CudaDeviceUnavailableReason());
#else
  EXPECT_THAT(device.status().message(), HasSubstr("built without CUDA"));
#endif
}

TEST(GpuModelTest, RefusesKindsWithoutAGpuModelBeforeTouchingTheDevice) {
  config::Model model;
  model.set_kind(config::Model::REGISTERED);
  const auto created = CreateGpuModel(model, Tensors(MlpConfig()), 4);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(created.status().message(), "model.kind: no GPU model for REGISTERED");
}

TEST(GpuModelTest, ChecksTheTensorChainAsTheCpuModelDoes) {
  std::vector<TensorSpec> tensors = Tensors(CnnConfig());
  tensors[2].shape[1] = 5;  // conv2 reads 5 channels; conv1 makes 4.
  const auto gpu = CreateGpuModel(CnnConfig(), tensors, 4);
  const auto cpu = CreateCpuModel(CnnConfig(), tensors, 4);
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(gpu.status(), cpu.status());
}

// ---------------------------------------------------------------------------------------
// On a device.

void Randomize(absl::Span<float> values, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-scale, scale);
  for (float& v : values) v = value(rng);
}

// The GPU model's device spans from and to the host. A write has landed when it returns:
// cudaMemcpy from pageable memory may return before its DMA reaches the device, and the
// model's streams do not wait for the default stream (a read on them right after saw zeros
// on an H200), so it synchronizes the device. A read waits for `stream` first, so a read of
// a gradient in on_tensor_ready checks that it is final on memory().stream, as the model
// promises.
::testing::AssertionResult ToDevice(absl::Span<const float> host, absl::Span<float> device) {
#if TAMP_HAVE_CUDA
  cudaError_t error = cudaMemcpy(device.data(), host.data(), host.size() * sizeof(float),
                                 cudaMemcpyHostToDevice);
  if (error == cudaSuccess) error = cudaDeviceSynchronize();
  if (error != cudaSuccess) {
    return ::testing::AssertionFailure() << "host to device: " << cudaGetErrorName(error);
  }
  return ::testing::AssertionSuccess();
#else
  return ::testing::AssertionFailure() << "built without CUDA";
#endif
}

::testing::AssertionResult ToHost(absl::Span<const float> device, uintptr_t stream,
                                  absl::Span<float> host) {
#if TAMP_HAVE_CUDA
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  cudaError_t error = cudaMemcpyAsync(host.data(), device.data(), device.size() * sizeof(float),
                                      cudaMemcpyDeviceToHost, s);
  if (error == cudaSuccess) error = cudaStreamSynchronize(s);
  if (error != cudaSuccess) {
    return ::testing::AssertionFailure() << "device to host: " << cudaGetErrorName(error);
  }
  return ::testing::AssertionSuccess();
#else
  return ::testing::AssertionFailure() << "built without CUDA";
#endif
}

class GpuVsCpuTest : public ::testing::TestWithParam<config::Model> {};

// Forward/backward tolerance: the GEMMs sum in another order than OpenBLAS (fp32, K <= 784).
constexpr double kAbs = 1e-5;
constexpr double kRel = 1e-3;

TEST_P(GpuVsCpuTest, StepMatchesTheCpuModel) {
  TAMP_SKIP_WITHOUT_CUDA();
  ASSERT_TRUE(SelectCudaDevice(0).ok());
  constexpr int kBatch = 5;
  const config::Model config = GetParam();
  auto cpu = CreateCpuModel(config, Tensors(config), kBatch);
  auto gpu = CreateGpuModel(config, Tensors(config), kBatch);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  Model& c = **cpu;
  Model& g = **gpu;
  ASSERT_EQ(c.params().size(), g.params().size());
  ASSERT_EQ(g.memory().kind, TensorMemory::Kind::kCuda);
  const uintptr_t stream = g.memory().stream;
  Randomize(c.params(), 1, 0.2f);
  ASSERT_TRUE(ToDevice(c.params(), g.params()));
  std::vector<float> read_back(c.params().size());
  ASSERT_TRUE(g.ReadParams(absl::MakeSpan(read_back)).ok());
  EXPECT_TRUE(kernels::testing::CompareBitwise("ReadParams", read_back, c.params()));

  std::vector<float> x(kBatch * kImageSize);
  Randomize(absl::MakeSpan(x), 2, 1.0f);
  const std::vector<uint8_t> labels = {0, 9, 3, 3, 7};
  const std::vector<TensorSpec> tensors = Tensors(config);

  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(step);
    std::vector<int> cpu_order, gpu_order;
    const float cpu_loss =
        c.TrainStep(x.data(), labels.data(), kBatch, [&](int t) { cpu_order.push_back(t); });
    // Each gradient must be final on memory().stream when announced: keep what the
    // callback read there.
    std::vector<float> seen(g.grads().size());
    size_t offset_sum = 0;
    std::vector<size_t> offsets;
    for (const TensorSpec& spec : tensors) {
      offsets.push_back(offset_sum);
      offset_sum += spec.elements();
    }
    const float gpu_loss = g.TrainStep(x.data(), labels.data(), kBatch, [&](int t) {
      gpu_order.push_back(t);
      EXPECT_TRUE(ToHost(g.grads().subspan(offsets[t], tensors[t].elements()), stream,
                         absl::MakeSpan(seen).subspan(offsets[t], tensors[t].elements())));
    });
    ASSERT_TRUE(g.status().ok()) << g.status();
    std::vector<float> grads(g.grads().size());
    ASSERT_TRUE(ToHost(g.grads(), stream, absl::MakeSpan(grads)));
    EXPECT_EQ(gpu_order, cpu_order);
    EXPECT_NEAR(gpu_loss, cpu_loss, 1e-5 * std::abs(cpu_loss) + 1e-6);
    EXPECT_TRUE(kernels::testing::CompareClose("grads", grads, c.grads(), kAbs, kRel));
    EXPECT_TRUE(kernels::testing::CompareBitwise("grads when announced", seen, grads));
    EXPECT_EQ(g.CountCorrect(x.data(), labels.data(), kBatch),
              c.CountCorrect(x.data(), labels.data(), kBatch));

    // An update written into params() on the device (as the client's Wait does) is what
    // the next step computes with.
    for (size_t i = 0; i < c.params().size(); ++i) c.params()[i] -= 0.1f * c.grads()[i];
    ASSERT_TRUE(ToDevice(c.params(), g.params()));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GpuVsCpuTest, ::testing::Values(MlpConfig(), CnnConfig()),
                         [](const auto& info) {
                           return config::Model::Kind_Name(info.param.kind());
                         });

}  // namespace
}  // namespace tamp
