#include "compress/randomk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compress/internal/codec_testing.h"
#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<size_t> Positions(const RandomKey& key, size_t n, size_t k) {
  const absl::Span<const size_t> positions = RandomKCodec::Positions(key, n, k);
  return std::vector<size_t>(positions.begin(), positions.end());
}

// Distinct, ascending and in range.
void ExpectValidPositions(const std::vector<size_t>& positions, size_t n, size_t k) {
  ASSERT_EQ(positions.size(), k);
  for (size_t j = 0; j < k; ++j) {
    ASSERT_LT(positions[j], n);
    if (j > 0) {
      ASSERT_LT(positions[j - 1], positions[j]);
    }
  }
}

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}

TEST(RandomKPositionsTest, DistinctSortedInRangeForManySizes) {
  for (size_t n : {1, 2, 3, 7, 64, 65, 1000, 4099, 100000}) {
    for (size_t k : {size_t{1}, size_t{2}, n / 1500, n / 100, n / 2, n - 1, n}) {
      if (k < 1 || k > n) continue;
      for (uint64_t step = 0; step < 3; ++step) {
        const RandomKey key{.seed = 5, .step = step, .chunk = 1, .worker = 0};
        const std::vector<size_t> positions = Positions(key, n, k);
        ExpectValidPositions(positions, n, k);
        // Both membership structures give the same positions.
        std::vector<size_t> bitmap, hashed;
        RandomKCodec::DrawPositions(key, n, k, RandomKCodec::Membership::kBitmap, &bitmap);
        RandomKCodec::DrawPositions(key, n, k, RandomKCodec::Membership::kHashSet, &hashed);
        ASSERT_EQ(bitmap, positions) << n << " " << k;
        ASSERT_EQ(hashed, positions) << n << " " << k;
      }
    }
  }
  EXPECT_THAT(Positions({}, 1, 1), ElementsAre(0));
  EXPECT_THAT(Positions({.step = 9}, 5, 5), ElementsAre(0, 1, 2, 3, 4));
}

TEST(RandomKPositionsTest, SharedAcrossWorkersAndDifferentAcrossSteps) {
  const size_t n = 10007, k = 100;
  const std::vector<size_t> worker0 =
      Positions({.seed = 1, .step = 7, .chunk = 3, .worker = 0}, n, k);
  const std::vector<size_t> worker9 =
      Positions({.seed = 1, .step = 7, .chunk = 3, .worker = 9}, n, k);
  const std::vector<size_t> shared =
      Positions({.seed = 1, .step = 7, .chunk = 3, .worker = kSharedStream}, n, k);
  EXPECT_EQ(worker0, worker9);
  EXPECT_EQ(worker0, shared);
  EXPECT_NE(worker0, Positions({.seed = 1, .step = 8, .chunk = 3, .worker = 0}, n, k));
  EXPECT_NE(worker0, Positions({.seed = 1, .step = 7, .chunk = 4, .worker = 0}, n, k));
  EXPECT_NE(worker0, Positions({.seed = 2, .step = 7, .chunk = 3, .worker = 0}, n, k));
  // Different steps overlap only by chance (about k * k / n = 1 position).
  const std::vector<size_t> next = Positions({.seed = 1, .step = 8, .chunk = 3}, n, k);
  std::vector<size_t> common;
  std::set_intersection(worker0.begin(), worker0.end(), next.begin(), next.end(),
                        std::back_inserter(common));
  EXPECT_LT(common.size(), 10u);
}

TEST(RandomKPositionsTest, EveryPositionIsAboutEquallyLikely) {
  // 2000 steps of k = 10 out of n = 100: each position is picked 200 times on average
  // (binomial sd about 13.4); every count within 5 sd.
  const size_t n = 100, k = 10;
  std::vector<int> counts(n);
  for (uint64_t step = 0; step < 2000; ++step) {
    for (size_t i : Positions({.seed = 3, .step = step}, n, k)) ++counts[i];
  }
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(counts[i], 200, 67) << i;
}

TEST(RandomKCodecTest, PayloadSizeIsExact) {
  for (size_t n : {1, 2, 3, 9, 1000, 65537}) {
    for (size_t k : {size_t{1}, (n + 1) / 2, n}) {
      std::vector<float> input(n, 1.0f);
      for (ValueFormat format : {ValueFormat::kFp32, ValueFormat::kFp16}) {
        RandomKCodec codec(n, k, format);
        const size_t v = format == ValueFormat::kFp16 ? 2 : 4;
        EXPECT_EQ(codec.MaxPayloadBytes(), 12 + v * k);
        std::string payload;
        ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
        EXPECT_EQ(payload.size(), 12 + v * k) << n << " " << k;
      }
    }
  }
  EXPECT_EQ(RandomKCodec::PayloadBytes(10, ValueFormat::kFp32), 52u);
  EXPECT_EQ(RandomKCodec::PayloadBytes(10, ValueFormat::kFp16), 32u);
}

