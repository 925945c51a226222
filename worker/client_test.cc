// The worker client against two in-process shards (server/test_job.h's job: MLP 784-4-10,
// plain SGD at lr 0.5, codec "none" both ways): what a step applies, and that every refused
// call names the tensor and leaves the step able to go on.
#include "worker/client.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service.h"
#include "server/shard.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TestConfig([](config::RunConfig& config) {
      config.mutable_cluster()->set_num_workers(1);
    });
    layout_ = testing::TestLayout(config_);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config_, layout_, rank);
      ASSERT_TRUE(shard.ok()) << shard.status();
      shards_.push_back(*std::move(shard));
      services_.push_back(std::make_unique<ParameterServerService>(shards_.back().get()));
      int port = 0;
      grpc::ServerBuilder builder;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
      builder.RegisterService(services_.back().get());
      servers_.push_back(builder.BuildAndStart());
      ASSERT_NE(servers_.back(), nullptr);
      addresses_.push_back(absl::StrCat("127.0.0.1:", port));
    }
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(config_, layout_, /*rank=*/0, addresses_, RunLength{10, 10});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    params_.resize(layout_.total_elements);
    tensors_ = SplitIntoTensors(layout_, absl::MakeSpan(params_));
    absl::StatusOr<uint64_t> step = client_->Start(tensors_);
    ASSERT_TRUE(step.ok()) << step.status();
    ASSERT_EQ(*step, 0u);
  }

  void TearDown() override {
    client_.reset();
    for (auto& server : servers_) server->Shutdown();
  }

  // Tensor t's slice of a flat buffer.
  absl::Span<const float> TensorOf(const std::vector<float>& flat, int t) const {
    return absl::MakeConstSpan(flat).subspan(layout_.tensor_offsets[t],
                                             layout_.tensors[t].elements());
  }

  // Pushes every tensor of `grads`, last first, as backward would.
  void PushAll(const std::vector<float>& grads) {
    for (int t = static_cast<int>(layout_.tensors.size()) - 1; t >= 0; --t) {
      const absl::Status pushed = client_->Push(layout_.tensors[t].name, TensorOf(grads, t));
      ASSERT_TRUE(pushed.ok()) << pushed;
    }
  }

  config::RunConfig config_;
  JobLayout layout_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::unique_ptr<ParameterServerService>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> addresses_;
  std::unique_ptr<Client> client_;
  std::vector<float> params_;
  std::vector<absl::Span<float>> tensors_;  // params_, tensor by tensor.
};

TEST_F(ClientTest, StartCopiesTheShardsSeededWeights) {
  for (size_t t = 0; t < layout_.tensors.size(); ++t) {
    std::vector<float> expected(layout_.tensors[t].elements());
    InitTensorSlice(layout_.tensors[t], config_.model().init_seed(), t, 0,
                    absl::MakeSpan(expected));
    const absl::Span<const float> got = TensorOf(params_, t);
    ASSERT_EQ(std::vector<float>(got.begin(), got.end()), expected) << layout_.tensors[t].name;
  }
}

// One worker, codec "none", plain SGD at lr 0.5: the step moves every weight by -0.5 g.
TEST_F(ClientTest, AStepAppliesTheShardsSgdUpdate) {
  const std::vector<float> before = params_;
  const std::vector<float> grads = testing::TestGradient(layout_.total_elements, 0, 0);
  ASSERT_TRUE(client_->BeginStep(0, tensors_).ok());
  PushAll(grads);
  const absl::Status waited = client_->Wait(tensors_);
  ASSERT_TRUE(waited.ok()) << waited;
  for (size_t i = 0; i < params_.size(); ++i) {
    // The gradients are multiples of 1/64, so w - 0.5 g is exact... up to w's own rounding.
    ASSERT_FLOAT_EQ(params_[i], before[i] - 0.5f * grads[i]) << "element " << i;
  }
  EXPECT_EQ(client_->totals().raw_bytes_pushed, layout_.total_elements * sizeof(float));
  EXPECT_EQ(client_->report().raw_bytes_pushed, layout_.total_elements * sizeof(float));
  uint64_t pushed = 0;
  for (uint64_t bytes : client_->report().shard_bytes_pushed) pushed += bytes;
  EXPECT_EQ(pushed, client_->totals().bytes_pushed);
  EXPECT_GT(pushed, client_->totals().raw_bytes_pushed);  // Raw payloads carry a header.
}

