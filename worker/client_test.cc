// The worker client against two in-process shards (server/test_job.h's job: MLP 784-4-10,
// plain SGD at lr 0.5, codec "none" both ways): what a step applies, and that every refused
// call names the tensor and leaves the step able to go on.
#include "worker/client.h"

#include <limits>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/barrier_watchdog.h"
#include "server/service.h"
#include "server/shard.h"
#include "server/shard_host.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::testing::HasSubstr;

class ClientTest : public ::testing::Test {
 protected:
  // What a fixture of its own changes in the job's config.
  virtual void Configure(config::RunConfig& config) {}

  void SetUp() override {
    config_ = testing::TestConfig([this](config::RunConfig& config) {
      config.mutable_cluster()->set_num_workers(1);
      Configure(config);
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
        Client::Connect(config_, layout_, /*rank=*/0, addresses_, RunLength{10, 20});
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

  // client_ takes steps 0 .. steps - 1 on the test gradients.
  void TrainSteps(uint64_t steps) {
    for (uint64_t step = 0; step < steps; ++step) {
      ASSERT_TRUE(client_->BeginStep(step, tensors_).ok());
      PushAll(testing::TestGradient(layout_.total_elements, step, 0));
      const absl::Status waited = client_->Wait(tensors_);
      ASSERT_TRUE(waited.ok()) << waited;
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

// A step's answers are freed once applied: between steps the client holds no payload (with
// a 25.6M-parameter model, holding the last step's pulls cost 100 MB per worker).
TEST_F(ClientTest, HoldsNoPayloadBetweenSteps) {
  for (uint64_t step = 0; step < 2; ++step) {
    ASSERT_TRUE(client_->BeginStep(step, tensors_).ok());
    PushAll(testing::TestGradient(layout_.total_elements, 0, step));
    const absl::Status waited = client_->Wait(tensors_);
    ASSERT_TRUE(waited.ok()) << waited;
    uint64_t pulled = 0;
    for (uint64_t bytes : client_->report().shard_bytes_pulled) pulled += bytes;
    ASSERT_GT(pulled, layout_.total_elements * sizeof(float));  // Raw updates, with headers.
    EXPECT_EQ(client_->HeldPayloadBytes(), 0u) << "after step " << step;
  }
}

// BeginStep() takes the next step only: a skipped or repeated step would be refused by the
// servers, late, at the pushes; one past the run by nobody.
TEST_F(ClientTest, BeginStepTakesTheNextStepOnly) {
  absl::Status status = client_->BeginStep(1, tensors_);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("BeginStep(1): the next step is 0"));
  status = client_->BeginStep(1000000, tensors_);
  EXPECT_TRUE(absl::IsOutOfRange(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("BeginStep(1000000): the run has"));
  ASSERT_TRUE(client_->BeginStep(0, tensors_).ok());
  PushAll(testing::TestGradient(layout_.total_elements, 0, 0));
  ASSERT_TRUE(client_->Wait(tensors_).ok());
  status = client_->BeginStep(0, tensors_);
  EXPECT_THAT(status.message(), HasSubstr("BeginStep(0): the next step is 1"));
  const absl::Status early = client_->Push(0, TensorOf(params_, 0));
  EXPECT_THAT(early.message(), HasSubstr("pushed outside a step; call BeginStep(1) first"));
  EXPECT_TRUE(client_->BeginStep(1, tensors_).ok());
}

class ResyncingClientTest : public ClientTest {
  void Configure(config::RunConfig& config) override {
    config.mutable_training()->set_resync_steps(2);
  }
};

// A resync's exact weights are traffic of its step: counted in the step's pulled bytes and
// the totals (a user's count left out 9 resyncs of a whole model).
TEST_F(ResyncingClientTest, AResyncsWeightsCountAsTheStepsPulledBytes) {
  std::vector<std::vector<uint64_t>> pulled;  // By step, by shard.
  uint64_t all = 0;
  for (uint64_t step = 0; step < 3; ++step) {
    ASSERT_TRUE(client_->BeginStep(step, tensors_).ok());
    PushAll(testing::TestGradient(layout_.total_elements, 0, step));
    ASSERT_TRUE(client_->Wait(tensors_).ok());
    pulled.push_back(client_->report().shard_bytes_pulled);
    for (uint64_t bytes : pulled.back()) all += bytes;
  }
  EXPECT_EQ(pulled[0], pulled[1]);  // Raw updates, codec "none".
  for (size_t shard = 0; shard < pulled[2].size(); ++shard) {  // And step 2's resync.
    EXPECT_EQ(pulled[2][shard], pulled[0][shard] + layout_.shard_bytes[shard]) << shard;
  }
  EXPECT_EQ(client_->totals().bytes_pulled, all);
}

// Before Start() there is no step to begin: refused before anything is pushed (a user's
// BeginStep(0) went through, and the pushes then failed and broke the client).
TEST_F(ClientTest, BeginStepBeforeStartIsRefused) {
  absl::StatusOr<std::unique_ptr<Client>> fresh =
      Client::Connect(config_, layout_, /*rank=*/0, addresses_, RunLength{10, 20});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  const absl::Status status = (*fresh)->BeginStep(0, tensors_);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("BeginStep(0): the client has not started: call Start() (or Resume())"));
}

// Start() mid-run copied the current weights and handed back the step: once only.
TEST_F(ClientTest, StartAndResumeAreCalledOnce) {
  const std::vector<float> before = params_;
  for (absl::StatusOr<uint64_t> again : {client_->Start(tensors_), client_->Resume(tensors_)}) {
    EXPECT_TRUE(absl::IsFailedPrecondition(again.status())) << again.status();
    EXPECT_THAT(again.status().message(),
                HasSubstr("the client has started already (Start() or Resume() once; Rejoin() "
                          "after a dropped or failed step)"));
  }
  EXPECT_EQ(params_, before);
  ASSERT_TRUE(client_->BeginStep(0, tensors_).ok());
}

// A push the servers refuse (NaN, validation.nonfinite_policy REJECT) ends the step; what
// needs a step then says which failed and the way on, not "the client has not started".
TEST_F(ClientTest, CallsAfterAFailedStepNameItAndTheWayOn) {
  std::vector<float> grads = testing::TestGradient(layout_.total_elements, 0, 0);
  grads[3] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(client_->BeginStep(0, tensors_).ok());
  PushAll(grads);
  const absl::Status waited = client_->Wait(tensors_);
  ASSERT_TRUE(absl::IsInvalidArgument(waited)) << waited;
  EXPECT_THAT(waited.message(), HasSubstr("NaN"));
  // Which of the user's tensors held it (fc1.weight goes in four chunks of 784 values).
  EXPECT_THAT(waited.message(), HasSubstr("(tensor \"fc1.weight\", elements 0-783) step 0"));
  const absl::Status begun = client_->BeginStep(1, tensors_);
  EXPECT_TRUE(absl::IsFailedPrecondition(begun)) << begun;
  EXPECT_THAT(begun.message(), HasSubstr("BeginStep(1): step 0 failed: "));
  EXPECT_THAT(begun.message(),
              HasSubstr("; Rejoin() goes on from the other workers' replica (it forgets this "
                        "worker's residuals), or close the client"));
  const absl::Status pushed = client_->Push(0, TensorOf(grads, 0));
  EXPECT_THAT(pushed.message(), HasSubstr("pushed outside a step; step 0 failed: "));
}

// Worker 0's weights (a checkpoint loaded after Start()) become the shards' before the first
// step, also inside an empty step 0 and for the servers' seeded model; the step after
// applies its update to them. Once a push went, the weights are the run's.
TEST_F(ClientTest, BroadcastSetsTheShardsWeightsBeforeTheFirstPushOnly) {
  for (size_t i = 0; i < params_.size(); ++i) params_[i] = 0.25f * static_cast<float>(i % 7);
  const std::vector<float> loaded = params_;
  ASSERT_TRUE(client_->Broadcast(tensors_).ok());
  EXPECT_EQ(params_, loaded);
  ASSERT_TRUE(client_->BeginStep(0, tensors_).ok());
  ASSERT_TRUE(client_->Broadcast(tensors_).ok()) << "step 0 begun, nothing pushed";
  const std::vector<float> grads = testing::TestGradient(layout_.total_elements, 0, 0);
  PushAll(grads);
  const absl::Status refused = client_->Broadcast(tensors_);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("step 0 has pushed gradients"));
  ASSERT_TRUE(client_->Wait(tensors_).ok());
  for (size_t i = 0; i < params_.size(); ++i) {
    ASSERT_FLOAT_EQ(params_[i], loaded[i] - 0.5f * grads[i]) << "element " << i;
  }
  EXPECT_THAT(client_->Broadcast(tensors_).message(), HasSubstr("the next step is 1"));
}

TEST_F(ClientTest, RefusedCallsNameTheTensorAndLeaveTheStepIntact) {
  const std::vector<float> grads = testing::TestGradient(layout_.total_elements, 0, 0);
  const std::string last = layout_.tensors.back().name;
  const int last_index = static_cast<int>(layout_.tensors.size()) - 1;

  absl::Status status = client_->Push(last, TensorOf(grads, last_index));
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("call BeginStep(0) first"));
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
      ASSERT_FLOAT_EQ(apart[t][i], before[i] - 0.5f * g[i])
          << layout_.tensors[t].name << "[" << i << "]";
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

namespace tamp {
namespace {

// Two workers on a user's layout (model.kind REGISTERED) against two in-process servers that
// learn it at the first handshake.
// The exact weights the shards hold, flat in layout order.
std::vector<float> ShardWeights(const std::vector<std::unique_ptr<Shard>>& shards,
                                const JobLayout& layout) {
  std::vector<float> flat(layout.total_elements);
  for (const ChunkPlan& plan : layout.chunks) {
    absl::StatusOr<Shard::ChunkSnapshot> chunk =
        shards[plan.chunk.shard]->Snapshot(plan.chunk.id);
    CHECK(chunk.ok()) << chunk.status();
    std::copy(chunk->weights.begin(), chunk->weights.end(),
              flat.begin() + layout.flat_offset(plan));
  }
  return flat;
}

// A process replacing this job's only worker before its first step completed: it rejoins at
// step 1, which the shards skip to (no one else will push step 0), with their weights.
TEST_F(ClientTest, ResumeRejoinsEvenBeforeTheFirstStep) {
  absl::StatusOr<std::unique_ptr<Client>> replacement =
      Client::Connect(config_, layout_, /*rank=*/0, addresses_, RunLength{10, 20});
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  std::vector<float> params(layout_.total_elements, 7.0f);
  const std::vector<absl::Span<float>> tensors = SplitIntoTensors(layout_, absl::MakeSpan(params));
  absl::StatusOr<uint64_t> step = (*replacement)->Resume(tensors);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 1u);
  EXPECT_EQ(params, ShardWeights(shards_, layout_));
}

// A second process started with the same rank (a launch mistake) holds the rank from its
// handshake on: the first one's pushes are refused, naming both processes and the likely
// cause, and change no weight; the second, told it displaced another process that pushed
// nothing yet, starts at step 0 (no step skipped) and trains on.
TEST_F(ClientTest, ASecondProcessWithTheSameRankTakesItOverAndTheFirstIsTold) {
  absl::StatusOr<std::unique_ptr<Client>> twin =
      Client::Connect(config_, layout_, /*rank=*/0, addresses_, RunLength{10, 20});
  ASSERT_TRUE(twin.ok()) << twin.status();
  std::vector<float> params(layout_.total_elements);
  const std::vector<absl::Span<float>> tensors = SplitIntoTensors(layout_, absl::MakeSpan(params));
  absl::StatusOr<uint64_t> started = (*twin)->Start(tensors);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(*started, 0u) << "the first pushed nothing: step 0 is the second's";
  const std::vector<float> weights = ShardWeights(shards_, layout_);
  const std::vector<float> grads = testing::TestGradient(layout_.total_elements, 0, 0);

  ASSERT_TRUE(client_->BeginStep(0, tensors_).ok());
  PushAll(grads);
  const absl::Status refused = client_->Wait(tensors_);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("worker 0: another process with rank 0 (id "));
  EXPECT_THAT(refused.message(), HasSubstr("two workers were started with rank 0?"));
  EXPECT_EQ(ShardWeights(shards_, layout_), weights) << "a refused push changes nothing";

  ASSERT_TRUE((*twin)->BeginStep(0, tensors).ok());
  for (size_t t = 0; t < layout_.tensors.size(); ++t) {
    ASSERT_TRUE((*twin)->Push(layout_.tensors[t].name, TensorOf(grads, t)).ok());
  }
  const absl::Status stepped = (*twin)->Wait(tensors);
  ASSERT_TRUE(stepped.ok()) << stepped;
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_FLOAT_EQ(params[i], weights[i] - 0.5f * grads[i]) << "element " << i;
  }

  // The first one never takes the rank back: its rejoin (what a push answered "dropped",
  // having raced the second's handshake, leads to) is refused, and the second trains on.
  const absl::StatusOr<uint64_t> rejoined = client_->Rejoin(tensors_, "dropped");
  EXPECT_TRUE(absl::IsFailedPrecondition(rejoined.status())) << rejoined.status();
  EXPECT_THAT(rejoined.status().message(), HasSubstr("two workers were started with rank 0?"));
  ASSERT_TRUE((*twin)->BeginStep(1, tensors).ok());
  for (size_t t = 0; t < layout_.tensors.size(); ++t) {
    ASSERT_TRUE((*twin)->Push(layout_.tensors[t].name, TensorOf(grads, t)).ok());
  }
  const absl::Status stepped_again = (*twin)->Wait(tensors);
  EXPECT_TRUE(stepped_again.ok()) << stepped_again;
}

// The job's only worker dies after step 18 of 20: its replacement takes step 19 itself (no
// one else would push it; it waited for the run's end, which never came).
TEST_F(ClientTest, AReplacementBeforeTheLastStepTrainsIt) {
  TrainSteps(19);
  absl::StatusOr<std::unique_ptr<Client>> replacement =
      Client::Connect(config_, layout_, /*rank=*/0, addresses_, RunLength{10, 20});
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  std::vector<float> params(layout_.total_elements, 7.0f);
  const std::vector<absl::Span<float>> tensors = SplitIntoTensors(layout_, absl::MakeSpan(params));
  const absl::StatusOr<uint64_t> resumed = (*replacement)->Resume(tensors);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(*resumed, 19u);
  EXPECT_EQ(params, ShardWeights(shards_, layout_));
  ASSERT_TRUE((*replacement)->BeginStep(19, tensors).ok());
  const std::vector<float> grads = testing::TestGradient(layout_.total_elements, 19, 0);
  for (size_t t = 0; t < layout_.tensors.size(); ++t) {
    ASSERT_TRUE((*replacement)->Push(layout_.tensors[t].name, TensorOf(grads, t)).ok());
  }
  const absl::Status last = (*replacement)->Wait(tensors);
  ASSERT_TRUE(last.ok()) << last;
  EXPECT_EQ(ShardWeights(shards_, layout_), params);
}

// Once the run is over, Start() refuses and Resume() hands over the final weights.
TEST_F(ClientTest, ResumeAfterTheLastStepTakesTheFinalWeights) {
  TrainSteps(20);
  // A push after the last step says the run is over, not which BeginStep() to call.
  const absl::Status late = client_->Push(0, TensorOf(params_, 0));
  EXPECT_TRUE(absl::IsFailedPrecondition(late)) << late;
  EXPECT_THAT(late.message(), HasSubstr("pushed outside a step; the run is over: its 20 steps "
                                        "are done"));
  absl::StatusOr<std::unique_ptr<Client>> replacement =
      Client::Connect(config_, layout_, /*rank=*/0, addresses_, RunLength{10, 20});
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  std::vector<float> params(layout_.total_elements, 7.0f);
  const std::vector<absl::Span<float>> tensors = SplitIntoTensors(layout_, absl::MakeSpan(params));
  const absl::StatusOr<uint64_t> started = (*replacement)->Start(tensors);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(started.status().message(), HasSubstr("the run is over"));
  absl::StatusOr<uint64_t> resumed = (*replacement)->Resume(tensors);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(*resumed, 20u);
  EXPECT_EQ(params, ShardWeights(shards_, layout_));
}

class RegisteredJobTest : public ::testing::Test {
 protected:
  // The job's two tensors unless `tensors` are given; `fusion_bytes` < 0 and
  // `rpc_timeout_ms` 0: the defaults.
  void StartJob(config::Server::Mode mode, uint32_t worker_timeout_ms = 0,
                std::vector<TensorSpec> tensors = {}, int64_t fusion_bytes = -1,
                uint32_t rpc_timeout_ms = 0) {
    config_ = testing::TestConfig([&](config::RunConfig& config) {
      config.mutable_consistency()->set_worker_timeout_ms(worker_timeout_ms);
      if (rpc_timeout_ms != 0) config.mutable_cluster()->set_rpc_timeout_ms(rpc_timeout_ms);
      config.mutable_model()->Clear();
      config.mutable_model()->set_kind(config::Model::REGISTERED);
      config.mutable_server()->set_mode(mode);
      if (fusion_bytes >= 0) config.mutable_cluster()->set_fusion_bytes(fusion_bytes);
      // AGGREGATE servers run no optimizer: the job goes without one.
      if (mode == config::Server::AGGREGATE) config.clear_optimizer();
    });
    if (tensors.empty()) tensors = TwoTensors(700);
    absl::StatusOr<JobLayout> layout = BuildJobLayout(config_, tensors);
    ASSERT_TRUE(layout.ok()) << layout.status();
    layout_ = *std::move(layout);
    watchdogs_.resize(2);
    for (uint32_t rank = 0; rank < 2; ++rank) {
      // As tamp_server: the shard, made at the first handshake, drops late workers.
      absl::StatusOr<std::unique_ptr<ShardHost>> host =
          ShardHost::Create(config_, rank, [this, rank](Shard& shard) {
            watchdogs_[rank] = BarrierWatchdog::Start(&shard);
            return absl::OkStatus();
          });
      ASSERT_TRUE(host.ok()) << host.status();
      hosts_.push_back(*std::move(host));
      services_.push_back(std::make_unique<ParameterServerService>(hosts_.back().get(), ""));
      int port = 0;
      grpc::ServerBuilder builder;
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
      builder.RegisterService(services_.back().get());
      servers_.push_back(builder.BuildAndStart());
      ASSERT_NE(servers_.back(), nullptr);
      addresses_.push_back(absl::StrCat("127.0.0.1:", port));
    }
    for (uint32_t rank = 0; rank < 2; ++rank) {
      absl::StatusOr<std::unique_ptr<Client>> client =
          Client::Connect(config_, layout_, rank, addresses_, RunLength{10, 20});
      ASSERT_TRUE(client.ok()) << client.status();
      clients_.push_back(*std::move(client));
      // Each worker's own init; worker 0's must win everywhere.
      params_.emplace_back(layout_.total_elements, rank == 0 ? 0.25f : -7.0f);
      tensors_.push_back(SplitIntoTensors(layout_, absl::MakeSpan(params_.back())));
    }
  }

  void TearDown() override { StopJob(); }

  void StopJob() {
    clients_.clear();
    for (auto& server : servers_) server->Shutdown();
    servers_.clear();
    services_.clear();
    watchdogs_.clear();
    hosts_.clear();
    addresses_.clear();
    params_.clear();
    tensors_.clear();
  }

  // encoder.weight [3, columns] and head.bias [5]: the job's two tensors at 700.
  static std::vector<TensorSpec> TwoTensors(int64_t columns) {
    TensorSpec weight;
    weight.name = "encoder.weight";
    weight.shape = {3, columns};
    TensorSpec bias;
    bias.name = "head.bias";
    bias.shape = {5};
    return {weight, bias};
  }

  // The job's two tensors with encoder.weight [3, 701] instead of [3, 700].
  JobLayout OtherLayout() const {
    absl::StatusOr<JobLayout> other = BuildJobLayout(config_, TwoTensors(701));
    CHECK(other.ok()) << other.status();
    return *std::move(other);
  }

  // Runs `body(rank)` for both workers at once (a SYNC step needs both).
  template <typename Body>
  void BothWorkers(Body body) {
    std::thread other([&] { body(1); });
    body(0);
    other.join();
  }

  // Step `step` of worker `rank`: every tensor pushed from `grads` (the whole layout), the
  // last first, then the wait's status.
  absl::Status Step(int rank, uint64_t step, const std::vector<float>& grads) {
    EXPECT_TRUE(clients_[rank]->BeginStep(step, tensors_[rank]).ok());
    for (int t = static_cast<int>(layout_.tensors.size()) - 1; t >= 0; --t) {
      EXPECT_TRUE(clients_[rank]
                      ->Push(t, absl::MakeConstSpan(grads).subspan(layout_.tensor_offsets[t],
                                                                   layout_.tensors[t].elements()))
                      .ok());
    }
    return clients_[rank]->Wait(tensors_[rank]);
  }

  config::RunConfig config_;
  JobLayout layout_;
  std::vector<std::unique_ptr<ShardHost>> hosts_;
  std::vector<std::unique_ptr<BarrierWatchdog>> watchdogs_;  // Go before their shards.
  std::vector<std::unique_ptr<ParameterServerService>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<std::vector<float>> params_;
  std::vector<std::vector<absl::Span<float>>> tensors_;
};

TEST_F(RegisteredJobTest, WorkerZerosWeightsStartEveryReplicaAndStepsKeepThemEqual) {
  StartJob(config::Server::OPTIMIZER);
  BothWorkers([&](int rank) {
    absl::StatusOr<uint64_t> step = clients_[rank]->Start(tensors_[rank]);
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_EQ(*step, 0u);
  });
  EXPECT_EQ(params_[1], params_[0]);
  for (float v : params_[1]) ASSERT_EQ(v, 0.25f);

  std::vector<std::vector<float>> grads;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    grads.push_back(testing::TestGradient(layout_.total_elements, 0, rank));
  }
  BothWorkers([&](int rank) {
    ASSERT_TRUE(clients_[rank]->BeginStep(0, tensors_[rank]).ok());
    for (int t = 1; t >= 0; --t) {
      const absl::Span<const float> g = absl::MakeConstSpan(grads[rank]).subspan(
          layout_.tensor_offsets[t], layout_.tensors[t].elements());
      ASSERT_TRUE(clients_[rank]->Push(t, g).ok());
    }
    const absl::Status waited = clients_[rank]->Wait(tensors_[rank]);
    ASSERT_TRUE(waited.ok()) << waited;
  });
  EXPECT_EQ(params_[1], params_[0]) << "the replicas differ after a step";
  for (size_t i = 0; i < params_[0].size(); ++i) {
    const float mean = (grads[0][i] + grads[1][i]) / 2;
    ASSERT_FLOAT_EQ(params_[0][i], 0.25f - 0.5f * mean) << "element " << i;
  }
}

// Tensor fusion (cluster.fusion_bytes) changes how pushes travel, not what they compute: a
// model of many small tensors, some above the threshold, trains to the same bytes fused
// (batches cut by the threshold and by the step's end) and unfused.
TEST_F(RegisteredJobTest, FusedPushesTrainAsUnfusedOnes) {
  std::vector<TensorSpec> tensors;
  for (int t = 0; t < 40; ++t) {
    TensorSpec spec;
    spec.name = absl::StrCat("layer", t, t % 2 == 0 ? ".weight" : ".bias");
    spec.shape = t % 2 == 0 ? std::vector<int64_t>{1 + t % 7, 150} : std::vector<int64_t>{1 + t};
    tensors.push_back(spec);
  }
  std::vector<std::vector<float>> trained;
  for (const int64_t fusion_bytes : {0, 2048, 1 << 20}) {
    StartJob(config::Server::OPTIMIZER, 0, tensors, fusion_bytes);
    BothWorkers([&](int rank) { ASSERT_TRUE(clients_[rank]->Start(tensors_[rank]).ok()); });
    for (uint64_t step = 0; step < 3; ++step) {
      BothWorkers([&](int rank) {
        const absl::Status waited =
            Step(rank, step, testing::TestGradient(layout_.total_elements, step, rank));
        ASSERT_TRUE(waited.ok()) << "fusion_bytes " << fusion_bytes << ": " << waited;
      });
    }
    EXPECT_EQ(params_[1], params_[0]) << "fusion_bytes " << fusion_bytes;
    EXPECT_NE(params_[0], std::vector<float>(layout_.total_elements, 0.25f));
    trained.push_back(params_[0]);
    StopJob();
  }
  EXPECT_EQ(trained[1], trained[0]) << "fused at 2048 bytes";
  EXPECT_EQ(trained[2], trained[0]) << "fused at 1 MiB";
}

TEST_F(RegisteredJobTest, AggregateModeWritesTheMeanGradient) {
  StartJob(config::Server::AGGREGATE);
  BothWorkers([&](int rank) { ASSERT_TRUE(clients_[rank]->Start(tensors_[rank]).ok()); });
  ASSERT_TRUE(clients_[0]->aggregates());
  std::vector<std::vector<float>> grads, means;
  std::vector<std::vector<absl::Span<float>>> mean_tensors;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    grads.push_back(testing::TestGradient(layout_.total_elements, 3, rank));
    means.emplace_back(layout_.total_elements, 99.0f);  // Overwritten, not added to.
  }
  for (uint32_t rank = 0; rank < 2; ++rank) {
    mean_tensors.push_back(SplitIntoTensors(layout_, absl::MakeSpan(means[rank])));
  }
  const std::vector<float> weights_before = params_[0];
  BothWorkers([&](int rank) {
    ASSERT_TRUE(clients_[rank]->BeginStep(0, tensors_[rank]).ok());
    for (int t = 0; t < 2; ++t) {
      ASSERT_TRUE(clients_[rank]
                      ->Push(layout_.tensors[t].name,
                             absl::MakeConstSpan(grads[rank]).subspan(
                                 layout_.tensor_offsets[t], layout_.tensors[t].elements()))
                      .ok());
    }
    const absl::Status waited = clients_[rank]->Wait(mean_tensors[rank]);
    ASSERT_TRUE(waited.ok()) << waited;
  });
  for (size_t i = 0; i < means[0].size(); ++i) {
    // Multiples of 1/64: the fp32 mean is exact.
    ASSERT_EQ(means[0][i], (grads[0][i] + grads[1][i]) / 2) << "element " << i;
  }
  EXPECT_EQ(means[1], means[0]);
  EXPECT_EQ(params_[0], weights_before);
  const absl::StatusOr<uint64_t> rejoined = clients_[1]->Rejoin(tensors_[1], "test");
  EXPECT_TRUE(absl::IsFailedPrecondition(rejoined.status())) << rejoined.status();
}

// A worker a barrier dropped rejoins at the others' step; its totals count the steps it took
// no part in (what its STEP events tell `tamp run`), the others' none.
TEST_F(RegisteredJobTest, AWorkerThatRejoinsCountsTheStepsItMissed) {
  StartJob(config::Server::OPTIMIZER, /*worker_timeout_ms=*/100);
  BothWorkers([&](int rank) { ASSERT_TRUE(clients_[rank]->Start(tensors_[rank]).ok()); });
  const std::vector<float> grads = testing::TestGradient(layout_.total_elements, 3, 0);
  BothWorkers([&](int rank) { ASSERT_TRUE(Step(rank, 0, grads).ok()); });
  ASSERT_TRUE(Step(0, 1, grads).ok());  // Worker 1 is late: dropped after 100 ms.
  ASSERT_TRUE(Step(0, 2, grads).ok());  // Without it.
  const absl::Status late = Step(1, 1, grads);
  ASSERT_TRUE(absl::IsAborted(late)) << late;
  EXPECT_EQ(clients_[1]->totals().steps_missed, 0u);  // Not yet: it may rejoin at step 1.
  const absl::StatusOr<uint64_t> rejoined = clients_[1]->Rejoin(tensors_[1], "dropped");
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  EXPECT_EQ(*rejoined, 3u);
  EXPECT_EQ(clients_[1]->totals().steps_missed, 2u);  // Steps 1 and 2.
  EXPECT_EQ(clients_[0]->totals().steps_missed, 0u);
  BothWorkers([&](int rank) { ASSERT_TRUE(Step(rank, 3, grads).ok()); });
  EXPECT_EQ(params_[1], params_[0]) << "the replicas differ after the rejoin";
}

// The servers' word for a dropped worker is to rejoin; in AGGREGATE it cannot (a user's
// rejoin() was refused after being told to call it): the client says so.
TEST_F(RegisteredJobTest, AnAggregateWorkerDroppedIsToldItCannotRejoin) {
  StartJob(config::Server::AGGREGATE, /*worker_timeout_ms=*/100);
  BothWorkers([&](int rank) { ASSERT_TRUE(clients_[rank]->Start(tensors_[rank]).ok()); });
  const std::vector<float> grads = testing::TestGradient(layout_.total_elements, 3, 0);
  const absl::Status alone = Step(0, 0, grads);  // Worker 1 is late: dropped after 100 ms.
  ASSERT_TRUE(alone.ok()) << alone;
  const absl::Status late = Step(1, 0, grads);
  EXPECT_TRUE(absl::IsAborted(late)) << late;
  EXPECT_THAT(late.message(),
              HasSubstr("; with server.mode AGGREGATE a dropped worker cannot rejoin (the servers "
                        "hold no trained weights): the other workers go on without it"));
  EXPECT_THAT(clients_[1]->BeginStep(1, tensors_[1]).message(),
              HasSubstr("with server.mode AGGREGATE the client is only good for closing"));
}

TEST_F(RegisteredJobTest, AWorkerWithOtherTensorsIsRefusedNamingTheFirstDifference) {
  StartJob(config::Server::OPTIMIZER);
  const absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(config_, OtherLayout(), 1, addresses_, RunLength{10, 20});
  EXPECT_TRUE(absl::IsFailedPrecondition(client.status())) << client.status();
  EXPECT_THAT(client.status().message(),
              HasSubstr("tensor 0: worker \"encoder.weight\" [3, 701] vs server "
                        "\"encoder.weight\" [3, 700]"));
}

// Worker 0's broadcast waits for a worker whose handshake the servers refused (it will never
// pull): its error says why, not only that the worker did not pull.
TEST_F(RegisteredJobTest, ABroadcastWaitingOnARefusedWorkerNamesTheRefusal) {
  StartJob(config::Server::OPTIMIZER, 0, {}, -1, /*rpc_timeout_ms=*/1000);
  ASSERT_TRUE(clients_[0]->Start(tensors_[0]).ok());
  ASSERT_FALSE(Client::Connect(config_, OtherLayout(), 1, addresses_, RunLength{10, 20}).ok());
  const absl::Status broadcast = clients_[0]->Broadcast(tensors_[0]);
  EXPECT_TRUE(absl::IsDeadlineExceeded(broadcast)) << broadcast;
  EXPECT_THAT(broadcast.message(), HasSubstr("worker(s) 1 did not pull generation 1"));
  EXPECT_THAT(broadcast.message(),
              HasSubstr("the server refused the handshake of worker 1: worker 1's tensors "
                        "differ from server 0's"));
  EXPECT_THAT(broadcast.message(), HasSubstr("[3, 701] vs server \"encoder.weight\" [3, 700]"));
}

}  // namespace
}  // namespace tamp
