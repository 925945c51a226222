#include "compress/efsign.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compress/error_feedback.h"
#include "compress/internal/codec_testing.h"
#include "compress/registry.h"
#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::ElementsAre;
using ::testing::Each;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMax = std::numeric_limits<float>::max();

std::string Header(uint8_t id, uint8_t version, uint64_t n) {
  std::string header = {'T', 'P', static_cast<char>(id), static_cast<char>(version)};
  header.append(reinterpret_cast<const char*>(&n), 8);
  return header;
}

float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

std::string FloatBytes(float x) { return std::string(reinterpret_cast<const char*>(&x), 4); }

float ScaleOf(const std::string& payload) {
  float scale;
  std::memcpy(&scale, payload.data() + 12, 4);
  return scale;
}

std::vector<float> EncodeDecode(EfSignCodec& codec, const std::vector<float>& input,
                                std::string* payload) {
  EXPECT_TRUE(codec.Encode(input, {}, payload).ok());
  std::vector<float> out(input.size(), 123.0f);  // Decode must overwrite every entry.
  EXPECT_TRUE(codec.Decode(*payload, {}, absl::MakeSpan(out)).ok());
  return out;
}

TEST(EfSignCodecTest, PayloadSizeIs16PlusCeilNOver8) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<size_t> sizes;
  for (size_t n = 1; n <= 130; ++n) sizes.push_back(n);
  for (size_t n : {1000, 1023, 1024, 1025, 65537}) sizes.push_back(n);
  for (size_t n : sizes) {
    std::vector<float> input(n);
    for (float& x : input) x = normal(rng);
    EfSignCodec codec(n);
    std::string payload;
    ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
    const size_t expected = 12 + 4 + (n + 7) / 8;
    EXPECT_EQ(payload.size(), expected) << n;
    EXPECT_EQ(codec.MaxPayloadBytes(), expected) << n;
    EXPECT_EQ(EfSignCodec::PayloadBytes(n), expected) << n;
  }
  EXPECT_EQ(EfSignCodec::PayloadBytes(1), 17u);
  EXPECT_EQ(EfSignCodec::PayloadBytes(9), 18u);
  EXPECT_EQ(EfSignCodec::PayloadBytes(1000), 141u);
}

TEST(EfSignCodecTest, KnownVectorBytesAndDecode) {
  // mean |x| = 10 / 4 = 2.5; values 1 and 3 negative: 0b1010.
  EfSignCodec codec(4);
  std::string payload;
  const std::vector<float> out = EncodeDecode(codec, {1, -2, 3, -4}, &payload);
  EXPECT_EQ(payload, Header(11, 2, 4) + FloatBytes(2.5f) + std::string("\x0a", 1));
  EXPECT_THAT(out, ElementsAre(2.5, -2.5, 2.5, -2.5));
}

TEST(EfSignCodecTest, ScaleIsTheMeanMagnitudeForEveryTailLength) {
  // Integers: every partial sum is exact, so the scale must be float(sum / n) exactly.
  for (size_t n = 1; n <= 200; ++n) {
    std::vector<float> input(n), expected(n);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
      input[i] = static_cast<float>((i % 7) * (i % 2 ? -1 : 1));
      sum += std::fabs(input[i]);
    }
    const float scale = static_cast<float>(sum / n);
    for (size_t i = 0; i < n; ++i) expected[i] = input[i] < 0 ? -scale : scale;
    EfSignCodec codec(n);
    std::string payload;
    ASSERT_EQ(EncodeDecode(codec, input, &payload), expected) << n;
    ASSERT_EQ(ScaleOf(payload), scale) << n;
  }
}

TEST(EfSignCodecTest, ScaleOfRandomDataIsWithinThreeUlpOfTheExactMean) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (size_t n : {1001, 65536, (1 << 20) + 3}) {
    std::vector<float> input(n);
    long double sum = 0;
    for (float& x : input) {
      x = normal(rng);
      sum += std::fabs(static_cast<long double>(x));
    }
    const float exact = static_cast<float>(sum / n);
    EfSignCodec codec(n);
    std::string payload;
    ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
    const float ulp = std::nextafter(exact, kInf) - exact;
    EXPECT_LE(std::fabs(ScaleOf(payload) - exact), 3 * ulp) << n;
  }
}

