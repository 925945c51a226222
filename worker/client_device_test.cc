// The worker client's device path (worker/device_backend.h) on the CPU: a host-memory
// stand-in for the CUDA backend (worker/internal/host_stand_in.h) keeps the GPU codecs'
// contract (the CPU codecs' bytes and residuals), so these tests check the client's side of
// it: which chunks go through the backend's codecs and which through host copies, that a
// device worker's replica is bit for bit a host worker's, and that CUDA calls the process
// cannot serve are refused changing nothing. worker/cuda_backend_test.cc checks the CUDA backend against the same contract on
// a GPU.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kernels/device.h"
#include "server/service.h"
#include "server/shard.h"
#include "server/test_job.h"
#include "worker/client.h"
#include "worker/device_backend.h"
#include "worker/internal/host_stand_in.h"

namespace tamp {
namespace {

using ::tamp::testing::Calls;
using ::tamp::testing::HostStandIn;

using ::testing::HasSubstr;

// server/test_job.h's job for one worker (fc1.weight: four chunks of 784 values), with codecs
// that put some chunks on the device and some on the host, each way:
//   fc1.weight  push topk + RESIDUAL (device), pull fp16 (device)
//   fc2.weight  push randomk + DGC_MOMENTUM (host: topk, dgc and threshold fuse it), pull
//               threshold (device)
//   biases      none both ways (under min_compress_bytes; device, as none has a GPU version)
config::RunConfig MixedConfig() {
  return testing::TestConfig([](config::RunConfig& config) {
    config.mutable_cluster()->set_num_workers(1);
    config::Compression& compression = *config.mutable_compression();
    compression.set_min_compress_bytes(64);
    config::ChunkCompression& fallback = *compression.mutable_default_compression();
    fallback.mutable_push()->set_name("topk");
    fallback.mutable_push()->set_ratio(0.25);
    fallback.mutable_push_feedback()->set_kind(config::ErrorFeedback::RESIDUAL);
    fallback.mutable_pull()->set_name("fp16");
    config::TensorOverride& fc2 = *compression.add_tensor_overrides();
    fc2.set_pattern("fc2.weight");
    fc2.mutable_compression()->mutable_push()->set_name("randomk");
    fc2.mutable_compression()->mutable_push()->set_ratio(0.25);
    fc2.mutable_compression()->mutable_push_feedback()->set_kind(
        config::ErrorFeedback::DGC_MOMENTUM);
    fc2.mutable_compression()->mutable_pull()->set_name("threshold");
    fc2.mutable_compression()->mutable_pull()->set_threshold(0.001);
  });
}

// Two in-process shards of `config`'s job.
class Job {
 public:
  explicit Job(const config::RunConfig& config)
      : config_(config), layout_(testing::TestLayout(config)) {
    for (uint32_t rank = 0; rank < 2; ++rank) {
      shards_.push_back(*Shard::Create(config_, layout_, rank));
      services_.push_back(std::make_unique<ParameterServerService>(shards_.back().get()));
      int port = 0;
      grpc::ServerBuilder builder;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
      builder.RegisterService(services_.back().get());
      servers_.push_back(builder.BuildAndStart());
      addresses_.push_back(absl::StrCat("127.0.0.1:", port));
    }
  }
  ~Job() {
    for (auto& server : servers_) server->Shutdown();
  }

