#include "compress/randomblock.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "compress/internal/codec_testing.h"
#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {


constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

size_t K(double ratio, size_t n) {
  return std::clamp<size_t>(static_cast<size_t>(std::llround(ratio * n)), 1, n);
}

config::Codec Spec(double ratio, uint32_t num_blocks = 0) {
  config::Codec spec;
  spec.set_name("randomblock");
  spec.set_ratio(ratio);
  if (num_blocks > 0) spec.set_num_blocks(num_blocks);
  return spec;
}

RandomBlockCodec& AsBlocks(std::unique_ptr<Codec>& codec) {
  return static_cast<RandomBlockCodec&>(*codec);
}

std::vector<size_t> Starts(const RandomBlockCodec& codec, const RandomKey& key) {
  std::vector<size_t> starts;
  codec.BlockStarts(key, &starts);
  return starts;
}

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}

TEST(RandomBlockCodecTest, LayoutFollowsTheFormula) {
  for (size_t n : {1, 2, 3, 7, 10, 99, 1000, 4097, 100003}) {
    for (double ratio : {0.001, 0.01, 0.1, 0.5, 1.0}) {
      for (uint32_t num_blocks : {1u, 2u, 3u, 8u, 1000u}) {
        std::unique_ptr<Codec> codec = RandomBlockCodec::Create(Spec(ratio, num_blocks), n);
        const RandomBlockCodec& blocks = AsBlocks(codec);
        const size_t k = K(ratio, n);
        const size_t b = std::min<size_t>(num_blocks, k);
        const size_t l = k / b;
        ASSERT_EQ(blocks.blocks(), b) << n << " " << ratio << " " << num_blocks;
        ASSERT_EQ(blocks.block_length(), l);
        ASSERT_EQ(blocks.entries_sent(), b * l);
        EXPECT_LE(b * l, k);
        EXPECT_GT(b * l + b, k);
        EXPECT_EQ(codec->MaxPayloadBytes(), 12 + 4 * b * l);
        // Blocks: in their segments, non-overlapping, ascending, exactly l long.
        for (uint64_t step = 0; step < 3; ++step) {
          const std::vector<size_t> starts = Starts(blocks, {.seed = 2, .step = step});
          ASSERT_EQ(starts.size(), b);
          for (size_t s = 0; s < b; ++s) {
            const size_t begin = s * n / b, end = (s + 1) * n / b;
            ASSERT_GE(starts[s], begin);
            ASSERT_LE(starts[s] + l, end) << n << " " << ratio << " " << num_blocks << " " << s;
            if (s > 0) {
              ASSERT_LE(starts[s - 1] + l, starts[s]);
            }
          }
          std::vector<float> input(n, 1.0f);
          std::string payload;
          ASSERT_TRUE(codec->Encode(input, {.seed = 2, .step = step}, &payload).ok());
          ASSERT_EQ(payload.size(), 12 + 4 * b * l);
        }
      }
    }
  }
  // Default num_blocks is 1; by hand: n = 1000, ratio 0.01, 4 blocks: k = 10, L = 2, 8 sent.
  std::unique_ptr<Codec> one = RandomBlockCodec::Create(Spec(0.01), 1000);
  EXPECT_EQ(AsBlocks(one).blocks(), 1u);
  EXPECT_EQ(one->MaxPayloadBytes(), 52u);
  std::unique_ptr<Codec> four = RandomBlockCodec::Create(Spec(0.01, 4), 1000);
  EXPECT_EQ(AsBlocks(four).block_length(), 2u);
  EXPECT_EQ(four->MaxPayloadBytes(), 44u);
  config::Codec fp16 = Spec(0.01, 4);
  fp16.set_fp16_values(true);
  EXPECT_EQ(RandomBlockCodec::Create(fp16, 1000)->MaxPayloadBytes(), 28u);
}

