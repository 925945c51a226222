#include "compress/natural.h"

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
using codec_testing::WithBits;
using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string MakePayload(size_t n, const std::vector<uint64_t>& codes) {
  std::string payload;
  AppendHeader(CodecId::kNatural, NaturalCodec::kVersion, n, &payload);
  BitWriter writer(&payload);
  for (uint64_t code : codes) writer.Write(code, 9);
  writer.Finish();
  return payload;
}

std::vector<uint64_t> SentCodes(const std::string& payload, size_t n) {
  BitReader reader(absl::string_view(payload).substr(kHeaderBytes));
  std::vector<uint64_t> codes(n);
  for (uint64_t& code : codes) EXPECT_TRUE(reader.Read(9, &code).ok());
  return codes;
}

std::vector<float> EncodeDecode(NaturalCodec& codec, const std::vector<float>& input,
                                const RandomKey& key, std::string* payload) {
  EXPECT_TRUE(codec.Encode(input, key, payload).ok());
  std::vector<float> out(input.size(), 123.0f);
  const absl::Status status = codec.Decode(*payload, key, absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

TEST(NaturalCodecTest, PayloadIs12PlusCeilNineNOverEight) {
  for (size_t n : {1, 2, 7, 8, 9, 15, 16, 17, 1023, 1024, 1025, 4097}) {
    NaturalCodec codec(n);
    std::string payload;
    ASSERT_TRUE(codec.Encode(NormalValues(n, 1), Key(0), &payload).ok());
    const size_t expected = 12 + (9 * n + 7) / 8;
    EXPECT_EQ(payload.size(), expected) << n;
    EXPECT_EQ(codec.MaxPayloadBytes(), expected) << n;
    EXPECT_EQ(NaturalCodec::PayloadBytes(n), expected) << n;
  }
  EXPECT_EQ(NaturalCodec::PayloadBytes(1000), 1137u);
}

TEST(NaturalCodecTest, PowersOfTwoZerosAndSpecialsAreExact) {
  const std::vector<float> input = {
      1, -2, 0.5f, std::ldexp(1.0f, -126), std::ldexp(-1.0f, 127), 0, -0.0f, kInf, -kInf, kNaN};
  NaturalCodec codec(input.size());
  for (int step = 0; step < 5; ++step) {  // Whatever the key.
    std::string payload;
    const std::vector<float> out = EncodeDecode(codec, input, Key(step), &payload);
    EXPECT_THAT(SentCodes(payload, input.size()),
                ElementsAre(127, 0x100 | 128, 126, 1, 0x100 | 254, 0, 0, 255, 0x100 | 255, 0x100));
    for (size_t i = 0; i + 1 < input.size(); ++i) EXPECT_EQ(out[i], input[i]) << i;
    EXPECT_FALSE(std::signbit(out[6]));  // -0 travels as +0.
    EXPECT_TRUE(std::isnan(out[9]));
  }
}

TEST(NaturalCodecTest, RoundsToOneOfTheTwoPowersAround) {
  const size_t n = 4000;
  std::vector<float> input = NormalValues(n, 2);
  for (size_t i = 0; i < n; i += 3)
    input[i] = std::ldexp(input[i], static_cast<int>(i % 200) - 100);
  input[0] = std::numeric_limits<float>::max();
  input[1] = WithBits(0x00000123);  // A float subnormal: 0 or 2^-126.
  NaturalCodec codec(n);
  std::string payload;
  const std::vector<float> out = EncodeDecode(codec, input, Key(1), &payload);
  EXPECT_TRUE(out[0] == std::ldexp(1.0f, 127) || out[0] == kInf);
  EXPECT_TRUE(out[1] == 0 || out[1] == std::ldexp(1.0f, -126));
  for (size_t i = 2; i < n; ++i) {
    const double a = std::fabs(double{input[i]});
    const double low = std::exp2(std::floor(std::log2(a)));
    ASSERT_TRUE(std::fabs(out[i]) == low || std::fabs(out[i]) == 2 * low) << i << ": " << input[i];
    ASSERT_EQ(std::signbit(out[i]), std::signbit(input[i])) << i;
  }
}

TEST(NaturalCodecTest, RoundsUpExactlyWhenThe16BitUniformIsBelowTheMantissa) {
  // Pins the version-2 rule: up iff PhiloxStream(key).Bits16(i) * 2^7 < the 23 mantissa bits.
  const size_t n = 3001;
  const std::vector<float> input = NormalValues(n, 15);
  NaturalCodec codec(n);
  const RandomKey key = Key(7);
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, key, &payload).ok());
  const std::vector<uint64_t> codes = SentCodes(payload, n);
  const PhiloxStream stream(key);
  int rounded_up = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &input[i], 4);
    const bool up = (stream.Bits16(i) << 7) < (bits & 0x7fffff);
    const uint64_t exponent = (bits >> 23) & 0xff;
    ASSERT_EQ(codes[i] & 0xff, exponent + up) << i;
    rounded_up += up;
  }
  EXPECT_GT(rounded_up, 0);
  EXPECT_LT(rounded_up, static_cast<int>(n));
}

