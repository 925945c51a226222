#include "compress/topk.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "compress/internal/codec_testing.h"
#include "compress/sparse.h"
#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

config::Codec Ratio(double ratio) {
  config::Codec spec;
  spec.set_name("topk");
  spec.set_ratio(ratio);
  return spec;
}

config::Codec Count(uint64_t count) {
  config::Codec spec;
  spec.set_name("topk");
  spec.set_count(count);
  return spec;
}

// b recomputed independently of the codec: the smallest b >= 1 with 2^b >= n.
int ReferenceIndexBits(size_t n) {
  int b = 1;
  while ((uint64_t{1} << b) < n) ++b;
  return b;
}

// Builds a payload by hand, for decoder tests.
std::string MakePayload(size_t n, const std::vector<uint64_t>& indices,
                        const std::vector<float>& values) {
  std::string payload;
  AppendHeader(CodecId::kTopK, TopKCodec::kVersion, n, &payload);
  BitWriter writer(&payload);
  for (uint64_t index : indices) writer.Write(index, ReferenceIndexBits(n));
  writer.Finish();
  payload.append(reinterpret_cast<const char*>(values.data()), 4 * values.size());
  return payload;
}

// The indices a payload carries, read back with the wire format alone.
std::vector<uint64_t> SentIndices(const std::string& payload, size_t n, size_t k) {
  BitReader reader(absl::string_view(payload).substr(kHeaderBytes));
  std::vector<uint64_t> indices(k);
  for (uint64_t& index : indices) EXPECT_TRUE(reader.Read(ReferenceIndexBits(n), &index).ok());
  return indices;
}

// Brute force: sort by (|x| descending, index ascending), keep k, sort by index.
std::vector<uint64_t> ReferenceTopK(const std::vector<float>& x, size_t k) {
  std::vector<uint64_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint64_t a, uint64_t b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<float> EncodeDecode(TopKCodec& codec, const std::vector<float>& input,
                                std::string* payload) {
  EXPECT_TRUE(codec.Encode(input, {}, payload).ok());
  std::vector<float> out(input.size(), 123.0f);  // Decode must overwrite every entry.
  EXPECT_TRUE(codec.Decode(*payload, {}, absl::MakeSpan(out)).ok());
  return out;
}

TEST(TopKCodecTest, EntriesKeptFromRatioRoundsToNearestWithinOneToN) {
  EXPECT_EQ(TopKCodec::EntriesKept(Ratio(0.07), 100), 7u);   // 0.07 * 100 = 7.000000000000001
  EXPECT_EQ(TopKCodec::EntriesKept(Ratio(0.29), 100), 29u);  // 0.29 * 100 = 28.999999999999996
  EXPECT_EQ(TopKCodec::EntriesKept(Ratio(0.01), 1000), 10u);
  EXPECT_EQ(TopKCodec::EntriesKept(Ratio(0.5), 5), 3u);     // 2.5 rounds away from zero.
  EXPECT_EQ(TopKCodec::EntriesKept(Ratio(0.001), 10), 1u);  // At least one.
  EXPECT_EQ(TopKCodec::EntriesKept(Ratio(1.0), 7), 7u);
  EXPECT_EQ(TopKCodec::EntriesKept(Ratio(0.5), 1), 1u);
}

TEST(TopKCodecTest, EntriesKeptFromCountIsCappedAtN) {
  EXPECT_EQ(TopKCodec::EntriesKept(Count(5), 10), 5u);
  EXPECT_EQ(TopKCodec::EntriesKept(Count(50), 10), 10u);
  EXPECT_EQ(TopKCodec::EntriesKept(Count(1), 1), 1u);
}

TEST(TopKCodecTest, IndexBitsIsCeilLog2WithAMinimumOfOne) {
  EXPECT_EQ(TopKCodec::IndexBits(1), 1);
  EXPECT_EQ(TopKCodec::IndexBits(2), 1);
  EXPECT_EQ(TopKCodec::IndexBits(3), 2);
  EXPECT_EQ(TopKCodec::IndexBits(4), 2);
  EXPECT_EQ(TopKCodec::IndexBits(5), 3);
  EXPECT_EQ(TopKCodec::IndexBits(1024), 10);
  EXPECT_EQ(TopKCodec::IndexBits(1025), 11);
  EXPECT_EQ(TopKCodec::IndexBits(size_t{1} << 32), 32);
  EXPECT_EQ(TopKCodec::IndexBits((size_t{1} << 32) + 1), 33);
}

TEST(TopKCodecTest, PayloadSizeMatchesTheFormulaExactly) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (size_t n : {1, 2, 3, 5, 7, 8, 9, 31, 33, 100, 1000, 4097}) {
    std::vector<float> input(n);
    for (float& x : input) x = normal(rng);
    for (size_t k : {size_t{1}, size_t{2}, n / 3, n - 1, n}) {
      if (k < 1 || k > n) continue;
      const size_t b = ReferenceIndexBits(n);
      const size_t expected = 12 + (k * b + 7) / 8 + 4 * k;
      TopKCodec codec(n, k);
      std::string payload;
      ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
      EXPECT_EQ(payload.size(), expected) << "n=" << n << " k=" << k;
      EXPECT_EQ(codec.MaxPayloadBytes(), expected) << "n=" << n << " k=" << k;
      EXPECT_EQ(TopKCodec::PayloadBytes(n, k), expected) << "n=" << n << " k=" << k;
    }
  }
  // Two spot values worked by hand: n=1000 (b=10), k=10: 12 + 13 + 40.
  EXPECT_EQ(TopKCodec::PayloadBytes(1000, 10), 65u);
  // n=1 (b=1), k=1: 12 + 1 + 4.
  EXPECT_EQ(TopKCodec::PayloadBytes(1, 1), 17u);
}