  std::unique_ptr<Client> Connect(DeviceBackendFactory backends = CreateCudaBackend) {
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(config_, layout_, 0, addresses_, RunLength{10, 20}, std::move(backends));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  const JobLayout& layout() const { return layout_; }

 private:
  const config::RunConfig config_;
  const JobLayout layout_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::unique_ptr<ParameterServerService>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> addresses_;
};

// Starts `client` and runs `steps` steps of testing::TestGradient on `memory`; the weights.
std::vector<float> Train(Client& client, const JobLayout& layout, const TensorMemory& memory,
                         int steps) {
  std::vector<float> params(layout.total_elements);
  const std::vector<absl::Span<float>> tensors = SplitIntoTensors(layout, absl::MakeSpan(params));
  absl::StatusOr<uint64_t> first = client.Start(tensors, memory);
  EXPECT_TRUE(first.ok()) << first.status();
  for (int step = 0; step < steps; ++step) {
    std::vector<float> grads = testing::TestGradient(layout.total_elements, step, 0);
    const std::vector<absl::Span<float>> grad_tensors =
        SplitIntoTensors(layout, absl::MakeSpan(grads));
    EXPECT_TRUE(client.BeginStep(step, tensors, memory).ok());
    for (int t = static_cast<int>(layout.tensors.size()) - 1; t >= 0; --t) {
      const absl::Status pushed = client.Push(t, grad_tensors[t], memory);
      EXPECT_TRUE(pushed.ok()) << pushed;
    }
    const absl::Status waited = client.Wait(tensors, memory);
    EXPECT_TRUE(waited.ok()) << waited;
  }
  return params;
}

TEST(ClientDeviceTest, ADeviceWorkersReplicaIsBitForBitAHostWorkers) {
  const config::RunConfig config = MixedConfig();
  constexpr int kSteps = 3;
  Job host_job(config);
  const std::vector<float> host =
      Train(*host_job.Connect(), host_job.layout(), TensorMemory::Host(), kSteps);

  Job device_job(config);
  Calls calls;
  std::unique_ptr<Client> client = device_job.Connect(
      [&calls](const JobLayout& layout, absl::Span<const DeviceChunkPlan> plan, int device) {
        EXPECT_EQ(device, 1);
        return absl::StatusOr<std::unique_ptr<DeviceBackend>>(
            std::make_unique<HostStandIn>(layout, plan, &calls));
      });
  const std::vector<float> device =
      Train(*client, device_job.layout(), TensorMemory::Cuda(1, 7), kSteps);

  ASSERT_EQ(device.size(), host.size());
  EXPECT_EQ(std::memcmp(device.data(), host.data(), host.size() * sizeof(float)), 0)
      << "the device worker's weights differ from the host worker's";
  EXPECT_NE(host, std::vector<float>(host.size(), 0.0f));
  // Per step: fc1.weight's 4 chunks and the 2 biases encode through the backend's codecs,
  // and every chunk's update applies through them; fc2.weight (one chunk) is copied to the
  // host once per push. Start() copies every chunk's initial weights (7) down.
  EXPECT_EQ(calls.encodes, (4 + 2) * kSteps);
  EXPECT_EQ(calls.applies, (4 + 2 + 1) * kSteps);
  EXPECT_EQ(calls.to_host, 1 * kSteps);
  EXPECT_EQ(calls.to_device, 7);
  EXPECT_EQ(calls.resets, 0);
}

TEST(ClientDeviceTest, ACudaCallThisProcessCannotServeChangesNothing) {
  if (kernels::CudaDeviceAvailable()) GTEST_SKIP() << "this process has a CUDA device";
  Job job(MixedConfig());
  std::unique_ptr<Client> client = job.Connect();  // The real CUDA backend.
  std::vector<float> params(job.layout().total_elements, 0.0f);
  const std::vector<absl::Span<float>> tensors =
      SplitIntoTensors(job.layout(), absl::MakeSpan(params));
  const absl::StatusOr<uint64_t> refused = client->Start(tensors, TensorMemory::Cuda(0, 1));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("Start(): tensor \"fc1.weight\" is on cuda:0 but this "));
  EXPECT_THAT(refused.status().message(),
#if TAMP_HAVE_CUDA
              HasSubstr("this process sees no CUDA device (")
#else
              HasSubstr("this build has no CUDA support")
#endif
  );
  EXPECT_EQ(params, std::vector<float>(params.size(), 0.0f));
  // Nothing was fixed: the host path starts and steps as usual.
  const std::vector<float> trained = Train(*client, job.layout(), TensorMemory::Host(), 1);
  EXPECT_NE(trained, std::vector<float>(trained.size(), 0.0f));
}

TEST(ClientDeviceTest, TensorsElsewhereThanTheFirstCallsAreRefusedNamingBoth) {
  Job job(MixedConfig());
  std::unique_ptr<Client> client =
      job.Connect([](const JobLayout&, absl::Span<const DeviceChunkPlan>,
                     int) -> absl::StatusOr<std::unique_ptr<DeviceBackend>> {
        ADD_FAILURE() << "no device call should get this far";
        return absl::InternalError("unreachable");
      });
  std::vector<float> params(job.layout().total_elements);
  const std::vector<absl::Span<float>> tensors =
      SplitIntoTensors(job.layout(), absl::MakeSpan(params));
  ASSERT_TRUE(client->Start(tensors).ok());
  ASSERT_TRUE(client->BeginStep(0, tensors).ok());
  const std::vector<float> grads = testing::TestGradient(job.layout().total_elements, 0, 0);
  std::vector<float> bias(grads.end() - 10, grads.end());
  const absl::Status refused = client->Push("fc2.bias", bias, TensorMemory::Cuda(0, 1));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("Push(): tensor \"fc2.bias\" is on cuda:0 but the "
                                           "client's tensors are on cpu"));
  // The refused push did not count: the same tensor pushes from the host, and the step ends.
  std::vector<float> copy = grads;
  const std::vector<absl::Span<float>> grad_tensors =
      SplitIntoTensors(job.layout(), absl::MakeSpan(copy));
  for (int t = 3; t >= 0; --t) ASSERT_TRUE(client->Push(t, grad_tensors[t]).ok());
  EXPECT_TRUE(client->Wait(tensors).ok());
}

}  // namespace
}  // namespace tamp
