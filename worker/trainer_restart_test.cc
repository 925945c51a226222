// Server failure between the answers of one step (README "Checkpoints and failures"): shard 1
// completes the chunks of a step, then dies having lost some of their answers. Its restarted
// process, resumed from an earlier checkpoint, lost that step; every worker must get through it:
//   - each worker lost one answer the other got: each must push it every chunk of the step again,
//     not only the one whose answer it lost, or each waits there on a push the other will not
//     send;
//   - worker 0 lost all of shard 1's answers, worker 1 none: worker 1 has gone on to the next
//     step, whose pushes to shard 1 fail, while its pushes to shard 0 wait for worker 0. It must
//     push that step to the restarted shard 1 without waiting for shard 0's answers: worker 0
//     waits there for the step it lost, which the restarted shard leaves (answering it
//     OUT_OF_RANGE) only once worker 1's push of the next step arrives.
//
// Two real Trainers run against two in-process servers: shard 0 is the plain service, shard 1 first
// a service that loses those answers and then refuses everything (as a killed process does), then
// the plain service over a shard restored from the checkpoint, on the same port. The
// PowerSGD cases run once more with device workers (a CPU model claiming cuda:0 and the
// host stand-in of the CUDA backend, worker/internal/host_stand_in.h), whose replayed first
// rounds go through the backend.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "job/config.h"
#include "job/job_layout.h"
#include "proto/checkpoint.pb.h"
#include "server/service.h"
#include "server/shard.h"
#include "worker/cpu_models.h"
#include "worker/idx_test_util.h"
#include "worker/internal/host_stand_in.h"
#include "worker/trainer.h"

namespace tamp {
namespace {

constexpr uint64_t kCheckpointStep = 4;  // The restarted process resumes from here.
constexpr uint64_t kLostStep = 6;        // Shard 1 dies answering this step.
constexpr int kTrainImages = 512;        // 16 steps of 16 images on each of 2 workers.
constexpr uint64_t kSteps = 16;

// A worker's answer of a chunk.
struct Answer {
  uint32_t worker;
  uint32_t chunk;
};

// Shard 1's first process: the plain service, except that it takes the checkpoint as the first push
// of kCheckpointStep arrives, and at kLostStep loses the answers in `lost` (the other answers of
// those chunks go out; for multi-round codecs, the answers to the last round). Once all are lost it is dead: every call after that is UNAVAILABLE, as a
// worker sees a killed server, and so are the pushes it held (Shard::Close()).
class DyingService final : public rpc::ParameterServer::CallbackService {
 public:
  DyingService(Shard* shard, std::vector<Answer> lost)
      : shard_(*shard), service_(shard), lost_(std::move(lost)) {}