TEST(TopKCodecTest, PicksExactlyTheKLargestMagnitudesOnRandomData) {
  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  for (size_t n : {1, 2, 17, 1000, 65537}) {
    std::vector<float> input(n);
    for (float& x : input) x = normal(rng);
    for (size_t k : {size_t{1}, (n + 9) / 10, (n + 1) / 2, n}) {
      TopKCodec codec(n, k);
      std::string payload;
      const std::vector<float> out = EncodeDecode(codec, input, &payload);
      const std::vector<uint64_t> expected = ReferenceTopK(input, k);
      ASSERT_EQ(SentIndices(payload, n, k), expected) << "n=" << n << " k=" << k;
      std::vector<float> dense(n, 0.0f);
      for (uint64_t i : expected) dense[i] = input[i];
      ASSERT_EQ(out, dense) << "n=" << n << " k=" << k;
    }
  }
}

TEST(TopKCodecTest, TiesGoToTheLowestIndices) {
  const std::vector<float> input = {1, -3, 3, 2, 3, -3, 0};
  std::string payload;
  TopKCodec two(input.size(), 2);
  EXPECT_THAT(EncodeDecode(two, input, &payload), ElementsAre(0, -3, 3, 0, 0, 0, 0));
  TopKCodec three(input.size(), 3);
  EXPECT_THAT(EncodeDecode(three, input, &payload), ElementsAre(0, -3, 3, 0, 3, 0, 0));
  TopKCodec five(input.size(), 5);
  EXPECT_THAT(EncodeDecode(five, input, &payload), ElementsAre(0, -3, 3, 2, 3, -3, 0));

  const std::vector<float> zeros = {0, -0.0f, 0, 0, 0};
  TopKCodec zero_codec(zeros.size(), 2);
  ASSERT_TRUE(zero_codec.Encode(zeros, {}, &payload).ok());
  EXPECT_THAT(SentIndices(payload, zeros.size(), 2), ElementsAre(0, 1));
}

TEST(TopKCodecTest, NaNCountsAsInfiniteMagnitudeAndIsSent) {
  const std::vector<float> input = {1, -kInf, 5, kNaN, -7, -kNaN};
  std::string payload;

  TopKCodec one(input.size(), 1);
  ASSERT_TRUE(one.Encode(input, {}, &payload).ok());
  EXPECT_THAT(SentIndices(payload, input.size(), 1), ElementsAre(1));  // Tie: lower index.

  TopKCodec three(input.size(), 3);
  const std::vector<float> out = EncodeDecode(three, input, &payload);
  EXPECT_THAT(SentIndices(payload, input.size(), 3), ElementsAre(1, 3, 5));
  EXPECT_EQ(out[1], -kInf);
  EXPECT_TRUE(std::isnan(out[3]));
  // Every NaN travels as the canonical 0x7fc00000 (compress/wire_format.h), sign dropped.
  EXPECT_EQ(Bits(out[3]), 0x7fc00000u);
  EXPECT_EQ(Bits(out[5]), 0x7fc00000u);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[4], 0.0f);
}

TEST(TopKCodecTest, SingleElementChunk) {
  TopKCodec codec(1, 1);
  std::string payload;
  EXPECT_THAT(EncodeDecode(codec, {-2.5f}, &payload), ElementsAre(-2.5f));
  EXPECT_EQ(payload.size(), 17u);
}