TEST(RandomBlockCodecTest, SharedAcrossWorkersAndMovingAcrossSteps) {
  RandomBlockCodec codec(100000, 1000, 10);
  const std::vector<size_t> worker0 =
      Starts(codec, {.seed = 1, .step = 5, .chunk = 2, .worker = 0});
  EXPECT_EQ(worker0, Starts(codec, {.seed = 1, .step = 5, .chunk = 2, .worker = 3}));
  EXPECT_EQ(worker0, Starts(codec, {.seed = 1, .step = 5, .chunk = 2, .worker = kSharedStream}));
  EXPECT_NE(worker0, Starts(codec, {.seed = 1, .step = 6, .chunk = 2, .worker = 0}));
  EXPECT_NE(worker0, Starts(codec, {.seed = 1, .step = 5, .chunk = 3, .worker = 0}));
  EXPECT_NE(worker0, Starts(codec, {.seed = 9, .step = 5, .chunk = 2, .worker = 0}));
  // Each block start ranges over its whole segment: over many steps, the first block's start
  // takes both low and high values of [0, 10000 - 100].
  size_t low = 0, high = 0;
  for (uint64_t step = 0; step < 200; ++step) {
    const size_t start = Starts(codec, {.step = step})[0];
    low += start < 3000;
    high += start > 6900;
  }
  EXPECT_GT(low, 30u);
  EXPECT_GT(high, 30u);
}

TEST(RandomBlockCodecTest, SendsTheBlocksUnscaledAndDecodesThemInPlace) {
  const size_t n = 1003;
  std::vector<float> input(n);
  for (size_t i = 0; i < n; ++i) input[i] = static_cast<float>(i) - 500.5f;
  input[10] = kNaN;
  input[11] = -kInf;
  input[12] = -0.0f;
  for (ValueFormat format : {ValueFormat::kFp32, ValueFormat::kFp16}) {
    RandomBlockCodec codec(n, 100, 3, format);  // 3 blocks of 33.
    const RandomKey key{.seed = 7, .step = 1, .chunk = 0, .worker = 4};
    std::string payload;
    ASSERT_TRUE(codec.Encode(input, key, &payload).ok());
    std::vector<float> out(n, 9.0f);
    ASSERT_TRUE(codec.Decode(payload, {.seed = 7, .step = 1}, absl::MakeSpan(out)).ok());
    std::vector<bool> kept(n);
    for (size_t start : Starts(codec, key)) {
      for (size_t i = start; i < start + 33; ++i) kept[i] = true;
    }
    for (size_t i = 0; i < n; ++i) {
      const float expected = !kept[i]                       ? 0.0f
                             : format == ValueFormat::kFp32 ? input[i]
                                                            : HalfToFloat(FloatToHalf(input[i]));
      EXPECT_EQ(Bits(out[i]), Bits(expected)) << i;
    }
  }
  // The whole chunk: specials travel bit-exact in fp32.
  RandomBlockCodec all(n, n, 1);
  std::string payload;
  ASSERT_TRUE(all.Encode(input, {}, &payload).ok());
  std::vector<float> out(n);
  ASSERT_TRUE(all.Decode(payload, {}, absl::MakeSpan(out)).ok());
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(Bits(out[i]), Bits(input[i])) << i;
}

TEST(RandomBlockCodecTest, SmallAndOddChunks) {
  for (size_t n : {1, 2, 3, 5}) {
    RandomBlockCodec codec(n, 1, 4);  // num_blocks > k: one block of one.
    EXPECT_EQ(codec.blocks(), 1u);
    EXPECT_EQ(codec.block_length(), 1u);
    std::vector<float> input(n, -3.0f);
    std::string payload;
    ASSERT_TRUE(codec.Encode(input, {.step = n}, &payload).ok());
    EXPECT_EQ(payload.size(), 16u);
    std::vector<float> out(n, 1.0f);
    ASSERT_TRUE(codec.Decode(payload, {.step = n}, absl::MakeSpan(out)).ok());
    EXPECT_EQ(std::count(out.begin(), out.end(), -3.0f), 1);
    EXPECT_EQ(std::count(out.begin(), out.end(), 0.0f), static_cast<long>(n - 1));
  }
  RandomBlockCodec five(5, 5, 2);  // k = 5, B = 2, L = 2: segments [0, 2) and [2, 5).
  std::vector<size_t> starts;
  five.BlockStarts({}, &starts);
  EXPECT_EQ(starts[0], 0u);
  EXPECT_TRUE(starts[1] == 2 || starts[1] == 3) << starts[1];
}