  grpc::ServerUnaryReactor* Handshake(grpc::CallbackServerContext* context,
                                      const rpc::HandshakeRequest* request,
                                      rpc::HandshakeResponse* response) override {
    if (dead()) return Killed(context->DefaultReactor());
    return service_.Handshake(context, request, response);
  }
  grpc::ServerUnaryReactor* PullWeights(grpc::CallbackServerContext* context,
                                        const rpc::PullWeightsRequest* request,
                                        rpc::PullWeightsResponse* response) override {
    if (dead()) return Killed(context->DefaultReactor());
    return service_.PullWeights(context, request, response);
  }
  grpc::ServerUnaryReactor* PushPull(grpc::CallbackServerContext* context,
                                     const rpc::PushPullRequest* request,
                                     rpc::PushPullResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (dead()) return Killed(reactor);
    const uint32_t worker = request->worker_rank();
    const uint32_t chunk = request->chunk_id();
    const uint64_t step = request->step();
    if (step == kCheckpointStep) {
      std::lock_guard<std::mutex> lock(mu_);
      // No chunk completes kCheckpointStep before this, its first push, reaches the shard.
      if (!checkpoint_) checkpoint_ = shard_.ExportState();
    }
    shard_.PushPullRound(worker, step, request->round(), chunk, request->payload(),
                         [this, reactor, response, worker, chunk, step](
                             absl::Status status, const Shard::PushAnswer* answer) {
                           // The step's last answer (its only one, for single-round codecs).
                           const bool last = answer == nullptr || answer->last_round;
                           if (step == kLostStep && last && Loses(worker, chunk)) {
                             {
                               std::lock_guard<std::mutex> lock(mu_);
                               if (++answers_lost_ == lost_.size()) died_.notify_all();
                             }
                             Killed(reactor);
                             return;
                           }
                           if (status.ok()) {
                             response->set_step(answer->step);
                             response->set_payload(*answer->update);
                             response->set_aggregate(*answer->aggregate);
                           }
                           reactor->Finish(ToGrpcStatus(status));
                         });
    return reactor;
  }
  // Tensor fusion's calls: a batch holding an answer to lose is taken whole by the shard and
  // its call dies once every push of it is answered, losing all of its answers.
  grpc::ServerUnaryReactor* PushPullBatch(grpc::CallbackServerContext* context,
                                          const rpc::PushPullBatchRequest* request,
                                          rpc::PushPullBatchResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (dead()) return Killed(reactor);
    const uint32_t worker = request->worker_rank();
    const uint64_t step = request->step();
    if (step == kCheckpointStep) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!checkpoint_) checkpoint_ = shard_.ExportState();
    }
    struct Batch {
      std::mutex mu;
      int unanswered = 0;
      size_t lost = 0;  // Its answers to lose.
      grpc::Status status;
    };
    auto batch = std::make_shared<Batch>();
    batch->unanswered = request->pushes_size();
    for (int i = 0; i < request->pushes_size(); ++i) response->add_answers();
    for (int i = 0; i < request->pushes_size(); ++i) {
      const rpc::BatchedPush& push = request->pushes(i);
      shard_.PushPullRound(
          worker, step, push.round(), push.chunk_id(), push.payload(),
          [this, reactor, response, batch, worker, step, i, chunk = push.chunk_id()](
              absl::Status status, const Shard::PushAnswer* answer) {
            FillBatchedAnswer(chunk, status, answer, response->mutable_answers(i));
            const bool last = answer == nullptr || answer->last_round;
            std::lock_guard<std::mutex> lock(batch->mu);
            if (step == kLostStep && last && Loses(worker, chunk)) ++batch->lost;
            if (--batch->unanswered > 0) return;
            if (batch->lost == 0) {
              reactor->Finish(grpc::Status::OK);
              return;
            }
            {
              std::lock_guard<std::mutex> dying(mu_);
              answers_lost_ += batch->lost;
              if (answers_lost_ == lost_.size()) died_.notify_all();
            }
            Killed(reactor);
          });
    }
    return reactor;
  }

  // Waits until both answers were lost; returns the checkpoint (none after 60 s).
  std::optional<checkpoint::ShardState> AwaitDeath() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!died_.wait_for(lock, std::chrono::seconds(60),
                        [&] { return answers_lost_ == lost_.size(); })) {
      return std::nullopt;
    }
    return checkpoint_;
  }

 private:
  bool dead() const {
    std::lock_guard<std::mutex> lock(mu_);
    return answers_lost_ == lost_.size();
  }
  bool Loses(uint32_t worker, uint32_t chunk) const {
    return std::any_of(lost_.begin(), lost_.end(), [&](const Answer& answer) {
      return answer.worker == worker && answer.chunk == chunk;
    });
  }
  static grpc::ServerUnaryReactor* Killed(grpc::ServerUnaryReactor* reactor) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server 1 was killed"));
    return reactor;
  }

  Shard& shard_;
  ParameterServerService service_;
  const std::vector<Answer> lost_;
  mutable std::mutex mu_;
  std::condition_variable died_;
  size_t answers_lost_ = 0;                           // Guarded by mu_.
  std::optional<checkpoint::ShardState> checkpoint_;  // Guarded by mu_.
};