TEST(TopKCodecTest, DecodeAddScatterAddsAndAggregatesToTheMean) {
  TopKCodec codec(5, 2);
  std::string a, b;
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, 9, 0, -8, 2}, {}, &a).ok());
  ASSERT_TRUE(codec.Encode(std::vector<float>{0, 3, 0, 0, -4}, {}, &b).ok());
  std::vector<float> accumulator = {1, 1, 1, 1, 1};
  ASSERT_TRUE(codec.DecodeAdd(a, {}, absl::MakeSpan(accumulator)).ok());
  ASSERT_TRUE(codec.DecodeAdd(b, {}, absl::MakeSpan(accumulator)).ok());
  EXPECT_THAT(accumulator, ElementsAre(1, 13, 1, -7, -3));
  codec.FinishAggregate(2, absl::MakeSpan(accumulator));
  EXPECT_THAT(accumulator, ElementsAre(0.5f, 6.5f, 0.5f, -3.5f, -1.5f));
}

TEST(TopKCodecTest, HandBuiltPayloadDecodes) {
  TopKCodec codec(5, 2);  // b = 3: indices 1 and 4 pack into 0b100'001.
  const std::string payload = MakePayload(5, {1, 4}, {2.0f, -1.0f});
  EXPECT_EQ(payload.substr(12, 1), "\x21");
  std::vector<float> out(5, 9.0f);
  ASSERT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(0, 2, 0, 0, -1));
}

TEST(TopKCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  TopKCodec codec(5, 2);  // Body: 1 index byte + 8 value bytes.
  const std::string good = MakePayload(5, {1, 4}, {2.0f, -1.0f});
  std::string padding = good;
  padding[12] |= 0x40;  // Bit 6 is past the two 3-bit indices.
  std::string other_codec = good;
  other_codec[2] = static_cast<char>(CodecId::kNone);
  struct Case {
    std::string payload;
    std::string message;
  };
  const std::vector<Case> cases = {
      {good.substr(0, good.size() - 1),
       "topk payload body is 8 bytes, expected 9 (k = 2, 3 bits per index)"},
      {good + "x", "topk payload body is 10 bytes, expected 9 (k = 2, 3 bits per index)"},
      {good.substr(0, 12), "topk payload body is 0 bytes, expected 9 (k = 2, 3 bits per index)"},
      {good.substr(0, 3), "payload truncated: 3 bytes, header needs 12"},
      {MakePayload(5, {4, 1}, {2, -1}),
       "topk indices not strictly increasing: entry 1 is 1 after 4"},
      {MakePayload(5, {3, 3}, {2, -1}),
       "topk indices not strictly increasing: entry 1 is 3 after 3"},
      {MakePayload(5, {1, 6}, {2, -1}), "topk index 6 (entry 1) is out of range for 5 elements"},
      {padding, "topk index padding bits are not zero"},
      {other_codec, "payload is for codec 0 (none), expected 1 (topk)"},
      {MakePayload(6, {1, 4}, {2, -1}), "element count 6 does not match chunk size 5"},
  };
  for (const Case& c : cases) codec_testing::ExpectRejected(codec, c.payload, c.message);
}

TEST(TopKCodecTest, ValidateSpecNamesTheField) {
  EXPECT_TRUE(TopKCodec::ValidateSpec(Ratio(0.1), "push").ok());
  EXPECT_TRUE(TopKCodec::ValidateSpec(Count(3), "push").ok());
  EXPECT_EQ(TopKCodec::ValidateSpec(Ratio(0), "push").message(),
            "push.ratio: must be in (0, 1], got 0");
  EXPECT_EQ(TopKCodec::ValidateSpec(Ratio(1.5), "push").message(),
            "push.ratio: must be in (0, 1], got 1.5");
  EXPECT_EQ(TopKCodec::ValidateSpec(Ratio(kNaN), "push").message(),
            "push.ratio: must be in (0, 1], got nan");
  EXPECT_EQ(TopKCodec::ValidateSpec(Count(0), "push").message(), "push.count: must be >= 1, got 0");
  config::Codec both = Ratio(0.5);
  both.set_count(3);
  EXPECT_EQ(TopKCodec::ValidateSpec(both, "push").message(),
            "push: codec 'topk' needs exactly one of 'ratio' and 'count', got both");
  config::Codec neither;
  neither.set_name("topk");
  EXPECT_EQ(TopKCodec::ValidateSpec(neither, "push").message(),
            "push: codec 'topk' needs exactly one of 'ratio' and 'count', got neither");
}