TEST(RandomKCodecTest, SendsTheValuesAtTheSharedPositionsUnscaled) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  const size_t n = 1001, k = 37;
  std::vector<float> input(n);
  for (float& x : input) x = normal(rng);
  input[0] = kNaN;
  input[1] = -kInf;
  input[2] = -0.0f;
  // All of 0, 1, 2 must be among the positions for the specials to be checked: use k = n for
  // that part, and the random part below.
  RandomKCodec codec(n, k);
  const RandomKey encoder{.seed = 4, .step = 2, .chunk = 6, .worker = 1};
  const RandomKey decoder{.seed = 4, .step = 2, .chunk = 6, .worker = 0};
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, encoder, &payload).ok());
  std::vector<float> out(n, 5.0f);
  ASSERT_TRUE(codec.Decode(payload, decoder, absl::MakeSpan(out)).ok());
  const std::vector<size_t> positions = Positions(decoder, n, k);
  for (size_t i = 0, j = 0; i < n; ++i) {
    if (j < k && positions[j] == i) {
      EXPECT_EQ(Bits(out[i]), Bits(input[i])) << i;  // Not scaled by n / k.
      float sent;
      std::memcpy(&sent, payload.data() + 12 + 4 * j, 4);
      EXPECT_EQ(Bits(sent), Bits(input[i])) << i;
      ++j;
    } else {
      EXPECT_EQ(Bits(out[i]), Bits(0.0f)) << i;
    }
  }

  RandomKCodec all(n, n);
  ASSERT_TRUE(all.Encode(input, encoder, &payload).ok());
  ASSERT_TRUE(all.Decode(payload, decoder, absl::MakeSpan(out)).ok());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], -kInf);
  EXPECT_EQ(Bits(out[2]), Bits(-0.0f));
}

TEST(RandomKCodecTest, DecodeAddScatterAddsEveryWorkersValues) {
  const size_t n = 64, k = 8;
  RandomKCodec codec(n, k, ValueFormat::kFp16);
  std::vector<float> a(n, 1.0f), b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<float>(i);
  a[Positions({.step = 1}, n, k)[0]] = 1e6f;  // Saturates to 65504 in fp16.
  std::string pa, pb;
  ASSERT_TRUE(codec.Encode(a, {.step = 1, .worker = 0}, &pa).ok());
  ASSERT_TRUE(codec.Encode(b, {.step = 1, .worker = 1}, &pb).ok());
  std::vector<float> accumulator(n, 0.5f);
  ASSERT_TRUE(codec.DecodeAdd(pa, {.step = 1, .worker = 7}, absl::MakeSpan(accumulator)).ok());
  ASSERT_TRUE(codec.DecodeAdd(pb, {.step = 1, .worker = 7}, absl::MakeSpan(accumulator)).ok());
  const std::vector<size_t> positions = Positions({.step = 1}, n, k);
  for (size_t i = 0, j = 0; i < n; ++i) {
    if (j < k && positions[j] == i) {
      EXPECT_EQ(accumulator[i], 0.5f + (j == 0 ? 65504.0f : 1.0f) + static_cast<float>(i)) << i;
      ++j;
    } else {
      EXPECT_EQ(accumulator[i], 0.5f) << i;
    }
  }
}

TEST(RandomKCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  RandomKCodec codec(5, 2);
  std::string good;
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, 2, 3, 4, 5}, {}, &good).ok());
  std::string other = good;
  other[2] = static_cast<char>(CodecId::kRandomBlock);
  std::string count = good;
  count[4] = 6;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good.substr(0, good.size() - 1),
       "randomk payload body is 7 bytes, expected 8 (k = 2 values)"},
      {good + "xy", "randomk payload body is 10 bytes, expected 8 (k = 2 values)"},
      {good.substr(0, 12), "randomk payload body is 0 bytes, expected 8 (k = 2 values)"},
      {good.substr(0, 5), "payload truncated: 5 bytes, header needs 12"},
      {other, "payload is for codec 7 (randomblock), expected 6 (randomk)"},
      {count, "element count 6 does not match chunk size 5"},
  };
  for (const auto& [payload, message] : cases) {
    codec_testing::ExpectRejected(codec, payload, message);
  }
}

TEST(RandomKCodecTest, ErrorFeedbackIdentityHolds) {
  for (ValueFormat format : {ValueFormat::kFp32, ValueFormat::kFp16}) {
    RandomKCodec codec(1001, 50, format);
    codec_testing::ExpectErrorFeedbackIdentity(codec, 6, 2);
  }
}

TEST(RandomKCodecTest, ValidateSpecNamesTheField) {
  config::Codec spec;
  spec.set_name("randomk");
  EXPECT_EQ(RandomKCodec::ValidateSpec(spec, "push").message(),
            "push: codec 'randomk' needs exactly one of 'ratio' and 'count', got neither");
  spec.set_ratio(0);
  EXPECT_EQ(RandomKCodec::ValidateSpec(spec, "push").message(),
            "push.ratio: must be in (0, 1], got 0");
  spec.set_ratio(0.25);
  EXPECT_TRUE(RandomKCodec::ValidateSpec(spec, "push").ok());
  spec.set_count(3);
  EXPECT_EQ(RandomKCodec::ValidateSpec(spec, "push").message(),
            "push: codec 'randomk' needs exactly one of 'ratio' and 'count', got both");
  spec.clear_ratio();
  spec.set_fp16_values(true);
  std::unique_ptr<Codec> codec = RandomKCodec::Create(spec, 2);
  EXPECT_EQ(codec->id(), CodecId::kRandomK);
  EXPECT_EQ(static_cast<RandomKCodec&>(*codec).k(), 2u);  // min(count, n).
  EXPECT_EQ(codec->MaxPayloadBytes(), 16u);
}

}  // namespace
}  // namespace tamp::compress