// A tiny Fashion-MNIST-shaped data set: images whose brightness follows the label.
void WriteDataSet(const std::string& dir) {
  for (const auto& [prefix, count] : {std::pair<std::string, int>{"train", kTrainImages},
                                      std::pair<std::string, int>{"t10k", 64}}) {
    std::vector<uint8_t> images(static_cast<size_t>(count) * 28 * 28);
    std::vector<uint8_t> labels(count);
    for (int i = 0; i < count; ++i) {
      labels[i] = static_cast<uint8_t>(i * 7 % 10);
      for (int p = 0; p < 28 * 28; ++p) {
        images[static_cast<size_t>(i) * 784 + p] =
            static_cast<uint8_t>((labels[i] * 25 + p * 3) % 256);
      }
    }
    testing::WriteGzFile(dir + prefix + "-images-idx3-ubyte.gz",
                         testing::IdxBytes({static_cast<uint32_t>(count), 28, 28}, images));
    testing::WriteGzFile(dir + prefix + "-labels-idx1-ubyte.gz",
                         testing::IdxBytes({static_cast<uint32_t>(count)}, labels));
  }
}

std::unique_ptr<grpc::Server> Serve(grpc::Service* service, const std::string& address, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

class TrainerRestartTest : public ::testing::Test {
 protected:
  // The push codec's spec.
  virtual std::string PushCodec() const { return R"(name: "topk" ratio: 0.1)"; }
  // Whether the workers' tensors are on a (stand-in) device.
  virtual bool DeviceWorkers() const { return false; }
  // cluster.fusion_bytes: by default every chunk of this small MLP goes in its shard's batch.
  virtual std::string Fusion() const { return ""; }

  void SetUp() override {
    const std::string dir = testing::TestDir();
    WriteDataSet(dir);
    const std::string config_path = dir + "job.pbtxt";
    testing::WriteRawFile(
        config_path, absl::StrCat(R"pb(
                                    version: 1
                                    cluster {
                                      num_servers: 2
                                      num_workers: 2
                                      rpc_timeout_ms: 10000
                                      )pb",
                                  Fusion(), R"pb(
                                    }
                                    model {
                                      kind: MLP
                                      hidden: [ 8 ]
                                      init_seed: 3
                                    }
                                    data { dir: ")pb",
                                  dir, R"pb(" batch_size: 16 shuffle_seed: 5 }
                                            training { epochs: 1 }
                                            optimizer { learning_rate: 0.05 momentum: 0.9 }
                                            consistency { worker_timeout_ms: 0 }
                                            checkpoint { dir: ")pb",
                                  dir, R"pb(" reconnect_timeout_ms: 20000 }
                                            compression {
                                              partition_bytes: 4096
                                              seed: 7
                                              default_compression {
                                                push { )pb",
                                  PushCodec(), R"pb( }
                                                push_feedback { kind: RESIDUAL }
                                              }
                                            }
        )pb"));
    absl::StatusOr<config::RunConfig> config = LoadConfigFile(config_path);
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *std::move(config);
    absl::StatusOr<JobLayout> layout = BuildJobLayout(config_);
    ASSERT_TRUE(layout.ok()) << layout.status();
    layout_ = *std::move(layout);
    for (uint32_t id = 0; id < layout_.chunks.size(); ++id) {
      if (layout_.chunks[id].chunk.shard == 1) shard1_chunks_.push_back(id);
    }
    ASSERT_GE(shard1_chunks_.size(), 2u) << "the test needs two chunks on shard 1";
  }

  // Trains the job with shard 1 losing `lost` at kLostStep, dying and coming back from its
  // checkpoint; expects both workers to finish every step with identical replicas.
  void TrainThroughTheRestart(std::vector<Answer> lost) {
    absl::StatusOr<std::unique_ptr<Shard>> shard0 = Shard::Create(config_, layout_, 0);
    absl::StatusOr<std::unique_ptr<Shard>> first = Shard::Create(config_, layout_, 1);
    ASSERT_TRUE(shard0.ok()) << shard0.status();
    ASSERT_TRUE(first.ok()) << first.status();
    ParameterServerService service0(shard0->get());
    DyingService dying(first->get(), std::move(lost));
    int port0 = 0;
    int port1 = 0;
    std::unique_ptr<grpc::Server> server0 = Serve(&service0, "127.0.0.1:0", &port0);
    std::unique_ptr<grpc::Server> server1 = Serve(&dying, "127.0.0.1:0", &port1);
    ASSERT_NE(server0, nullptr);
    ASSERT_NE(server1, nullptr);
    const std::vector<std::string> addresses = {absl::StrCat("127.0.0.1:", port0),
                                                absl::StrCat("127.0.0.1:", port1)};

    std::vector<std::unique_ptr<Trainer>> trainers;
    for (uint32_t rank = 0; rank < 2; ++rank) {
      TrainerParts parts;
      if (DeviceWorkers()) {
        parts.model = [](const config::RunConfig& config, std::vector<TensorSpec> tensors,
                         int max_batch) -> absl::StatusOr<std::unique_ptr<Model>> {
          absl::StatusOr<std::unique_ptr<Model>> cpu =
              CreateCpuModel(config.model(), std::move(tensors), max_batch);
          if (!cpu.ok()) return cpu.status();
          return std::unique_ptr<Model>(
              std::make_unique<testing::DeviceStandInModel>(*std::move(cpu), 1));
        };
        testing::Calls* calls = &calls_[rank];
        parts.device_backends = [calls](const JobLayout& layout,
                                        absl::Span<const DeviceChunkPlan> plan, int)
            -> absl::StatusOr<std::unique_ptr<DeviceBackend>> {
          return std::unique_ptr<DeviceBackend>(
              std::make_unique<testing::HostStandIn>(layout, plan, calls));
        };
      }
      absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(
          config_, rank, addresses, [](const events::WorkerEvent&) {}, std::move(parts));
      ASSERT_TRUE(trainer.ok()) << trainer.status();
      trainers.push_back(*std::move(trainer));
    }
    std::vector<absl::Status> results(2);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads.emplace_back([&, rank] { results[rank] = trainers[rank]->Run(); });
    }

    // Shard 1 dies; its restart resumes from the checkpoint on the same port.
    const std::optional<checkpoint::ShardState> checkpoint = dying.AwaitDeath();
    std::unique_ptr<Shard> restarted;
    std::unique_ptr<ParameterServerService> restarted_service;
    if (checkpoint) {
      (*first)->Close(absl::UnavailableError("server 1 was killed"));
      server1->Shutdown();
      server1.reset();
      absl::StatusOr<std::unique_ptr<Shard>> second = Shard::Create(config_, layout_, 1);
      if (second.ok() && (*second)->Restore(*checkpoint).ok()) {
        restarted = *std::move(second);
        restarted_service = std::make_unique<ParameterServerService>(restarted.get());
        server1 = Serve(restarted_service.get(), addresses[1], &port1);
      }
    }
    for (std::thread& thread : threads) thread.join();
    // Before any assertion can return: a failed run may have left pushes parked, which the
    // servers' shutdown would wait on.
    for (Shard* shard : {shard0->get(), first->get(), restarted.get()}) {
      if (shard != nullptr) shard->Close(absl::UnavailableError("test over"));
    }
    // The servers stop (waiting for every call's completion) before the services they call
    // are destroyed: restarted_service goes before server1, and a push's completion may
    // still be on a gRPC thread.
    server0->Shutdown();
    if (server1 != nullptr) server1->Shutdown();
    ASSERT_TRUE(checkpoint.has_value()) << "shard 1 did not lose the answers of step " << kLostStep;
    ASSERT_NE(restarted, nullptr) << "the restarted shard 1 did not start";
    ASSERT_NE(server1, nullptr);
    for (const checkpoint::ChunkState& chunk : checkpoint->chunks()) {
      EXPECT_EQ(chunk.step(), kCheckpointStep);
    }

    for (int rank = 0; rank < 2; ++rank) EXPECT_TRUE(results[rank].ok()) << results[rank];
    // Every step of the run completed on the restarted shard, and the replicas agree.
    EXPECT_EQ(restarted->step(), kSteps);
    const absl::StatusOr<std::vector<float>> a = trainers[0]->Params();
    const absl::StatusOr<std::vector<float>> b = trainers[1]->Params();
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
    EXPECT_EQ(std::memcmp(a->data(), b->data(), a->size() * sizeof(float)), 0)
        << "the workers' replicas differ after the restart";
  }

  config::RunConfig config_;
  JobLayout layout_;
  std::vector<uint32_t> shard1_chunks_;
  testing::Calls calls_[2];  // Each device worker's backend calls.
};