TEST(NaturalCodecTest, UnbiasedWithVarianceAtMostAnEighthOfXSquared) {
  const size_t n = 400;
  std::vector<float> input = NormalValues(n, 3);
  for (size_t i = 0; i < n; ++i) input[i] = std::ldexp(input[i], static_cast<int>(i % 41) - 20);
  input[0] = 1.5f;      // m = 1/2: the largest spread per binade's middle.
  input[1] = 4.0f / 3;  // m = 1/3: variance exactly x^2 / 8 (the bound).
  NaturalCodec codec(n);
  const int draws = 4000;
  const codec_testing::Moments moments = codec_testing::DecodeMoments(codec, input, draws);
  std::vector<double> target(n), lower(n), gap(n);
  double relative_variance = 0, expected_relative_variance = 0;
  for (size_t i = 0; i < n; ++i) {
    const double a = std::fabs(double{input[i]});
    const double low = std::exp2(std::floor(std::log2(a)));
    const double sign = input[i] < 0 ? -1 : 1;
    target[i] = input[i];
    lower[i] = sign * low;
    gap[i] = sign * low;
    // Var = low^2 m (1 - m) <= x^2 / 8.
    const double m = a / low - 1;
    const double variance = low * low * m * (1 - m);
    EXPECT_LE(variance, a * a / 8 * (1 + 1e-9)) << i;
    relative_variance += moments.variance[i] / (a * a);
    expected_relative_variance += variance / (a * a);
  }
  codec_testing::ExpectUnbiased(moments.mean, target, lower, gap, draws);
  // The sample variances (relative to x^2, summed over the values) match the formula.
  EXPECT_NEAR(relative_variance, expected_relative_variance, 0.05 * expected_relative_variance);
  EXPECT_LE(relative_variance, n / 8.0);
  EXPECT_NEAR(moments.variance[1] / (input[1] * input[1]), 1.0 / 8, 0.01);  // m = 1/3.
}

TEST(NaturalCodecTest, SameKeySameBytesOtherKeyOtherRounding) {
  const std::vector<float> input = NormalValues(1000, 4);
  NaturalCodec a(1000), b(1000);
  std::string p1, p2, p3;
  ASSERT_TRUE(a.Encode(input, Key(5), &p1).ok());
  ASSERT_TRUE(b.Encode(input, Key(5), &p2).ok());
  ASSERT_TRUE(a.Encode(input, Key(6), &p3).ok());
  EXPECT_EQ(p1, p2);
  EXPECT_NE(p1, p3);
}

TEST(NaturalCodecTest, EveryCodeIsValid) {
  // All 512 codes in one payload: each decodes to ±2^(E-127), 0, ±Inf or NaN.
  std::vector<uint64_t> codes(512);
  for (uint64_t c = 0; c < 512; ++c) codes[c] = c;
  NaturalCodec codec(512);
  std::vector<float> out(512);
  ASSERT_TRUE(codec.Decode(MakePayload(512, codes), {}, absl::MakeSpan(out)).ok());
  for (int c = 0; c < 512; ++c) {
    const int e = c & 0xff;
    const bool negative = (c & 0x100) != 0;
    if (c == 0x100) {
      EXPECT_TRUE(std::isnan(out[c]));
    } else if (e == 0) {
      EXPECT_EQ(out[c], 0.0f) << c;
    } else if (e == 255) {
      EXPECT_EQ(out[c], negative ? -kInf : kInf) << c;
    } else {
      EXPECT_EQ(out[c], (negative ? -1 : 1) * std::ldexp(1.0f, e - 127)) << c;
    }
  }
}

TEST(NaturalCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  NaturalCodec codec(5);  // 45 bits: 6 bytes, 3 bits of padding.
  const std::string good = MakePayload(5, {127, 0x100 | 128, 0, 255, 0x100});
  std::vector<float> out(5);
  ASSERT_TRUE(codec.Decode(good, {}, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  codec_testing::ExpectHeaderAndLengthChecks(codec, good, [](size_t bytes) {
    return absl::StrCat("natural payload body is ", bytes, " bytes, expected 6");
  });
  std::string padding = good;
  padding.back() |= 0x80;  // Bit 47.
  ExpectRejected(codec, padding, "natural padding bits are not zero");
}

TEST(NaturalCodecTest, ErrorFeedbackIdentity) {
  for (size_t n : {1, 7, 3000}) {
    NaturalCodec codec(n);
    codec_testing::ExpectErrorFeedbackIdentity(codec, 5, 44);
  }
}

TEST(NaturalCodecTest, RegistryCreatesIt) {
  config::Codec spec;
  spec.set_name("natural");
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(spec, 1000);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ((*codec)->id(), CodecId::kNatural);
  EXPECT_EQ((*codec)->MaxPayloadBytes(), 1137u);
}

}  // namespace
}  // namespace tamp::compress
