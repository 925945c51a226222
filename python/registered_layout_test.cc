#include "python/registered_layout.h"

#include <string>
#include <vector>

#include "common/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::python {
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

std::vector<RegisteredTensor> MlpTensors() {
  return {{"fc1.weight", {64, 784}}, {"fc1.bias", {64}}, {"fc2.weight", {10, 64}},
          {"fc2.bias", {10}}};
}

TEST(RegisteredLayoutTest, TheConfigsTensorsGiveItsLayout) {
  absl::StatusOr<JobLayout> layout = BuildRegisteredLayout(MlpConfig(), MlpTensors());
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->tensors.size(), 4u);
  EXPECT_EQ(layout->tensors[2].name, "fc2.weight");
  EXPECT_EQ(layout->total_elements, 64u * 784 + 64 + 10 * 64 + 10);
}

TEST(RegisteredLayoutTest, AnotherShapeIsRefusedByName) {
  std::vector<RegisteredTensor> tensors = MlpTensors();
  tensors[2].shape = {10, 32};
  const absl::Status status = BuildRegisteredLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc2.weight\" [10, 32]"));
  EXPECT_THAT(status.message(), HasSubstr("[10, 64]"));
}

TEST(RegisteredLayoutTest, AnotherOrderIsRefusedByName) {
  std::vector<RegisteredTensor> tensors = MlpTensors();
  std::swap(tensors[0], tensors[1]);
  const absl::Status status = BuildRegisteredLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc1.bias\" [64]"));
}

TEST(RegisteredLayoutTest, MissingAndExtraTensorsAreRefusedByName) {
  std::vector<RegisteredTensor> tensors = MlpTensors();
  tensors.pop_back();
  absl::Status status = BuildRegisteredLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc2.bias\""));
  tensors = MlpTensors();
  tensors.push_back({"fc3.weight", {10, 10}});
  status = BuildRegisteredLayout(MlpConfig(), tensors).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"fc3.weight\""));
}

}  // namespace
}  // namespace tamp::python