TEST_F(TrainerRestartTest, EachWorkerPushesAgainTheChunksWhoseAnswersTheOtherLost) {
  // Worker 0 loses shard 1's first chunk's answer, worker 1 its second chunk's.
  TrainThroughTheRestart({{0, shard1_chunks_[0]}, {1, shard1_chunks_[1]}});
}

TEST_F(TrainerRestartTest, AWorkerAStepAheadPushesItWithoutWaitingForTheOtherShard) {
  // Worker 0 loses every answer of shard 1; worker 1 gets them all and goes on to the next step.
  std::vector<Answer> lost;
  for (uint32_t chunk : shard1_chunks_) lost.push_back({0, chunk});
  TrainThroughTheRestart(lost);
}

// Each chunk in its own call: a lost answer is that chunk's alone.
class UnfusedTrainerRestartTest : public TrainerRestartTest {
 protected:
  std::string Fusion() const override { return "fusion_bytes: 0"; }
};

TEST_F(UnfusedTrainerRestartTest, EachWorkerPushesAgainTheChunksWhoseAnswersTheOtherLost) {
  TrainThroughTheRestart({{0, shard1_chunks_[0]}, {1, shard1_chunks_[1]}});
}

TEST_F(UnfusedTrainerRestartTest, AWorkerAStepAheadPushesItWithoutWaitingForTheOtherShard) {
  std::vector<Answer> lost;
  for (uint32_t chunk : shard1_chunks_) lost.push_back({0, chunk});
  TrainThroughTheRestart(lost);
}

