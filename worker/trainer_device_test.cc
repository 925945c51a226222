// The trainer's side of a device model (worker/gpu_model.h) on the CPU: a model whose spans
// say they are on cuda:0 (Model::memory(); they are host memory) and a host-memory stand-in
// for the client's CUDA backend (worker/internal/host_stand_in.h). The trainer must hand the
// client the model's spans with the model's memory on every call, so that each gradient is
// encoded "on the device", on the model's stream, and each answer applied there, powersgd's
// rounds too (multi-round: round 0 as the encode, round 1 and the finish through the
// backend), with the host path only for the chunks the plan puts there (top-k's sparsity
// warm-up); and the replica, losses and accuracy must be a host worker's, bit for bit.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/config.h"
#include "job/job_layout.h"
#include "server/service.h"
#include "server/shard.h"
#include "worker/cpu_models.h"
#include "worker/device_backend.h"
#include "worker/idx_test_util.h"
#include "worker/internal/host_stand_in.h"
#include "worker/model.h"
#include "worker/trainer.h"

namespace tamp {
namespace {

using ::tamp::testing::Calls;
using ::tamp::testing::DeviceStandInModel;
using ::tamp::testing::HostStandIn;

constexpr int kTrainImages = 64;  // 4 steps of 16.
constexpr uint64_t kSteps = 4;
constexpr uintptr_t kStream = 0x5eed;  // The stand-in model's "staging stream".

void WriteDataSet(const std::string& dir) {
  for (const auto& [prefix, count] : {std::pair<std::string, int>{"train", kTrainImages},
                                      std::pair<std::string, int>{"t10k", 32}}) {
    std::vector<uint8_t> images(static_cast<size_t>(count) * 28 * 28);
    std::vector<uint8_t> labels(count);
    for (int i = 0; i < count; ++i) {
      labels[i] = static_cast<uint8_t>(i * 3 % 10);
      for (int p = 0; p < 28 * 28; ++p) {
        images[static_cast<size_t>(i) * 784 + p] =
            static_cast<uint8_t>((labels[i] * 29 + p * 5) % 256);
      }
    }
    testing::WriteGzFile(dir + prefix + "-images-idx3-ubyte.gz",
                         testing::IdxBytes({static_cast<uint32_t>(count), 28, 28}, images));
    testing::WriteGzFile(dir + prefix + "-labels-idx1-ubyte.gz",
                         testing::IdxBytes({static_cast<uint32_t>(count)}, labels));
  }
}

// One worker, one shard: fc1.weight pushes topk 1% with RESIDUAL and pulls fp16 (both on the
// device), fc2.weight pushes powersgd rank 1 with RESIDUAL (device, two rounds), fc3.weight
// topk with a ratio_warmup (host: the warm-up has no GPU version), the biases go
// uncompressed.
config::RunConfig Config(const std::string& dir) {
  const std::string path = dir + "job.pbtxt";
  testing::WriteRawFile(path, absl::StrCat(R"pb(
    version: 1
    cluster { num_servers: 1 num_workers: 1 rpc_timeout_ms: 10000 }
    model { kind: MLP hidden: [ 16, 12 ] init_seed: 3 }
    data { dir: ")pb", dir, R"pb(" batch_size: 16 shuffle_seed: 5 }
    training { epochs: 1 }
    optimizer { learning_rate: 0.05 momentum: 0.9 }
    compression {
      seed: 7
      min_compress_bytes: 256
      default_compression {
        push { name: "topk" ratio: 0.01 }
        push_feedback { kind: RESIDUAL }
        pull { name: "fp16" }
      }
      tensor_overrides {
        pattern: "fc2.weight"
        compression {
          push { name: "powersgd" rank: 1 }
          push_feedback { kind: RESIDUAL }
          pull { name: "fp16" }
        }
      }
      tensor_overrides {
        pattern: "fc3.weight"
        compression {
          push { name: "topk" ratio: 0.1 ratio_warmup: [ 0.5 ] }
          push_feedback { kind: RESIDUAL }
          pull { name: "fp16" }
        }
      }
    }
  )pb"));
  absl::StatusOr<config::RunConfig> config = LoadConfigFile(path);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *std::move(config) : config::RunConfig();
}

struct RunResult {
  std::vector<float> params;
  std::vector<float> losses;
  double accuracy = -1;
  // By STEP event: the training thread's CPU time and the step's wall time.
  std::vector<std::pair<double, double>> thread_cpu_and_step_ms;
};

// Trains the whole run against a fresh in-process shard.
RunResult Train(const config::RunConfig& config, TrainerParts parts) {
  RunResult result;
  absl::StatusOr<JobLayout> layout = BuildJobLayout(config);
  EXPECT_TRUE(layout.ok()) << layout.status();
  if (!layout.ok()) return result;
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config, *layout, 0);
  EXPECT_TRUE(shard.ok()) << shard.status();
  if (!shard.ok()) return result;
  ParameterServerService service(shard->get());
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  EXPECT_NE(server, nullptr);
  if (server == nullptr) return result;
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(
      config, 0, {absl::StrCat("127.0.0.1:", port)},
      [&](const events::WorkerEvent& event) {
        if (event.kind() == events::WorkerEvent::STEP) {
          result.losses.push_back(event.loss());
          result.thread_cpu_and_step_ms.emplace_back(event.thread_cpu_ms(), event.step_ms());
        }
        if (event.kind() == events::WorkerEvent::DONE) result.accuracy = event.test_accuracy();
      },
      std::move(parts));
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  if (trainer.ok()) {
    const absl::Status run = (*trainer)->Run();
    EXPECT_TRUE(run.ok()) << run;
    absl::StatusOr<std::vector<float>> params = (*trainer)->Params();
    EXPECT_TRUE(params.ok()) << params.status();
    if (params.ok()) result.params = *std::move(params);
  }
  (*shard)->Close(absl::UnavailableError("test over"));
  server->Shutdown();
  return result;
}

// The config's CPU model, claiming to live on cuda:0 (TrainerParts::model).
absl::StatusOr<std::unique_ptr<Model>> DeviceStandInModels(const config::RunConfig& config,
                                                            std::vector<TensorSpec> tensors,
                                                            int max_batch) {
  absl::StatusOr<std::unique_ptr<Model>> cpu =
      CreateCpuModel(config.model(), std::move(tensors), max_batch);
  if (!cpu.ok()) return cpu.status();
  return std::unique_ptr<Model>(std::make_unique<DeviceStandInModel>(*std::move(cpu), kStream));
}

TEST(TrainerDeviceTest, DeviceModelTrainsThroughTheDevicePathAsAHostWorker) {
  const std::string dir = testing::TestDir();
  WriteDataSet(dir);
  const config::RunConfig config = Config(dir);
  absl::StatusOr<JobLayout> layout = BuildJobLayout(config);
  ASSERT_TRUE(layout.ok()) << layout.status();

  const RunResult host = Train(config, TrainerParts());

  Calls calls;
  std::vector<DeviceChunkPlan> plan;
  TrainerParts parts;
  parts.model = DeviceStandInModels;
  parts.device_backends = [&](const JobLayout& layout, absl::Span<const DeviceChunkPlan> chunks,
                              int device) -> absl::StatusOr<std::unique_ptr<DeviceBackend>> {
    EXPECT_EQ(device, 0);
    plan.assign(chunks.begin(), chunks.end());
    return std::unique_ptr<DeviceBackend>(std::make_unique<HostStandIn>(layout, chunks, &calls));
  };
  const RunResult device = Train(config, std::move(parts));

  // The plan: fc3.weight's chunks push on the host (the warm-up), every other
  // chunk (powersgd's too) and every pull on the device.
  ASSERT_EQ(plan.size(), layout->chunks.size());
  int device_pushes = 0, host_pushes = 0, powersgd_pushes = 0;
  for (const ChunkPlan& chunk : layout->chunks) {
    const DeviceChunkPlan& p = plan[chunk.chunk.id];
    const std::string& tensor = layout->tensor_of(chunk).name;
    const bool host = tensor == "fc3.weight";
    EXPECT_EQ(p.push_on_device(), !host) << tensor << ": " << p.push_on_host_because;
    if (host) {
      EXPECT_EQ(p.push_on_host_because, "the push codec's ratio_warmup has no GPU version");
    }
    EXPECT_TRUE(p.pull_on_device()) << tensor << ": " << p.pull_on_host_because;
    (p.push_on_device() ? device_pushes : host_pushes)++;
    if (tensor == "fc2.weight") ++powersgd_pushes;
  }
  ASSERT_GT(host_pushes, 0);
  ASSERT_GT(powersgd_pushes, 0);

  // Every gradient of a device chunk was encoded through the backend (powersgd's round 0),
  // powersgd's round 1 and its finish went there too, every answer was applied there, all
  // on the model's stream; only fc3.weight's gradient came to the host.
  EXPECT_EQ(calls.encodes, static_cast<int>(kSteps) * device_pushes);
  EXPECT_EQ(calls.rounds, static_cast<int>(kSteps) * powersgd_pushes);
  EXPECT_EQ(calls.finishes, static_cast<int>(kSteps) * powersgd_pushes);
  EXPECT_EQ(calls.replays, 0);
  EXPECT_EQ(calls.applies, static_cast<int>(kSteps * layout->chunks.size()));
  EXPECT_EQ(calls.to_host, static_cast<int>(kSteps));  // fc3.weight's gradient, once a step.
  EXPECT_EQ(calls.streams, std::set<uintptr_t>{kStream});

  // Every step reports the training thread's CPU time: some, and no more than the step took
  // (plus the clocks' granularity).
  ASSERT_EQ(host.thread_cpu_and_step_ms.size(), kSteps);
  for (const auto& [thread_cpu_ms, step_ms] : host.thread_cpu_and_step_ms) {
    EXPECT_GT(thread_cpu_ms, 0);
    EXPECT_LE(thread_cpu_ms, step_ms + 0.1);
  }

  // The same run as the host worker's, bit for bit.
  ASSERT_EQ(device.losses.size(), kSteps);
  EXPECT_EQ(device.losses, host.losses);
  EXPECT_EQ(device.accuracy, host.accuracy);
  ASSERT_EQ(device.params.size(), host.params.size());
  EXPECT_EQ(device.params, host.params);
}

// In AGGREGATE mode the built-in trainer steps its own optimizer on the host: a model on the
// GPU is refused before anything is loaded or connected (the address leads nowhere), naming
// the way on; a config without an optimizer section too.
TEST(TrainerDeviceTest, AggregateModeRefusesAGpuModelAndAMissingOptimizer) {
  const std::string dir = testing::TestDir();
  config::RunConfig config = Config(dir);
  config.mutable_server()->set_mode(config::Server::AGGREGATE);
  config.set_device(config::CUDA);
  const auto ignore = [](const events::WorkerEvent&) {};
  absl::Status refused = Trainer::Create(config, 0, {"127.0.0.1:1"}, ignore).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(), ::testing::HasSubstr(
                                     "device: CUDA with server.mode AGGREGATE: the built-in "
                                     "trainer steps its own optimizer on the CPU only"));
  config.set_device(config::CPU);
  config.clear_optimizer();
  refused = Trainer::Create(config, 0, {"127.0.0.1:1"}, ignore).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("optimizer: missing: with server.mode "
                                                      "AGGREGATE"));
}

}  // namespace
}  // namespace tamp