// kMax + kMax overflows fp32; the double-only slow path gives the finite mean.
// The summation order: per 8192-value segment, then the segments pairwise
// (compress/internal/segments.h). x[0] = 1e16 (lane 0, ulp 2); lane 0 of every block of
// segments 1 and 2 holds 1: 128 per segment, which survive as (D + 128) + 128. One chain
// over the whole chunk (version 1) absorbs every one (D + 1 is a tie, to the even D).
TEST(EfSignCodecTest, MagnitudeSumIsPerSegmentThenPairwise) {
  std::vector<float> x(3 * 8192, 0.0f);
  x[0] = 1e16f;
  for (size_t i = 8192; i < x.size(); i += 64) x[i] = -1.0f;
  EXPECT_EQ(EfSignCodec::MagnitudeSum(x), static_cast<double>(1e16f) + 256.0);
  // Where an fp32 pair overflows, the double-only fallback (the ones vanish next to 2^129).
  std::vector<float> huge(3 * 8192, 0.0f);
  huge[0] = kMax;
  huge[16] = kMax;  // Same lane and block: the fp32 pair overflows.
  for (size_t i = 8192; i < huge.size(); i += 64) huge[i] = 1.0f;
  EXPECT_EQ(EfSignCodec::MagnitudeSum(huge), 2 * static_cast<double>(kMax));
}

TEST(EfSignCodecTest, HugeValuesDoNotOverflowTheScale) {
  EfSignCodec codec(3);
  std::string payload;
  EXPECT_THAT(EncodeDecode(codec, {kMax, -kMax, kMax}, &payload), ElementsAre(kMax, -kMax, kMax));
  // Values 0 and 16 share a lane of the first block: 0.75 kMax twice overflows there.
  std::vector<float> input(100, 1.0f);
  input[0] = input[16] = -0.75f * kMax;
  EfSignCodec big(100);
  ASSERT_TRUE(big.Encode(input, {}, &payload).ok());
  EXPECT_EQ(ScaleOf(payload), static_cast<float>((1.5 * kMax + 98) / 100));
}

TEST(EfSignCodecTest, InfinityMakesTheScaleInfiniteAndNaNMakesItNaN) {
  EfSignCodec codec(4);
  std::string payload;
  EXPECT_THAT(EncodeDecode(codec, {1, -kInf, 2, -3}, &payload),
              ElementsAre(kInf, -kInf, kInf, -kInf));
  EXPECT_EQ(ScaleOf(payload), kInf);

  std::vector<float> out = EncodeDecode(codec, {1, kNaN, 2, -3}, &payload);
  EXPECT_TRUE(std::isnan(ScaleOf(payload)));
  EXPECT_FALSE(std::signbit(ScaleOf(payload)));
  EXPECT_EQ(payload.substr(16), std::string("\x08", 1));  // NaN packs as +.
  for (float v : out) EXPECT_TRUE(std::isnan(v));

  // Whatever NaN comes in, the canonical quiet NaN goes out, sign bit clear (so it decodes).
  out = EncodeDecode(codec, {kInf, FromBits(0xffc12345), -kInf, 1}, &payload);
  EXPECT_EQ(payload.substr(12, 4), std::string("\x00\x00\xc0\x7f", 4));
  for (float v : out) EXPECT_TRUE(std::isnan(v));
}

TEST(EfSignCodecTest, ZerosDecodeToZero) {
  EfSignCodec codec(9);
  std::string payload;
  const std::vector<float> out =
      EncodeDecode(codec, {0, -0.0f, 0, 0, 0, 0, 0, 0, -0.0f}, &payload);
  EXPECT_EQ(ScaleOf(payload), 0.0f);
  EXPECT_EQ(payload.substr(16), std::string("\x00\x00", 2));  // -0 counts as +.
  EXPECT_THAT(out, Each(0.0f));
}

TEST(EfSignCodecTest, SingleElementChunk) {
  EfSignCodec codec(1);
  std::string payload;
  EXPECT_THAT(EncodeDecode(codec, {-0.75f}, &payload), ElementsAre(-0.75f));
  EXPECT_EQ(payload, Header(11, 2, 1) + FloatBytes(0.75f) + std::string("\x01", 1));
}

