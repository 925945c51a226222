// Shard without gRPC: a steady-state step allocates nothing big (issue 18). Every operator new
// of this test binary is counted while the steps run, for a raw pull (codec "none", the whole
// chunk every step) and a compressed one (top-k with the server's residual), SYNC and ASYNC.
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/shard.h"
#include "server/test_job.h"

namespace {

// Counted only while `counting` is set: allocations, their bytes, and those of kBig or more.
constexpr size_t kBig = 16 << 10;
std::atomic<bool> counting{false};
std::atomic<size_t> allocations{0};
std::atomic<size_t> allocated_bytes{0};
std::atomic<size_t> big_allocations{0};

// Counts an allocation of `size` bytes and makes it with malloc (null when out of memory).
void* CountedMalloc(size_t size) {
  if (counting.load(std::memory_order_relaxed)) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    allocated_bytes.fetch_add(size, std::memory_order_relaxed);
    if (size >= kBig) big_allocations.fetch_add(1, std::memory_order_relaxed);
  }
  return std::malloc(size == 0 ? 1 : size);
}

}  // namespace

// Every replaceable form, so that what one allocates the other frees (AddressSanitizer checks
// the pairs); the aligned ones stay the library's, as do their deletes.
void* operator new(size_t size) {
  if (void* p = CountedMalloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept { return CountedMalloc(size); }
void* operator new[](size_t size, const std::nothrow_t&) noexcept { return CountedMalloc(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace tamp {
namespace {

using ::tamp::testing::EncodePush;
using ::tamp::testing::TestConfig;
using ::tamp::testing::TestGradient;
using ::tamp::testing::TestLayout;

// MLP 784-64-10 in chunks of 16,384 values (64 KiB): fc1.weight is three full chunks and one
// of 512, so a raw pull answers 64 KiB per full chunk and step. Push codec top-k 10%.
config::RunConfig AllocJob(const std::string& pull_codec, bool pull_residual,
                           config::Consistency::Mode mode = config::Consistency::SYNC) {
  return TestConfig([&](config::RunConfig& config) {
    config.mutable_consistency()->set_mode(mode);
    config.mutable_model()->clear_hidden();
    config.mutable_model()->add_hidden(64);
    config::Compression& compression = *config.mutable_compression();
    compression.set_partition_bytes(64 << 10);
    config::ChunkCompression& codecs = *compression.mutable_default_compression();
    codecs.mutable_push()->set_name("topk");
    codecs.mutable_push()->set_ratio(0.1);
    codecs.mutable_pull()->set_name(pull_codec);
    if (pull_codec == "topk") codecs.mutable_pull()->set_ratio(0.25);
    // The residual is SYNC's: ASYNC carries what the codec drops in each worker's view.
    if (pull_residual) codecs.mutable_pull_feedback()->set_kind(config::ErrorFeedback::RESIDUAL);
  });
}

struct StepAllocations {
  size_t allocations = 0;
  size_t bytes = 0;
  size_t big = 0;
};

// Runs `warmup` steps of every chunk of shard 0 with both workers pushing, then `steps` more
// while counting; returns the counts of those. Each answer must be OK with a payload.
StepAllocations CountSteadyState(const config::RunConfig& config, int warmup, int steps) {
  const JobLayout layout = TestLayout(config);
  absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config, layout, 0);
  CHECK(shard.ok()) << shard.status();
  const uint32_t workers = config.cluster().num_workers();
  // One payload per chunk and worker, pushed every step: top-k's bytes do not depend on the
  // step's key, and the shard only sums them.
  std::vector<std::vector<std::string>> payloads(layout.chunks.size());
  for (uint32_t id : (*shard)->chunk_ids()) {
    for (uint32_t worker = 0; worker < workers; ++worker) {
      payloads[id].push_back(EncodePush(config, layout, 0, id, worker,
                                        TestGradient(layout.chunks[id].chunk.length, 0, worker)));
    }
  }
  int answered = 0;
  size_t pulled = 0;
  const auto run_step = [&](uint64_t step) {
    for (uint32_t id : (*shard)->chunk_ids()) {
      for (uint32_t worker = 0; worker < workers; ++worker) {
        (*shard)->PushPullRound(
            worker, step, 0, id, payloads[id][worker],
            [&](absl::Status status, const Shard::PushAnswer* answer) {
              CHECK(status.ok()) << status;
              ++answered;
              pulled += answer->update->size();
            });
      }
    }
  };
  uint64_t step = 0;
  for (; step < static_cast<uint64_t>(warmup); ++step) run_step(step);
  allocations = 0;
  allocated_bytes = 0;
  big_allocations = 0;
  counting = true;
  for (; step < static_cast<uint64_t>(warmup + steps); ++step) run_step(step);
  counting = false;
  EXPECT_EQ(answered, (warmup + steps) * workers * (*shard)->chunk_ids().size());
  EXPECT_GT(pulled, 0u);
  return {allocations.load(), allocated_bytes.load(), big_allocations.load()};
}

constexpr int kWarmup = 3;
constexpr int kSteps = 20;

TEST(ShardAllocTest, RawPullStepsAllocateNothingBig) {
  const StepAllocations counted = CountSteadyState(AllocJob("none", false), kWarmup, kSteps);
  // Before the fix each chunk's 64 KiB answer was a fresh string every step. What remains
  // is small: the callbacks and the list they are parked in (288 bytes per step here).
  EXPECT_EQ(counted.big, 0u);
  EXPECT_LE(counted.bytes / kSteps, 1024u) << counted.allocations << " allocations";
}

TEST(ShardAllocTest, CompressedPullStepsAllocateNothingBig) {
  const StepAllocations counted = CountSteadyState(AllocJob("topk", true), kWarmup, kSteps);
  EXPECT_EQ(counted.big, 0u);
  EXPECT_LE(counted.bytes / kSteps, 1024u) << counted.allocations << " allocations";
}

TEST(ShardAllocTest, AsyncStepsAllocateNothingBig) {
  for (const char* pull : {"none", "topk"}) {
    SCOPED_TRACE(pull);
    const StepAllocations counted =
        CountSteadyState(AllocJob(pull, false, config::Consistency::ASYNC), kWarmup, kSteps);
    EXPECT_EQ(counted.big, 0u);
    EXPECT_LE(counted.bytes / kSteps, 2048u) << counted.allocations << " allocations";
  }
}

}  // namespace
}  // namespace tamp