// PowerSGD takes two rounds per step: a worker pushes the lost step to the restarted shard
// again from its first round, re-encoding it (ErrorFeedback::ReplayRounds()), including
// the chunks whose last round had been answered to it and not to the other worker.
class PowerSgdRestartTest : public TrainerRestartTest {
 protected:
  std::string PushCodec() const override { return R"(name: "powersgd" rank: 2)"; }
};

TEST_F(PowerSgdRestartTest, EachWorkerPushesTheStepAgainFromItsFirstRound) {
  // The last round's answers: each worker loses one the other got.
  TrainThroughTheRestart({{0, shard1_chunks_[0]}, {1, shard1_chunks_[1]}});
}

TEST_F(PowerSgdRestartTest, AWorkerThatLostEveryFirstRoundAnswerPushesTheStepAgain) {
  std::vector<Answer> lost;
  for (uint32_t chunk : shard1_chunks_) lost.push_back({0, chunk});
  TrainThroughTheRestart(lost);
}

// The same with device workers: powersgd's rounds, and the replayed first rounds, go through
// the device backend, and no gradient comes to the host.
class DevicePowerSgdRestartTest : public PowerSgdRestartTest {
 protected:
  bool DeviceWorkers() const override { return true; }

  void ExpectEverythingThroughTheBackend() {
    for (int rank = 0; rank < 2; ++rank) {
      EXPECT_GT(calls_[rank].encodes, 0) << "worker " << rank;
      EXPECT_GT(calls_[rank].finishes, 0) << "worker " << rank;
      EXPECT_EQ(calls_[rank].to_host, 0) << "worker " << rank;
    }
  }
};

TEST_F(DevicePowerSgdRestartTest, EachWorkerReplaysTheStepThroughTheBackend) {
  TrainThroughTheRestart({{0, shard1_chunks_[0]}, {1, shard1_chunks_[1]}});
  ExpectEverythingThroughTheBackend();
  // Each lost an answer of the restarted shard: each pushes the step to it again.
  EXPECT_GT(calls_[0].replays, 0);
  EXPECT_GT(calls_[1].replays, 0);
}

TEST_F(DevicePowerSgdRestartTest, AWorkerThatLostEveryFirstRoundAnswerReplaysThroughTheBackend) {
  std::vector<Answer> lost;
  for (uint32_t chunk : shard1_chunks_) lost.push_back({0, chunk});
  TrainThroughTheRestart(lost);
  ExpectEverythingThroughTheBackend();
  EXPECT_GT(calls_[0].replays, 0);
}

}  // namespace
}  // namespace tamp