TEST_F(ClientTest, RefusedCallsNameTheTensorAndLeaveTheStepIntact) {
  const std::vector<float> grads = testing::TestGradient(layout_.total_elements, 0, 0);
  const std::string last = layout_.tensors.back().name;
  const int last_index = static_cast<int>(layout_.tensors.size()) - 1;

  absl::Status status = client_->Push(last, TensorOf(grads, last_index));
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("call BeginStep() first"));
  status = client_->Wait(tensors_);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;

  ASSERT_TRUE(client_->BeginStep(0, tensors_).ok());
  status = client_->Push("fc9.weight", TensorOf(grads, 0));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("\"fc9.weight\" is not registered"));
  status = client_->Push(last, TensorOf(grads, 0));  // fc1.weight's size.
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("\"", last, "\" has 10 elements")));
  status = client_->Push(99, TensorOf(grads, 0));
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;

  ASSERT_TRUE(client_->Push(last, TensorOf(grads, last_index)).ok());
  status = client_->Push(last, TensorOf(grads, last_index));
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("\"", last, "\" was already pushed")));
  status = client_->Wait(tensors_);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("\"fc1.weight\" was not pushed in step 0"));
  status = client_->BeginStep(1, tensors_);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;

  // None of that changed the step: the rest goes, and the update is exactly one step's.
  const std::vector<float> before = params_;
  for (int t = last_index - 1; t >= 0; --t) {
    ASSERT_TRUE(client_->Push(t, TensorOf(grads, t)).ok());
  }
  status = client_->Wait(tensors_);
  ASSERT_TRUE(status.ok()) << status;
  for (size_t i = 0; i < params_.size(); ++i) {
    ASSERT_FLOAT_EQ(params_[i], before[i] - 0.5f * grads[i]) << "element " << i;
  }
  EXPECT_EQ(client_->totals().raw_bytes_pushed, layout_.total_elements * sizeof(float));
}

// A framework's tensors lie apart, not in one flat buffer.
TEST_F(ClientTest, AppliesToTensorsThatLieApart) {
  std::vector<std::vector<float>> apart;
  std::vector<absl::Span<float>> spans;
  for (size_t t = 0; t < layout_.tensors.size(); ++t) {
    const absl::Span<const float> values = TensorOf(params_, t);
    apart.emplace_back(values.begin(), values.end());
  }
  for (std::vector<float>& tensor : apart) spans.push_back(absl::MakeSpan(tensor));
  const std::vector<float> grads = testing::TestGradient(layout_.total_elements, 0, 0);

  std::vector<absl::Span<float>> short_spans = spans;
  short_spans[1] = short_spans[1].subspan(1);
  absl::Status status = client_->BeginStep(0, short_spans);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("\"", layout_.tensors[1].name, "\" has 4 elements, got 3")));

  ASSERT_TRUE(client_->BeginStep(0, spans).ok());
  PushAll(grads);
  status = client_->Wait(spans);
  ASSERT_TRUE(status.ok()) << status;
  for (size_t t = 0; t < layout_.tensors.size(); ++t) {
    const absl::Span<const float> before = TensorOf(params_, t);
    const absl::Span<const float> g = TensorOf(grads, t);
    for (size_t i = 0; i < before.size(); ++i) {
      ASSERT_FLOAT_EQ(apart[t][i], before[i] - 0.5f * g[i]) << layout_.tensors[t].name << "[" << i << "]";
    }
  }
}

TEST_F(ClientTest, AServerThatIsGoneFailsTheStepNamingTheShard) {
  servers_[1]->Shutdown();
  const std::vector<float> grads = testing::TestGradient(layout_.total_elements, 0, 0);
  ASSERT_TRUE(client_->BeginStep(0, tensors_).ok());
  PushAll(grads);
  const absl::Status status = client_->Wait(tensors_);
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("shard 1 (", addresses_[1], ")")));
}

}  // namespace
}  // namespace tamp
