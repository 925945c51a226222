// Shard in the ASYNC and SSP consistency modes (server/shard.h, docs/consistency.md), without
// gRPC: closed-form weights after interleaved pushes from 2 workers (codec "none", plain SGD,
// lr 0.5), per-worker views and their reset by PullWeights, the SSP staleness rule with a
// scripted and with a deliberately slow worker, the config checks, and SYNC left as it was.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "job/config.h"
#include "server/shard.h"
#include "server/test_job.h"

namespace tamp {
namespace {

using ::tamp::testing::Answer;
using ::tamp::testing::DecodePull;
using ::tamp::testing::EncodePush;
using ::tamp::testing::Record;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;
using ::tamp::testing::TestLayout;
using ::testing::HasSubstr;

constexpr float kLr = 0.5f;


config::RunConfig ModeConfig(config::Consistency::Mode mode, uint32_t staleness,
                             const std::string& pull = "none") {
  return TestConfig([&](config::RunConfig& config) {
    config.mutable_consistency()->set_mode(mode);
    config.mutable_consistency()->set_staleness(staleness);
    if (pull != "none") {
      config::Codec* codec = config.mutable_compression()->mutable_default_compression()->mutable_pull();
      codec->set_name(pull);
      codec->set_ratio(0.25);
    }
  });
}

class ShardModeTest : public ::testing::Test {
 protected:
  void Init(const config::RunConfig& config) {
    config_ = config;
    layout_ = TestLayout(config_);
    absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config_, layout_, 0);
    ASSERT_TRUE(shard.ok()) << shard.status();
    shard_ = *std::move(shard);
    chunk_ = shard_->chunk_ids().front();
  }

  size_t Length() const { return layout_.chunks[chunk_].chunk.length; }

  Shard::ChunkSnapshot Snapshot() const {
    absl::StatusOr<Shard::ChunkSnapshot> snapshot = shard_->Snapshot(chunk_);
    CHECK(snapshot.ok()) << snapshot.status();
    return *std::move(snapshot);
  }

  void Push(uint32_t worker, uint64_t step, const std::vector<float>& gradient,
            Shard::RoundDoneCallback done) {
    shard_->PushPullRound(worker, step, 0, chunk_,
                          EncodePush(config_, layout_, step, chunk_, worker, gradient),
                          std::move(done));
  }

  // w - lr * (g / 2): one applied push of 2 workers, in the server's fp32 operations.
  static std::vector<float> AsyncSgd(const std::vector<float>& w, const std::vector<float>& g) {
    std::vector<float> out(w.size());
    for (size_t i = 0; i < w.size(); ++i) out[i] = w[i] - kLr * (g[i] * 0.5f);
    return out;
  }

  config::RunConfig config_;
  JobLayout layout_;
  std::unique_ptr<Shard> shard_;
  uint32_t chunk_ = 0;
};

void ExpectNear(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], 1e-6f) << "at " << i;
  }
}

