#include "job/job_layout.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/config.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

config::RunConfig MlpConfig() {
  absl::StatusOr<config::RunConfig> config = ParseConfig(R"(
    version: 1
    cluster { num_servers: 2 num_workers: 1 }
    model { kind: MLP hidden: [64] init_seed: 3 }
    data { batch_size: 32 }
    training { epochs: 1 }
    optimizer { learning_rate: 0.1 }
    compression { partition_bytes: 16384 seed: 7 }
  )", "test");
  EXPECT_TRUE(config.ok()) << config.status();
  ApplyDefaults(&*config);
  EXPECT_TRUE(ValidateConfig(*config).ok());
  return *config;
}

TensorSpec Tensor(std::string name, std::vector<int64_t> shape) {
  TensorSpec tensor;
  tensor.name = std::move(name);
  tensor.shape = std::move(shape);
  return tensor;
}

std::vector<TensorSpec> MlpTensors() {
  return {Tensor("fc1.weight", {64, 784}), Tensor("fc1.bias", {64}), Tensor("fc2.weight", {10, 64}),
          Tensor("fc2.bias", {10})};
}

// A built-in model's tensors, registered by a worker, must be exactly the config's.
TEST(JobLayoutTest, TheConfigsTensorsGiveItsLayout) {
  absl::StatusOr<JobLayout> layout = BuildJobLayout(MlpConfig(), MlpTensors());
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->tensors.size(), 4u);
  EXPECT_EQ(layout->tensors[2].name, "fc2.weight");
  EXPECT_EQ(layout->total_elements, 64u * 784 + 64 + 10 * 64 + 10);
}

TEST(JobLayoutTest, AnotherShapeIsRefusedByName) {
  std::vector<TensorSpec> tensors = MlpTensors();
  tensors[2].shape = {10, 32};
  const absl::Status status = BuildJobLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc2.weight\" [10, 32]"));
  EXPECT_THAT(status.message(), HasSubstr("[10, 64]"));
}

TEST(JobLayoutTest, AnotherOrderIsRefusedByName) {
  std::vector<TensorSpec> tensors = MlpTensors();
  std::swap(tensors[0], tensors[1]);
  const absl::Status status = BuildJobLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc1.bias\" [64]"));
}

TEST(JobLayoutTest, MissingAndExtraTensorsAreRefusedByName) {
  std::vector<TensorSpec> tensors = MlpTensors();
  tensors.pop_back();
  absl::Status status = BuildJobLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc2.bias\""));
  tensors = MlpTensors();
  tensors.push_back(Tensor("fc3.weight", {10, 10}));
  status = BuildJobLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc3.weight\""));
}

}  // namespace
}  // namespace tamp
