#include "compress/terngrad.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/philox.h"
#include "compress/internal/codec_testing.h"
#include "compress/registry.h"
#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using codec_testing::ExpectRejected;
using codec_testing::Key;
using codec_testing::NormalValues;
using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Builds a payload by hand, for decoder tests. Codes: 0, 1 (+1), 2 (-1), 3 (invalid).
std::string MakePayload(size_t n, float scale, const std::vector<uint64_t>& codes) {
  std::string payload;
  AppendHeader(CodecId::kTernGrad, TernGradCodec::kVersion, n, &payload);
  payload.append(reinterpret_cast<const char*>(&scale), 4);
  BitWriter writer(&payload);
  for (uint64_t code : codes) writer.Write(code, 2);
  writer.Finish();
  return payload;
}

float SentScale(const std::string& payload) {
  float scale;
  std::memcpy(&scale, payload.data() + kHeaderBytes, 4);
  return scale;
}

std::vector<float> EncodeDecode(TernGradCodec& codec, const std::vector<float>& input,
                                const RandomKey& key, std::string* payload) {
  EXPECT_TRUE(codec.Encode(input, key, payload).ok());
  std::vector<float> out(input.size(), 123.0f);
  const absl::Status status = codec.Decode(*payload, key, absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

TEST(TernGradCodecTest, PayloadIs16PlusCeilQuarterN) {
  for (size_t n : {1, 2, 3, 4, 5, 7, 8, 9, 1023, 1024, 1025, 4099}) {
    TernGradCodec codec(n);
    std::string payload;
    ASSERT_TRUE(codec.Encode(NormalValues(n, 1), Key(0), &payload).ok());
    const size_t expected = 12 + 4 + (2 * n + 7) / 8;
    EXPECT_EQ(payload.size(), expected) << n;
    EXPECT_EQ(codec.MaxPayloadBytes(), expected) << n;
    EXPECT_EQ(TernGradCodec::PayloadBytes(n), expected) << n;
  }
  EXPECT_EQ(TernGradCodec::PayloadBytes(1000), 266u);
}

TEST(TernGradCodecTest, ScaleIsTheMaxMagnitudeClippedAtTwoAndAHalfSigma) {
  using V = std::vector<float>;
  EXPECT_EQ(TernGradCodec::Scale(V{1, -1, 1, -1}), 1.0f);  // sigma 1: no clipping.
  // Mean 10, variance (9 * 100 + 90^2) / 10 = 900, sigma 30: 100 clips to 75.
  EXPECT_EQ(TernGradCodec::Scale(V{0, 0, 0, 0, 0, 0, 0, 0, 0, 100}), 75.0f);
  EXPECT_EQ(TernGradCodec::Scale(V{3, 3, 3}), 3.0f);  // sigma 0: no clipping.
  EXPECT_EQ(TernGradCodec::Scale(V{-2}), 2.0f);
  EXPECT_EQ(TernGradCodec::Scale(V{0, 0, -0.0f}), 0.0f);
  // A large common offset does not drown sigma (1) in rounding: 1e6 + 1 clips to 2.5.
  EXPECT_EQ(TernGradCodec::Scale(V{1e6f + 1, 1e6f - 1}), 2.5f);
  EXPECT_TRUE(std::isnan(TernGradCodec::Scale(V{1, kNaN, 2})));
  EXPECT_TRUE(std::isnan(TernGradCodec::Scale(V{1, -kInf, 2})));
  // Finite extremes do not overflow the statistics.
  EXPECT_EQ(TernGradCodec::Scale(V{3e38f, -3e38f}), 3e38f);
}

// The summation order (compress/internal/segments.h): 8 lanes per 8192-value segment, the
// segments added pairwise. Lane 0 of segment 0 holds 1e16 (ulp 2); lane 0 of segments 1 and 2
// holds 1024 ones each. Summed per segment first, they survive: (D + 1024) + 1024. One chain
// over the whole chunk (version 2) absorbs every one (D + 1 is a tie, to the even D).
TEST(TernGradCodecTest, MomentsAreSummedPerSegmentThenPairwise) {
  std::vector<float> x(3 * 8192, 0.0f);  // x[0] = 0: the shift.
  x[8] = 1e16f;
  for (size_t i = 8192; i < x.size(); i += 8) x[i] = 1.0f;
  const double d = 1e16f;
  const TernGradCodec::Moments moments = TernGradCodec::ShiftedMoments(x);
  EXPECT_EQ(moments.sum, d + 2048.0);
  EXPECT_EQ(moments.squares, d * d);  // The ones vanish next to 1e32 in any order.
  EXPECT_EQ(moments.max_abs, 1e16f);
}

TEST(TernGradCodecTest, ExactCasesNeedNoRandomness) {
  std::string payload;
  TernGradCodec four(4);
  EXPECT_THAT(EncodeDecode(four, {1, -1, 1, -1}, Key(3), &payload), ElementsAre(1, -1, 1, -1));
  EXPECT_EQ(payload, MakePayload(4, 1.0f, {1, 2, 1, 2}));
  TernGradCodec constant(3);
  EXPECT_THAT(EncodeDecode(constant, {-3, -3, -3}, Key(4), &payload), ElementsAre(-3, -3, -3));
  TernGradCodec one(1);
  EXPECT_THAT(EncodeDecode(one, {0.25f}, Key(5), &payload), ElementsAre(0.25f));
  TernGradCodec zeros(5);
  EXPECT_THAT(EncodeDecode(zeros, {0, 0, -0.0f, 0, 0}, Key(6), &payload),
              ElementsAre(0, 0, 0, 0, 0));
  EXPECT_EQ(payload, MakePayload(5, 0.0f, {0, 0, 0, 0, 0}));
}

TEST(TernGradCodecTest, ValuesAreMinusZeroOrPlusScale) {
  const size_t n = 3001;
  std::vector<float> input = NormalValues(n, 2);
  input[17] = 40;  // An outlier that gets clipped.
  TernGradCodec codec(n);
  std::string payload;
  const std::vector<float> out = EncodeDecode(codec, input, Key(1), &payload);
  const float scale = SentScale(payload);
  EXPECT_EQ(scale, TernGradCodec::Scale(input));
  EXPECT_LT(scale, 40.0f);
  EXPECT_EQ(out[17], scale);  // |x| >= scale: always sent.
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(out[i] == 0 || std::fabs(out[i]) == scale) << i;
    if (out[i] != 0) {
      ASSERT_EQ(std::signbit(out[i]), std::signbit(input[i])) << i;
    }
  }
}

TEST(TernGradCodecTest, UnbiasedForTheClippedValues) {
  const size_t n = 500;
  std::vector<float> input = NormalValues(n, 3);
  input[0] = 9;  // Clipped.
  input[1] = -7;
  TernGradCodec codec(n);
  const int draws = 4000;
  const codec_testing::Moments moments = codec_testing::DecodeMoments(codec, input, draws);
  const double scale = TernGradCodec::Scale(input);
  std::vector<double> target(n), lower(n, 0.0), gap(n);
  double expected_variance = 0, sample_variance = 0;
  for (size_t i = 0; i < n; ++i) {
    target[i] = std::clamp<double>(input[i], -scale, scale);
    gap[i] = input[i] < 0 ? -scale : scale;
    expected_variance += scale * std::fabs(target[i]) - target[i] * target[i];
    sample_variance += moments.variance[i];
  }
  EXPECT_EQ(target[0], scale);
  codec_testing::ExpectUnbiased(moments.mean, target, lower, gap, draws);
  // Var = scale * |c| - c^2 per value.
  EXPECT_NEAR(sample_variance, expected_variance, 0.05 * expected_variance);
}

TEST(TernGradCodecTest, SendsExactlyWhenThe16BitUniformTimesTheScaleIsBelowTheMagnitude) {
  // Pins the version-2 rule: t != 0 iff (PhiloxStream(key).Bits16(i) / 2^16) * scale < |x|
  // in fp32.
  const size_t n = 3001;
  const std::vector<float> input = NormalValues(n, 14);
  TernGradCodec codec(n);
  const RandomKey key = Key(6);
  std::string payload;
  const std::vector<float> out = EncodeDecode(codec, input, key, &payload);
  const float scale = SentScale(payload);
  const PhiloxStream stream(key);
  int sent = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool expected = PhiloxStream::ToUniform16(stream.Bits16(i)) * scale < std::fabs(input[i]);
    ASSERT_EQ(out[i] != 0, expected) << i;
    sent += expected;
  }
  EXPECT_GT(sent, 0);
  EXPECT_LT(sent, static_cast<int>(n));
}