std::vector<float> Plus(std::vector<float> a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// ---------------------------------------------------------------------------------------
// ASYNC

TEST_F(ShardModeTest, AsyncInterleavedPushesAreTheClosedForm) {
  Init(ModeConfig(config::Consistency::ASYNC, 0));
  const std::vector<float> w_init = Snapshot().weights;
  // Each worker's replica, as the trainer keeps it: exact start, then += decoded answers.
  std::vector<float> replica[2] = {w_init, w_init};
  std::vector<float> w = w_init;
  // Worker 0 runs two steps ahead, then worker 1 catches up: 0:0, 0:1, 1:0, 0:2, 1:1, 1:2.
  const std::pair<uint32_t, uint64_t> order[] = {{0, 0}, {0, 1}, {1, 0}, {0, 2}, {1, 1}, {1, 2}};
  uint64_t applied = 0;
  for (const auto& [worker, step] : order) {
    const std::vector<float> g = TestGradient(Length(), step, worker);
    Answer answer;
    Push(worker, step, g, Record(&answer));
    ASSERT_EQ(answer.calls, 1) << "ASYNC answers at once";
    ASSERT_TRUE(answer.status.ok()) << answer.status;
    ++applied;
    w = AsyncSgd(w, g);
    EXPECT_EQ(answer.step, step + 1);
    const Shard::ChunkSnapshot snapshot = Snapshot();
    EXPECT_EQ(snapshot.step, applied) << "the chunk counts applied pushes";
    EXPECT_EQ(snapshot.worker_steps[worker], step + 1);
    ExpectNear(snapshot.weights, w);
    // The answer is w_now - (what this worker held): its replica now equals the weights.
    replica[worker] =
        Plus(replica[worker], DecodePull(config_, layout_, step, chunk_, answer.update));
    ExpectNear(replica[worker], w);
    ExpectNear(snapshot.views[worker], replica[worker]);
  }
  // Closed form of the whole run: w_init - lr/2 * sum of all six gradients.
  std::vector<float> sum(Length(), 0.0f);
  for (const auto& [worker, step] : order) sum = Plus(sum, TestGradient(Length(), step, worker));
  std::vector<float> closed(Length());
  for (size_t i = 0; i < closed.size(); ++i) closed[i] = w_init[i] - kLr * sum[i] / 2;
  for (size_t i = 0; i < closed.size(); ++i) ASSERT_NEAR(Snapshot().weights[i], closed[i], 1e-5f);
}

TEST_F(ShardModeTest, AsyncRefusesOutOfOrderPushesAndLeavesTheState) {
  Init(ModeConfig(config::Consistency::ASYNC, 0));
  Answer first;
  Push(0, 0, TestGradient(Length(), 0, 0), Record(&first));
  ASSERT_TRUE(first.status.ok());
  const Shard::ChunkSnapshot before = Snapshot();

  Answer ahead, again, bad;
  Push(1, 1, TestGradient(Length(), 1, 1), Record(&ahead));
  EXPECT_EQ(ahead.status.code(), absl::StatusCode::kFailedPrecondition) << ahead.status;
  EXPECT_THAT(ahead.status.message(), HasSubstr("worker 1 is at step 0, push was for step 1"));
  Push(0, 0, TestGradient(Length(), 0, 0), Record(&again));
  EXPECT_EQ(again.status.code(), absl::StatusCode::kAlreadyExists) << again.status;
  shard_->PushPullRound(1, 0, 0, chunk_, "garbage", Record(&bad));
  EXPECT_EQ(bad.status.code(), absl::StatusCode::kInvalidArgument) << bad.status;

  const Shard::ChunkSnapshot after = Snapshot();
  EXPECT_EQ(after.step, before.step);
  EXPECT_EQ(0, std::memcmp(after.weights.data(), before.weights.data(), Length() * 4));
  EXPECT_EQ(0, std::memcmp(after.accumulator.data(), before.accumulator.data(), Length() * 4));
  EXPECT_EQ(after.worker_steps, before.worker_steps);
  EXPECT_EQ(after.views, before.views);
}

TEST_F(ShardModeTest, LossyPullCarriesTheRestAndPullWeightsResetsTheView) {
  Init(ModeConfig(config::Consistency::ASYNC, 0, "topk"));
  std::vector<float> replica = Snapshot().weights;
  Answer a;
  Push(0, 0, TestGradient(Length(), 0, 0), Record(&a));
  ASSERT_TRUE(a.status.ok()) << a.status;
  replica = Plus(replica, DecodePull(config_, layout_, 0, chunk_, a.update));
  Shard::ChunkSnapshot snapshot = Snapshot();
  ExpectNear(snapshot.views[0], replica);  // The view is what the worker holds...
  EXPECT_NE(snapshot.views[0], snapshot.weights);  // ...which top-k left short of w.
  EXPECT_TRUE(snapshot.pull_residual.empty() ||
              std::all_of(snapshot.pull_residual.begin(), snapshot.pull_residual.end(),
                          [](float r) { return r == 0.0f; }))
      << "no separate pull residual in ASYNC";

  rpc::PullWeightsResponse response;
  ASSERT_TRUE(shard_->PullWeights(0, &response).ok());
  // Worker 0's own step over the shard's chunks: only one of them has its push.
  EXPECT_EQ(response.step(), shard_->chunk_ids().size() == 1 ? 1u : 0u);
  snapshot = Snapshot();
  EXPECT_EQ(snapshot.views[0], snapshot.weights);
  ASSERT_TRUE(shard_->PullWeights(1, &response).ok());
  EXPECT_EQ(response.step(), 0u);
  EXPECT_EQ(shard_->PullWeights(2, &response).code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------
// SSP

TEST_F(ShardModeTest, SspHoldsTheFastWorkerUntilTheSlowOneCatchesUp) {
  constexpr uint32_t kTau = 2;
  Init(ModeConfig(config::Consistency::SSP, kTau));
  Answer fast[4];
  for (uint64_t s = 0; s < 2; ++s) {
    Push(0, s, TestGradient(Length(), s, 0), Record(&fast[s]));
    EXPECT_EQ(fast[s].calls, 1) << "step " << s << " is within tau of nothing pushed";
  }
  // Step 2 needs worker 1's step 0: parked, though already applied.
  Push(0, 2, TestGradient(Length(), 2, 0), Record(&fast[2]));
  EXPECT_EQ(fast[2].calls, 0);
  EXPECT_EQ(Snapshot().step, 3u);
  // The slow worker's push is answered at once and releases the fast one.
  Answer slow;
  Push(1, 0, TestGradient(Length(), 0, 1), Record(&slow));
  EXPECT_EQ(slow.calls, 1);
  ASSERT_EQ(fast[2].calls, 1);
  ASSERT_TRUE(fast[2].status.ok()) << fast[2].status;
  EXPECT_EQ(fast[2].step, 3u);
  EXPECT_EQ(fast[2].slowest_pushes, 1u);
  // Its answer is formed at release: it brings worker 0 to the weights after all 4 pushes.
  std::vector<float> replica = Snapshot().views[0];
  ExpectNear(replica, Snapshot().weights);

  // Close() fails a parked push.
  Push(0, 3, TestGradient(Length(), 3, 0), Record(&fast[3]));
  EXPECT_EQ(fast[3].calls, 0);
  shard_->Close(absl::UnavailableError("closing"));
  EXPECT_EQ(fast[3].calls, 1);
  EXPECT_EQ(fast[3].status.code(), absl::StatusCode::kUnavailable);
}

// Two workers driven one push at a time in a random order, each pushing its next step only
// once its previous answer came (as the trainer does), worker 1 picked 4x less often. For
// every answer, the minimum step any worker had pushed at that moment (tracked here, not by
// the shard) must satisfy step - min_step <= tau.
TEST_F(ShardModeTest, SspRuleHoldsForEveryAnswer) {
  for (uint32_t tau : {1u, 2u, 3u}) {
    Init(ModeConfig(config::Consistency::SSP, tau));
    std::mt19937 random(tau);
    int64_t pushed[2] = {0, 0};       // Pushes made, by worker (its next step).
    bool waiting[2] = {false, false};  // An unanswered push.
    int answers = 0;
    int64_t max_lead = 0;
    while (pushed[0] < 40 || pushed[1] < 40) {
      const bool ready[2] = {!waiting[0] && pushed[0] < 40, !waiting[1] && pushed[1] < 40};
      ASSERT_TRUE(ready[0] || ready[1]) << "no worker can push: deadlock at tau " << tau;
      uint32_t worker = random() % 5 == 0 ? 1 : 0;
      if (!ready[worker]) worker = 1 - worker;
      const uint64_t step = static_cast<uint64_t>(pushed[worker]);
      ++pushed[worker];  // Counted before the call: the push is in when any answer forms.
      waiting[worker] = true;
      Push(worker, step, TestGradient(Length(), step, worker),
           [&, worker, step](absl::Status status, const Shard::PushAnswer* answer) {
             ASSERT_TRUE(status.ok()) << status;
             const int64_t min_step = std::min(pushed[0], pushed[1]) - 1;
             const int64_t lead = static_cast<int64_t>(step) - min_step;
             EXPECT_LE(lead, static_cast<int64_t>(tau))
                 << "worker " << worker << " step " << step << " answered with min step "
                 << min_step;
             EXPECT_EQ(answer->slowest_pushes, static_cast<uint64_t>(min_step + 1));
             max_lead = std::max(max_lead, lead);
             waiting[worker] = false;
             ++answers;
           });
    }
    EXPECT_EQ(answers, 80) << "tau " << tau;
    EXPECT_EQ(max_lead, static_cast<int64_t>(tau)) << "the fast worker reached the bound";
  }
}

// Real threads: worker 1 sleeps before each push; worker 0 is held within tau of it.
TEST_F(ShardModeTest, SspSlowWorkerHoldsBackTheFastOne) {
  constexpr uint32_t kTau = 2;
  constexpr uint64_t kSteps = 12;
  Init(ModeConfig(config::Consistency::SSP, kTau));
  std::mutex mu;
  int64_t max_lead[2] = {0, 0};
  auto run = [&](uint32_t worker, std::chrono::milliseconds delay) {
    for (uint64_t step = 0; step < kSteps; ++step) {
      std::this_thread::sleep_for(delay);
      std::mutex done_mu;
      std::condition_variable done_cv;
      bool done = false;
      Push(worker, step, TestGradient(Length(), step, worker),
           [&](absl::Status status, const Shard::PushAnswer* answer) {
             EXPECT_TRUE(status.ok()) << status;
             if (answer != nullptr) {
               const int64_t lead = static_cast<int64_t>(step) -
                                    (static_cast<int64_t>(answer->slowest_pushes) - 1);
               std::lock_guard<std::mutex> lock(mu);
               max_lead[worker] = std::max(max_lead[worker], lead);
             }
             std::lock_guard<std::mutex> lock(done_mu);
             done = true;
             done_cv.notify_all();
           });
      std::unique_lock<std::mutex> lock(done_mu);
      done_cv.wait(lock, [&] { return done; });
    }
  };
  std::thread fast(run, 0, std::chrono::milliseconds(0));
  std::thread slow(run, 1, std::chrono::milliseconds(5));
  fast.join();
  slow.join();
  EXPECT_EQ(max_lead[0], static_cast<int64_t>(kTau)) << "held back exactly at the bound";
  EXPECT_LE(max_lead[1], static_cast<int64_t>(kTau));
  EXPECT_EQ(Snapshot().step, 2 * kSteps);
}

// ---------------------------------------------------------------------------------------
// SYNC unchanged, and the config checks.

TEST_F(ShardModeTest, SyncKeepsNoViewsAndPullWeightsIsUnchanged) {
  Init(TestConfig());
  Answer a0, a1;
  Push(0, 0, TestGradient(Length(), 0, 0), Record(&a0));
  EXPECT_EQ(a0.calls, 0) << "SYNC waits for every worker";
  Push(1, 0, TestGradient(Length(), 0, 1), Record(&a1));
  ASSERT_EQ(a0.calls, 1);
  EXPECT_EQ(a0.update, a1.update);
  EXPECT_TRUE(Snapshot().views.empty());
  rpc::PullWeightsResponse plain, by_worker;
  ASSERT_TRUE(shard_->PullWeights(0, &plain).ok());
  ASSERT_TRUE(shard_->PullWeights(1, &by_worker).ok());
  EXPECT_EQ(plain.SerializeAsString(), by_worker.SerializeAsString());
}

absl::Status Validate(const std::string& consistency, const std::string& push = "none") {
  absl::StatusOr<config::RunConfig> config =
      ParseConfig(absl::StrCat(::tamp::testing::kTestJob, " consistency { ", consistency, " }"),
                  "test");
  if (!config.ok()) return config.status();
  ApplyDefaults(&*config);
  config::Codec* codec = config->mutable_compression()->mutable_default_compression()->mutable_push();
  codec->set_name(push);
  if (push == "powersgd") codec->set_rank(1);
  return ValidateConfig(*config);
}

TEST(ConsistencyConfigTest, ErrorsNameTheField) {
  EXPECT_TRUE(Validate("").ok());
  EXPECT_TRUE(Validate("mode: ASYNC").ok());
  EXPECT_TRUE(Validate("mode: SSP staleness: 3").ok());
  EXPECT_THAT(Validate("mode: SSP").message(),
              HasSubstr("consistency.staleness: must be >= 1 with mode SSP"));
  EXPECT_THAT(Validate("mode: ASYNC staleness: 2").message(),
              HasSubstr("consistency.staleness: is only used by mode SSP; mode is ASYNC"));
  EXPECT_THAT(Validate("staleness: 2").message(), HasSubstr("consistency.staleness"));
  EXPECT_TRUE(Validate("", "powersgd").ok());
  const absl::Status multi = Validate("mode: SSP staleness: 1", "powersgd");
  EXPECT_EQ(multi.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(multi.message(),
              HasSubstr("compression.default_compression.push.name: codec 'powersgd' takes 2 "
                        "rounds per step"));
  EXPECT_THAT(multi.message(), HasSubstr("only with consistency.mode SYNC, not SSP"));
}

}  // namespace
}  // namespace tamp