TEST(RandomBlockCodecTest, DecodeAddAddsTheBlocks) {
  RandomBlockCodec codec(40, 8, 2);  // 2 blocks of 4.
  std::vector<float> a(40), b(40, 2.0f);
  for (size_t i = 0; i < 40; ++i) a[i] = static_cast<float>(i);
  std::string pa, pb;
  ASSERT_TRUE(codec.Encode(a, {.step = 3, .worker = 0}, &pa).ok());
  ASSERT_TRUE(codec.Encode(b, {.step = 3, .worker = 1}, &pb).ok());
  std::vector<float> accumulator(40, 1.0f);
  ASSERT_TRUE(codec.DecodeAdd(pa, {.step = 3}, absl::MakeSpan(accumulator)).ok());
  ASSERT_TRUE(codec.DecodeAdd(pb, {.step = 3}, absl::MakeSpan(accumulator)).ok());
  std::vector<float> expected(40, 1.0f);
  for (size_t start : Starts(codec, {.step = 3})) {
    for (size_t i = start; i < start + 4; ++i) expected[i] += static_cast<float>(i) + 2;
  }
  EXPECT_EQ(accumulator, expected);
}

TEST(RandomBlockCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  RandomBlockCodec codec(5, 2, 1);
  std::string good;
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, 2, 3, 4, 5}, {}, &good).ok());
  std::string other = good;
  other[2] = static_cast<char>(CodecId::kRandomK);
  std::string magic = good;
  magic[0] = 'X';
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good.substr(0, good.size() - 1),
       "randomblock payload body is 7 bytes, expected 8 (1 blocks of 2 values)"},
      {good + "x", "randomblock payload body is 9 bytes, expected 8 (1 blocks of 2 values)"},
      {good.substr(0, 12),
       "randomblock payload body is 0 bytes, expected 8 (1 blocks of 2 values)"},
      {other, "payload is for codec 6 (randomk), expected 7 (randomblock)"},
      {magic, "bad payload magic 0x58 0x50, expected 'TP'"},
      {"", "payload truncated: 0 bytes, header needs 12"},
  };
  for (const auto& [payload, message] : cases) {
    codec_testing::ExpectRejected(codec, payload, message);
  }
}

TEST(RandomBlockCodecTest, ErrorFeedbackIdentityHolds) {
  for (ValueFormat format : {ValueFormat::kFp32, ValueFormat::kFp16}) {
    RandomBlockCodec codec(999, 60, 4, format);
    codec_testing::ExpectErrorFeedbackIdentity(codec, 6, 3);
  }
}

TEST(RandomBlockCodecTest, ValidateSpecNamesTheField) {
  config::Codec spec;
  spec.set_name("randomblock");
  EXPECT_EQ(RandomBlockCodec::ValidateSpec(spec, "push").message(),
            "push: codec 'randomblock' needs 'ratio'");
  spec.set_ratio(1.5);
  EXPECT_EQ(RandomBlockCodec::ValidateSpec(spec, "push").message(),
            "push.ratio: must be in (0, 1], got 1.5");
  spec.set_ratio(0.5);
  EXPECT_TRUE(RandomBlockCodec::ValidateSpec(spec, "push").ok());
  spec.set_num_blocks(0);
  EXPECT_EQ(RandomBlockCodec::ValidateSpec(spec, "push").message(),
            "push.num_blocks: must be >= 1, got 0");
  spec.set_num_blocks(16);
  EXPECT_TRUE(RandomBlockCodec::ValidateSpec(spec, "push").ok());
}

}  // namespace
}  // namespace tamp::compress