TEST(TernGradCodecTest, SameKeySameBytesOtherKeyOtherRounding) {
  const std::vector<float> input = NormalValues(2000, 4);
  TernGradCodec a(2000), b(2000);
  std::string p1, p2, p3;
  ASSERT_TRUE(a.Encode(input, Key(5), &p1).ok());
  ASSERT_TRUE(b.Encode(input, Key(5), &p2).ok());
  ASSERT_TRUE(a.Encode(input, Key(6), &p3).ok());
  EXPECT_EQ(p1, p2);
  EXPECT_NE(p1, p3);
  EXPECT_EQ(SentScale(p1), SentScale(p3));
}

TEST(TernGradCodecTest, NonFiniteChunkDecodesToNaN) {
  for (float bad : {kNaN, kInf, -kInf}) {
    std::vector<float> input = NormalValues(9, 5);
    input[4] = bad;
    TernGradCodec codec(9);
    std::string payload;
    const std::vector<float> out = EncodeDecode(codec, input, Key(0), &payload);
    EXPECT_TRUE(std::isnan(SentScale(payload)));
    EXPECT_EQ(payload.substr(16), std::string(3, '\0'));
    for (float x : out) EXPECT_TRUE(std::isnan(x));
  }
}

TEST(TernGradCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  // n = 5: scale, then 10 bits of codes in 2 bytes.
  TernGradCodec codec(5);
  const std::string good = MakePayload(5, 2.0f, {1, 2, 0, 1, 2});
  std::vector<float> out(5);
  ASSERT_TRUE(codec.Decode(good, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(2, -2, 0, 2, -2));

  codec_testing::ExpectHeaderAndLengthChecks(codec, good, [](size_t bytes) {
    return absl::StrCat("terngrad payload body is ", bytes, " bytes, expected 6");
  });
  ExpectRejected(codec, MakePayload(5, -1.0f, {1, 2, 0, 1, 2}),
                 "terngrad scale is -1; it must be NaN or finite and >= +0");
  ExpectRejected(codec, MakePayload(5, -0.0f, {0, 0, 0, 0, 0}),
                 "terngrad scale is -0; it must be NaN or finite and >= +0");
  ExpectRejected(codec, MakePayload(5, kInf, {1, 2, 0, 1, 2}),
                 "terngrad scale is inf; it must be NaN or finite and >= +0");
  ExpectRejected(codec, MakePayload(5, 2.0f, {1, 2, 0, 3, 2}),
                 "terngrad payload holds the invalid code 3");
  ExpectRejected(codec, MakePayload(5, kNaN, {0, 0, 0, 0, 1}),
                 "terngrad codes must all be 0 when the scale is nan");
  ExpectRejected(codec, MakePayload(5, 0.0f, {0, 2, 0, 0, 0}),
                 "terngrad codes must all be 0 when the scale is 0");
  std::string padding = good;
  padding.back() |= 0x04;  // Bit 10: past the 5 codes.
  ExpectRejected(codec, padding, "terngrad padding bits are not zero");
  // The code-3 check covers whole 8-byte words too.
  TernGradCodec longer(100);
  std::vector<uint64_t> codes(100, 1);
  codes[77] = 3;
  ExpectRejected(longer, MakePayload(100, 1.0f, codes),
                 "terngrad payload holds the invalid code 3");
}

TEST(TernGradCodecTest, ErrorFeedbackIdentity) {
  for (size_t n : {1, 7, 3000}) {
    TernGradCodec codec(n);
    codec_testing::ExpectErrorFeedbackIdentity(codec, 5, 43);
  }
}

TEST(TernGradCodecTest, RegistryCreatesIt) {
  config::Codec spec;
  spec.set_name("terngrad");
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(spec, 1000);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ((*codec)->id(), CodecId::kTernGrad);
  EXPECT_EQ((*codec)->MaxPayloadBytes(), 266u);
}

}  // namespace
}  // namespace tamp::compress
