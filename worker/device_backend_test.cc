// Which chunks a device worker runs on the device and why the others go through the host
// (PlanDeviceChunks), where tensors live (TensorMemory), and the refusals of a process that
// cannot use CUDA (CheckCudaTensor, CreateCudaBackend): plain C++, on any machine.
#include "worker/device_backend.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/device.h"
#include "protocol/test_job.h"
#include "worker/cuda_backend.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

// The plans of `config`'s chunks by tensor name ("fc1.weight" has four chunks).
std::vector<std::pair<std::string, DeviceChunkPlan>> Plans(const config::RunConfig& config) {
  const JobLayout layout = testing::TestLayout(config);
  const std::vector<DeviceChunkPlan> plans = PlanDeviceChunks(config, layout);
  EXPECT_EQ(plans.size(), layout.chunks.size());
  std::vector<std::pair<std::string, DeviceChunkPlan>> named;
  for (const ChunkPlan& chunk : layout.chunks) {
    named.emplace_back(layout.tensor_of(chunk).name, plans[chunk.chunk.id]);
  }
  return named;
}

// One worker; push `push` with `feedback`, pull `pull` on every chunk (min_compress_bytes 0).
config::RunConfig Codecs(const std::string& push, const std::string& pull,
                         config::ErrorFeedback::Kind feedback = config::ErrorFeedback::RESIDUAL) {
  return testing::TestConfig([&](config::RunConfig& config) {
    config.mutable_cluster()->set_num_workers(1);
    config::Compression& compression = *config.mutable_compression();
    compression.set_min_compress_bytes(0);
    config::ChunkCompression& all = *compression.mutable_default_compression();
    all.mutable_push()->set_name(push);
    if (push == "topk" || push == "randomk") all.mutable_push()->set_ratio(0.25);
    if (push == "qsgd") all.mutable_push()->set_levels(4);
    if (push == "threshold") all.mutable_push()->set_threshold(0.01);
    if (push == "powersgd") all.mutable_push()->set_rank(2);
    all.mutable_push_feedback()->set_kind(feedback);
    all.mutable_pull()->set_name(pull);
    if (pull == "threshold") all.mutable_pull()->set_threshold(0.01);
  });
}

TEST(PlanDeviceChunksTest, GpuCodecsRunOnTheDeviceAndTheRestSayWhyNot) {
  for (const auto& [name, plan] : Plans(Codecs("topk", "fp16"))) {
    EXPECT_TRUE(plan.push_on_device()) << name << ": " << plan.push_on_host_because;
    EXPECT_TRUE(plan.pull_on_device()) << name << ": " << plan.pull_on_host_because;
  }
  for (const auto& [name, plan] :
       Plans(Codecs("qsgd", "threshold", config::ErrorFeedback::NONE))) {
    EXPECT_TRUE(plan.push_on_device()) << name << ": " << plan.push_on_host_because;
    EXPECT_TRUE(plan.pull_on_device()) << name << ": " << plan.pull_on_host_because;
  }
  // Multi-round: its worker side runs on the device, with or without a residual.
  for (const config::ErrorFeedback::Kind feedback :
       {config::ErrorFeedback::RESIDUAL, config::ErrorFeedback::NONE}) {
    for (const auto& [name, plan] : Plans(Codecs("powersgd", "bf16", feedback))) {
      EXPECT_TRUE(plan.push_on_device()) << name << ": " << plan.push_on_host_because;
      EXPECT_TRUE(plan.pull_on_device()) << name;
    }
  }
  for (const char* sparse : {"topk", "threshold"}) {
    for (const auto& [name, plan] :
         Plans(Codecs(sparse, "fp16", config::ErrorFeedback::DGC_MOMENTUM))) {
      EXPECT_TRUE(plan.push_on_device()) << sparse << " " << name << ": "
                                         << plan.push_on_host_because;
    }
  }
  // The other sparsifying codecs (DGC_MOMENTUM needs one) keep DGC's momentum on the host.
  for (const auto& [name, plan] :
       Plans(Codecs("randomk", "fp16", config::ErrorFeedback::DGC_MOMENTUM))) {
    EXPECT_EQ(plan.push_on_host_because,
              "push_feedback DGC_MOMENTUM has no GPU version with push codec 'randomk' (topk, "
              "dgc and threshold have one)")
        << name;
  }
  config::RunConfig warmup = Codecs("topk", "fp16");
  warmup.mutable_compression()->mutable_default_compression()->mutable_push()->add_ratio_warmup(
      0.5);
  for (const auto& [name, plan] : Plans(warmup)) {
    EXPECT_EQ(plan.push_on_host_because, "the push codec's ratio_warmup has no GPU version")
        << name;
  }
  config::RunConfig clipped = Codecs("topk", "fp16");
  clipped.mutable_compression()->set_clip_norm(1.0);
  for (const auto& [name, plan] : Plans(clipped)) {
    EXPECT_EQ(plan.push_on_host_because, "compression.clip_norm clips on the host") << name;
    EXPECT_TRUE(plan.pull_on_device()) << name;
  }
}

TEST(TensorMemoryTest, NamesAndDevicesAsPyTorchDoes) {
  EXPECT_EQ(TensorMemory::Host().Name(), "cpu");
  EXPECT_EQ(TensorMemory::Cuda(3, 1).Name(), "cuda:3");
  EXPECT_TRUE(TensorMemory::Cuda(1, 1).SameDevice(TensorMemory::Cuda(1, 99)));  // Any stream.
  EXPECT_FALSE(TensorMemory::Cuda(1, 1).SameDevice(TensorMemory::Cuda(0, 1)));
  EXPECT_FALSE(TensorMemory::Cuda(0, 1).SameDevice(TensorMemory::Host()));
}

TEST(CudaBackendRefusalTest, AProcessWithoutCudaSaysWhyNamingTheTensor) {
  if (kernels::CudaDeviceAvailable()) GTEST_SKIP() << "this process has a CUDA device";
  const absl::Status checked = CheckCudaTensor("fc1.weight", 0);
  EXPECT_EQ(checked.code(), absl::StatusCode::kFailedPrecondition);
#if TAMP_HAVE_CUDA
  EXPECT_THAT(checked.message(),
              HasSubstr("tensor \"fc1.weight\" is on cuda:0 but this process sees no CUDA "
                        "device ("));
#else
  EXPECT_THAT(checked.message(),
              HasSubstr("tensor \"fc1.weight\" is on cuda:0 but this build has no CUDA support"));
#endif
  const config::RunConfig config = Codecs("topk", "fp16");
  const JobLayout layout = testing::TestLayout(config);
  const absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
      CreateCudaBackend(layout, PlanDeviceChunks(config, layout), 0);
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CudaBackendRefusalTest, ADeviceThisProcessDoesNotSeeIsNamed) {
  if (!kernels::CudaDeviceAvailable())
    GTEST_SKIP() << "no CUDA device: " << kernels::CudaDeviceUnavailableReason();
  const absl::Status checked = CheckCudaTensor("w", 1000);
  EXPECT_EQ(checked.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(checked.message(), HasSubstr("tensor \"w\" is on cuda:1000 but this process sees "));
  EXPECT_TRUE(CheckCudaTensor("w", 0).ok());
}

}  // namespace
}  // namespace tamp