TEST(EfSignCodecTest, DecodeAddAndMeanAggregation) {
  EfSignCodec codec(3);
  std::string a, b;
  ASSERT_TRUE(codec.Encode(std::vector<float>{2, -4, 6}, {}, &a).ok());   // scale 4
  ASSERT_TRUE(codec.Encode(std::vector<float>{-1, -1, 1}, {}, &b).ok());  // scale 1
  std::vector<float> accumulator = {1, 1, 1};
  ASSERT_TRUE(codec.DecodeAdd(a, {}, absl::MakeSpan(accumulator)).ok());
  ASSERT_TRUE(codec.DecodeAdd(b, {}, absl::MakeSpan(accumulator)).ok());
  EXPECT_THAT(accumulator, ElementsAre(4, -4, 6));
  codec.FinishAggregate(2, absl::MakeSpan(accumulator));
  EXPECT_THAT(accumulator, ElementsAre(2, -2, 3));
}

// EF-signSGD by hand: residual = c - scale * sign(c).
TEST(EfSignCodecTest, WithResidualErrorFeedback) {
  config::ErrorFeedback spec;
  spec.set_kind(config::ErrorFeedback::RESIDUAL);
  auto memory = ErrorFeedback::Create(spec, 2);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EfSignCodec codec(2);
  std::string payload;
  std::vector<float> out(2);
  // c = {1, -3}: scale 2, sent {2, -2}, residual {-1, -1}.
  ASSERT_TRUE((*memory)->Compress(codec, std::vector<float>{1, -3}, {}, &payload).ok());
  ASSERT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(2, -2));
  EXPECT_THAT((*memory)->residual(), ElementsAre(-1, -1));
  // c = {0, -4}: 0 counts as +; scale 2, sent {2, -2}, residual {-2, -2}.
  ASSERT_TRUE((*memory)->Compress(codec, std::vector<float>{1, -3}, {}, &payload).ok());
  ASSERT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(2, -2));
  EXPECT_THAT((*memory)->residual(), ElementsAre(-2, -2));
  // c = {-1, -5}: scale 3, sent {-3, -3}, residual {2, -2}.
  ASSERT_TRUE((*memory)->Compress(codec, std::vector<float>{1, -3}, {}, &payload).ok());
  ASSERT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(-3, -3));
  EXPECT_THAT((*memory)->residual(), ElementsAre(2, -2));
}

TEST(EfSignCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  EfSignCodec codec(10);  // Body: 4 scale bytes, 2 sign bytes, 6 padding bits.
  const std::string signs("\x0a\x01", 2);
  const std::string good = Header(11, 2, 10) + FloatBytes(0.5f) + signs;
  std::vector<float> out(10);
  ASSERT_TRUE(codec.Decode(good, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(0.5, -0.5, 0.5, -0.5, 0.5, 0.5, 0.5, 0.5, -0.5, 0.5));

  struct Case {
    std::string payload;
    std::string message;
  };
  const std::vector<Case> cases = {
      {good.substr(0, 17), "efsign payload body is 5 bytes, expected 6"},
      {good + "x", "efsign payload body is 7 bytes, expected 6"},
      {good.substr(0, 12), "efsign payload body is 0 bytes, expected 6"},
      {Header(11, 2, 10) + FloatBytes(-0.5f) + signs,
       "efsign scale 0xbf000000 (-0.5) has its sign bit set"},
      {Header(11, 2, 10) + FloatBytes(-0.0f) + signs,
       "efsign scale 0x80000000 (-0) has its sign bit set"},
      {Header(11, 2, 10) + FloatBytes(-kInf) + signs,
       "efsign scale 0xff800000 (-inf) has its sign bit set"},
      {Header(11, 2, 10) + FloatBytes(-kNaN) + signs,
       "efsign scale 0xffc00000 (nan) has its sign bit set"},
      {Header(11, 2, 10) + FloatBytes(0.5f) + std::string("\x0a\x41", 2),
       "efsign sign padding bits are not zero"},
      {Header(10, 1, 10) + FloatBytes(0.5f) + signs,
       "payload is for codec 10 (signsgd), expected 11 (efsign)"},
      {Header(11, 2, 11) + FloatBytes(0.5f) + signs,
       "element count 11 does not match chunk size 10"},
  };
  for (const Case& c : cases) codec_testing::ExpectRejected(codec, c.payload, c.message);
}

TEST(EfSignCodecTest, RegistryBuildsIt) {
  config::Codec spec;
  spec.set_name("efsign");
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(spec, 1000);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ((*codec)->id(), CodecId::kEfSign);
  EXPECT_EQ((*codec)->MaxPayloadBytes(), 141u);
  spec.set_ratio(0.5);
  EXPECT_EQ(ValidateCodecSpec(spec, "push").message(),
            "push.ratio: codec 'efsign' takes no parameter 'ratio'");
}

}  // namespace
}  // namespace tamp::compress
