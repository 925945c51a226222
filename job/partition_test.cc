#include "job/partition.h"

#include <numeric>

#include "gtest/gtest.h"

namespace tamp {
namespace {

TEST(PartitionTest, SmallTensorsStayWhole) {
  auto partition = PartitionTensors({10, 20, 30}, 1 << 20, 2);
  ASSERT_TRUE(partition.ok()) << partition.status();
  ASSERT_EQ(partition->chunks.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(partition->chunks[i].id, i);
    EXPECT_EQ(partition->chunks[i].tensor, i);
    EXPECT_EQ(partition->chunks[i].offset, 0u);
  }
  // Largest first: 30 -> shard 0, 20 -> shard 1, 10 -> shard 1 (lighter).
  EXPECT_EQ(partition->chunks[2].shard, 0u);
  EXPECT_EQ(partition->chunks[1].shard, 1u);
  EXPECT_EQ(partition->chunks[0].shard, 1u);
  EXPECT_EQ(partition->shard_bytes, (std::vector<uint64_t>{120, 120}));
}

TEST(PartitionTest, LargeTensorSplitsIntoNearEqualContiguousChunks) {
  // 10 elements, at most 3 per chunk -> 4 chunks of 3,3,2,2.
  auto partition = PartitionTensors({10}, 12, 3);
  ASSERT_TRUE(partition.ok());
  ASSERT_EQ(partition->chunks.size(), 4u);
  uint64_t expected_offset = 0;
  std::vector<uint64_t> lengths;
  for (const Chunk& chunk : partition->chunks) {
    EXPECT_EQ(chunk.offset, expected_offset);
    expected_offset += chunk.length;
    lengths.push_back(chunk.length);
  }
  EXPECT_EQ(expected_offset, 10u);
  EXPECT_EQ(lengths, (std::vector<uint64_t>{3, 3, 2, 2}));
  // 3 -> s0, 3 -> s1, 2 -> s2, 2 -> s2? no: s2 has 8 bytes, s0/s1 12 -> s2 again.
  EXPECT_EQ(partition->shard_bytes, (std::vector<uint64_t>{12, 12, 16}));
}

TEST(PartitionTest, MlpLayoutIsBalancedAcrossShards) {
  // 784-1024-1024-10 with 1 MiB chunks over 3 shards.
  std::vector<uint64_t> sizes = {1024 * 784, 1024, 1024 * 1024, 1024, 10 * 1024, 10};
  auto partition = PartitionTensors(sizes, 1 << 20, 3);
  ASSERT_TRUE(partition.ok());
  const uint64_t total = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}) * 4;
  uint64_t sum = 0, heaviest = 0;
  for (uint64_t bytes : partition->shard_bytes) {
    sum += bytes;
    heaviest = std::max(heaviest, bytes);
  }
  EXPECT_EQ(sum, total);
  // No shard carries more than its share plus one chunk.
  EXPECT_LE(heaviest, total / 3 + (1 << 20));
}

TEST(PartitionTest, IsDeterministic) {
  std::vector<uint64_t> sizes = {1000, 7, 333, 4096, 5};
  auto a = PartitionTensors(sizes, 1024, 4);
  auto b = PartitionTensors(sizes, 1024, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->chunks.size(), b->chunks.size());
  for (size_t i = 0; i < a->chunks.size(); ++i) EXPECT_EQ(a->chunks[i].shard, b->chunks[i].shard);
}

TEST(PartitionTest, RejectsBadInput) {
  EXPECT_EQ(PartitionTensors({10}, 1024, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionTensors({10}, 3, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionTensors({10, 0}, 1024, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tamp