// fp16_values: same selection and index stream, values as fp16 (compress/sparse.h).
TEST(TopKCodecTest, Fp16ValuesKeepTheSelectionAndHalveTheValueBytes) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  for (size_t n : {1, 2, 7, 100, 1000, 4097}) {
    std::vector<float> input(n);
    for (float& x : input) x = 100 * normal(rng);
    input[n / 2] = 1e6f;  // Beyond the fp16 range: saturates to 65504.
    for (size_t k : {size_t{1}, (n + 2) / 3, n}) {
      TopKCodec fp32(n, k);
      TopKCodec fp16(n, k, ValueFormat::kFp16);
      const size_t b = ReferenceIndexBits(n);
      EXPECT_EQ(fp16.MaxPayloadBytes(), 12 + (k * b + 7) / 8 + 2 * k) << n << " " << k;
      EXPECT_EQ(TopKCodec::PayloadBytes(n, k, ValueFormat::kFp16), fp16.MaxPayloadBytes());
      std::string a, h;
      const std::vector<float> exact = EncodeDecode(fp32, input, &a);
      const std::vector<float> rounded = EncodeDecode(fp16, input, &h);
      ASSERT_EQ(h.size(), fp16.MaxPayloadBytes());
      // The header and index stream are identical; only the value width differs.
      const size_t index_end = 12 + (k * b + 7) / 8;
      EXPECT_EQ(a.substr(0, index_end), h.substr(0, index_end));
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(rounded[i], HalfToFloat(FloatToHalf(exact[i]))) << i;
      }
    }
  }
  TopKCodec codec(3, 1, ValueFormat::kFp16);
  std::string payload;
  EXPECT_THAT(EncodeDecode(codec, {1, -1e6f, 2}, &payload), ElementsAre(0, -65504.0f, 0));
  std::vector<float> out = {7, 7, 7};
  EXPECT_EQ(codec.Decode(payload.substr(0, payload.size() - 1), {}, absl::MakeSpan(out)).message(),
            "topk payload body is 2 bytes, expected 3 (k = 1, 2 bits per index)");
  EXPECT_THAT(out, ElementsAre(7, 7, 7));
}

TEST(TopKCodecTest, CreateReadsFp16Values) {
  config::Codec spec = Count(2);
  spec.set_fp16_values(true);
  EXPECT_TRUE(TopKCodec::ValidateSpec(spec, "push").ok());
  std::unique_ptr<Codec> codec = TopKCodec::Create(spec, 10);
  EXPECT_EQ(codec->MaxPayloadBytes(), 12u + 1 + 4);  // b = 4: ceil(8 / 8) index bytes.
  EXPECT_EQ(static_cast<TopKCodec&>(*codec).value_format(), ValueFormat::kFp16);
}

TEST(TopKCodecTest, LargeChunksMatchTheReference) {
  // Large enough for the vectorised passes and every radix level to matter.
  std::mt19937 rng(23);
  std::normal_distribution<float> normal;
  const size_t n = (size_t{1} << 18) + 3;
  std::vector<float> input(n);
  for (float& x : input) x = normal(rng);
  for (size_t i = 0; i < n; i += 1000) input[i] = input[i + 1];  // Ties.
  for (size_t k : {size_t{1}, n / 1000, n / 100, n / 3}) {
    TopKCodec codec(n, k);
    std::string payload;
    ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
    ASSERT_EQ(SentIndices(payload, n, k), ReferenceTopK(input, k)) << k;
  }
}

// The selection is found from a sampled floor (compress/sampled_select.h): on gradient-like
// data the sample decides it without the exact fallback, and the key that draws the sample
// never changes the payload.
TEST(TopKCodecTest, SampledFloorFindsTheSelectionAndTheKeyDoesNotMatter) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const size_t n = size_t{1} << 18;
  const size_t k = n / 100;
  TopKCodec codec(n, k);
  std::vector<float> input(n);
  for (uint64_t step = 0; step < 10; ++step) {
    for (float& x : input) x = normal(rng) * (1 + step);
    std::string payload, other_key;
    ASSERT_TRUE(codec.Encode(input, {.seed = 1, .step = step}, &payload).ok());
    ASSERT_TRUE(codec.Encode(input, {.seed = 2, .step = step, .worker = 3}, &other_key).ok());
    ASSERT_TRUE(payload == other_key) << step;
    ASSERT_EQ(SentIndices(payload, n, k), ReferenceTopK(input, k)) << step;
  }
  EXPECT_EQ(codec.stats().selections, 20u);
  EXPECT_GE(codec.stats().sampled, 19u);  // A miss has a chance of about 0.1% per encode.

  // Mostly zeros: the sampled floor is 0, so the exact select over the chunk decides.
  std::fill(input.begin(), input.end(), 0.0f);
  for (size_t i = 0; i < k / 2; ++i) input[37 * i] = 1.0f + i;
  const uint64_t fallbacks = codec.stats().exact_fallbacks;
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, {.seed = 1}, &payload).ok());
  EXPECT_EQ(SentIndices(payload, n, k), ReferenceTopK(input, k));
  EXPECT_EQ(codec.stats().exact_fallbacks, fallbacks + 1);
}

}  // namespace
}  // namespace tamp::compress
