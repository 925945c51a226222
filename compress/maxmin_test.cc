#include "compress/maxmin.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

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

config::Codec Spec(uint32_t bits, uint32_t bucket_size = 0, bool stochastic = false) {
  config::Codec spec;
  spec.set_name("maxmin");
  spec.set_bits(bits);
  if (bucket_size != 0) spec.set_bucket_size(bucket_size);
  if (stochastic) spec.set_stochastic(true);
  return spec;
}

std::string MakePayload(size_t n, const std::vector<std::pair<float, float>>& ranges,
                        const std::vector<uint64_t>& codes, int bits) {
  std::string payload;
  AppendHeader(CodecId::kMaxMin, MaxMinCodec::kVersion, n, &payload);
  for (const auto& [min, max] : ranges) {
    payload.append(reinterpret_cast<const char*>(&min), 4);
    payload.append(reinterpret_cast<const char*>(&max), 4);
  }
  BitWriter writer(&payload);
  for (uint64_t code : codes) writer.Write(code, bits);
  writer.Finish();
  return payload;
}

std::pair<float, float> SentRange(const std::string& payload, size_t bucket) {
  float range[2];
  std::memcpy(range, payload.data() + kHeaderBytes + 8 * bucket, 8);
  return {range[0], range[1]};
}

std::vector<float> EncodeDecode(MaxMinCodec& codec, const std::vector<float>& input,
                                const RandomKey& key, std::string* payload) {
  EXPECT_TRUE(codec.Encode(input, key, payload).ok());
  std::vector<float> out(input.size(), 123.0f);
  const absl::Status status = codec.Decode(*payload, key, absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

TEST(MaxMinCodecTest, PayloadSizeMatchesTheFormulaExactly) {
  for (int bits = 1; bits <= 8; ++bits) {
    for (uint32_t d : {1u, 3u, 512u, 1u << 20}) {
      for (size_t n : {1, 2, 3, 7, 8, 9, 511, 512, 513, 1024, 1025, 3001}) {
        const size_t expected = 12 + 8 * ((n + d - 1) / d) + (n * bits + 7) / 8;
        for (bool stochastic : {false, true}) {
          MaxMinCodec codec(n, bits, d, stochastic);
          std::string payload;
          ASSERT_TRUE(codec.Encode(NormalValues(n, 1), Key(0), &payload).ok());
          ASSERT_EQ(payload.size(), expected) << "n=" << n << " bits=" << bits << " d=" << d;
          ASSERT_EQ(codec.MaxPayloadBytes(), expected);
        }
        ASSERT_EQ(MaxMinCodec::PayloadBytes(n, bits, d), expected);
      }
    }
  }
  // By hand: n = 1000, 4 bits, d = 512: 12 + 8 * 2 + 500.
  EXPECT_EQ(MaxMinCodec::PayloadBytes(1000, 4, 512), 528u);
}

TEST(MaxMinCodecTest, HandWorkedExample) {
  // Range [0, 3] with 2 bits: step 1, the values are grid points. Codes 0..3 pack as
  // 0b11'10'01'00 = 0xe4.
  MaxMinCodec codec(4, 2, 4, false);
  std::string payload;
  EXPECT_THAT(EncodeDecode(codec, {0, 1, 2, 3}, Key(0), &payload), ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(payload, MakePayload(4, {{0.0f, 3.0f}}, {0, 1, 2, 3}, 2));
  EXPECT_EQ(payload.substr(20), "\xe4");
  // Nearest: 0.49 -> 0, 0.5 -> 1 (ties up), 2.6 -> 3.
  EXPECT_THAT(EncodeDecode(codec, {0, 0.49f, 0.5f, 3}, Key(0), &payload), ElementsAre(0, 0, 1, 3));
  EXPECT_THAT(EncodeDecode(codec, {0, 2.6f, 1.4f, 3}, Key(0), &payload), ElementsAre(0, 3, 1, 3));
}

// |x - x'| <= step / 2 (nearest) or < step (stochastic), step = (max - min) / (2^bits - 1),
// plus fp32 rounding of the grid arithmetic.
TEST(MaxMinCodecTest, ErrorIsWithinHalfAStepOrAStep) {
  const size_t n = 2000;
  std::vector<float> input = NormalValues(n, 2);
  for (size_t i = 0; i < n; i += 5) input[i] *= 100;
  for (int bits = 1; bits <= 8; ++bits) {
    for (uint32_t d : {1u, 7u, 256u, 5000u}) {
      for (bool stochastic : {false, true}) {
        MaxMinCodec codec(n, bits, d, stochastic);
        std::string payload;
        const std::vector<float> out = EncodeDecode(codec, input, Key(bits), &payload);
        for (size_t i = 0; i < n; ++i) {
          const auto [min, max] = SentRange(payload, i / d);
          const double step = (double{max} - min) / ((1 << bits) - 1);
          const double rounding =
              4 * std::numeric_limits<float>::epsilon() * std::max(std::fabs(min), std::fabs(max));
          const double bound = (stochastic ? step : step / 2) + rounding;
          ASSERT_LE(std::fabs(double{out[i]} - input[i]), bound)
              << "i=" << i << " bits=" << bits << " d=" << d << " stochastic=" << stochastic;
          ASSERT_GE(out[i], min - rounding);
          ASSERT_LE(out[i], max + rounding);
        }
      }
    }
  }
}

TEST(MaxMinCodecTest, RangesAreTheBucketMinAndMax) {
  const std::vector<float> input = NormalValues(1000, 3);
  MaxMinCodec codec(1000, 3, 300, false);
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, Key(0), &payload).ok());
  for (size_t b = 0; b < 4; ++b) {
    const auto first = input.begin() + 300 * b;
    const auto last = input.begin() + std::min<size_t>(1000, 300 * (b + 1));
    EXPECT_EQ(SentRange(payload, b),
              std::make_pair(*std::min_element(first, last), *std::max_element(first, last)))
        << b;
  }
}

TEST(MaxMinCodecTest, StochasticRoundingIsUnbiased) {
  const size_t n = 500;
  const std::vector<float> input = NormalValues(n, 4);
  const int bits = 2;
  const uint32_t d = 100;
  MaxMinCodec codec(n, bits, d, true);
  const int draws = 4000;
  const codec_testing::Moments moments = codec_testing::DecodeMoments(codec, input, draws);
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, Key(0), &payload).ok());
  std::vector<double> target(n), lower(n), gap(n);
  for (size_t i = 0; i < n; ++i) {
    const auto [min, max] = SentRange(payload, i / d);
    const float step = (max - min) / 3;  // As the codec computes it.
    const double q = (double{input[i]} - min) / step;
    target[i] = input[i];
    lower[i] = min + std::floor(q) * double{step};
    gap[i] = step;
  }
  codec_testing::ExpectUnbiased(moments.mean, target, lower, gap, draws);
}

TEST(MaxMinCodecTest, NearestIsKeyIndependentStochasticIsNot) {
  const std::vector<float> input = NormalValues(3000, 5);
  MaxMinCodec nearest(3000, 4, 512, false), stochastic(3000, 4, 512, true),
      stochastic2(3000, 4, 512, true);
  std::string p1, p2, p3, p4;
  ASSERT_TRUE(nearest.Encode(input, Key(1), &p1).ok());
  ASSERT_TRUE(nearest.Encode(input, Key(2), &p2).ok());
  EXPECT_EQ(p1, p2);
  ASSERT_TRUE(stochastic.Encode(input, Key(1), &p3).ok());
  ASSERT_TRUE(stochastic2.Encode(input, Key(1), &p4).ok());
  EXPECT_EQ(p3, p4);
  ASSERT_TRUE(stochastic.Encode(input, Key(2), &p4).ok());
  EXPECT_NE(p3, p4);
  EXPECT_EQ(p3.substr(0, 12 + 8 * 6), p4.substr(0, 12 + 8 * 6));  // Same ranges.
}

TEST(MaxMinCodecTest, ConstantAndNonFiniteBuckets) {
  // d = 3: buckets [0, 3), [3, 6), [6, 9), [9, 12), [12, 13).
  const std::vector<float> input = {2, 2, 2, 1, kNaN, 3, kInf, 0, 1, -3e38f, 3e38f, 0, 5};
  for (bool stochastic : {false, true}) {
    MaxMinCodec codec(input.size(), 8, 3, stochastic);
    std::string payload;
    const std::vector<float> out = EncodeDecode(codec, input, Key(0), &payload);
    EXPECT_EQ(SentRange(payload, 0), std::make_pair(2.0f, 2.0f));
    for (size_t b = 1; b <= 3; ++b) {
      EXPECT_TRUE(std::isnan(SentRange(payload, b).first)) << b;  // NaN, Inf, range overflow.
      EXPECT_TRUE(std::isnan(SentRange(payload, b).second)) << b;
    }
    EXPECT_EQ(SentRange(payload, 4), std::make_pair(5.0f, 5.0f));
    EXPECT_EQ(payload.substr(12 + 40), std::string(13, '\0'));  // All codes 0.
    EXPECT_THAT(std::vector<float>(out.begin(), out.begin() + 3), ElementsAre(2, 2, 2));
    for (size_t i = 3; i < 12; ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
    EXPECT_EQ(out[12], 5);
  }
}

TEST(MaxMinCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  // n = 5, 3 bits, d = 2: 3 ranges, then 15 bits of codes in 2 bytes.
  MaxMinCodec codec(5, 3, 2, false);
  const std::string good = MakePayload(5, {{0, 7}, {-1, 6}, {4, 4}}, {7, 0, 3, 1, 0}, 3);
  std::vector<float> out(5);
  ASSERT_TRUE(codec.Decode(good, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(7, 0, 2, 0, 4));

  codec_testing::ExpectHeaderAndLengthChecks(codec, good, [](size_t bytes) {
    return absl::StrCat("maxmin payload body is ", bytes,
                        " bytes, expected 26 (3 buckets, 3 bits per value)");
  });
  const std::string suffix =
      "; they must both be NaN, or finite with min <= max and a finite max - min";
  ExpectRejected(codec, MakePayload(5, {{0, 7}, {2, 1}, {4, 4}}, {7, 0, 3, 1, 0}, 3),
                 "maxmin bucket 1 has min 2 and max 1" + suffix);
  ExpectRejected(codec, MakePayload(5, {{kNaN, 7}, {2, 3}, {4, 4}}, {0, 0, 3, 1, 0}, 3),
                 "maxmin bucket 0 has min nan and max 7" + suffix);
  ExpectRejected(codec, MakePayload(5, {{0, kInf}, {2, 3}, {4, 4}}, {0, 0, 3, 1, 0}, 3),
                 "maxmin bucket 0 has min 0 and max inf" + suffix);
  ExpectRejected(codec, MakePayload(5, {{0, 7}, {-3e38f, 3e38f}, {4, 4}}, {0, 0, 3, 1, 0}, 3),
                 "maxmin bucket 1 has min -3e+38 and max 3e+38" + suffix);
  ExpectRejected(codec, MakePayload(5, {{0, 7}, {kNaN, kNaN}, {4, 4}}, {7, 0, 0, 1, 0}, 3),
                 "maxmin element 3 has code 1 in bucket 1, whose min and max are nan and nan; "
                 "it must be 0");
  ExpectRejected(codec, MakePayload(5, {{0, 7}, {-1, 6}, {4, 4}}, {7, 0, 3, 1, 2}, 3),
                 "maxmin element 4 has code 2 in bucket 2, whose min and max are 4 and 4; "
                 "it must be 0");
  std::string padding = good;
  padding.back() |= 0x80;  // Bit 15: past the 5 codes.
  ExpectRejected(codec, padding, "maxmin padding bits are not zero");
  // A NaN bucket with zero codes is valid and decodes to NaN.
  ASSERT_TRUE(codec
                  .Decode(MakePayload(5, {{0, 7}, {kNaN, kNaN}, {4, 4}}, {7, 0, 0, 0, 0}, 3), {},
                          absl::MakeSpan(out))
                  .ok());
  EXPECT_TRUE(std::isnan(out[2]) && std::isnan(out[3]));
}

TEST(MaxMinCodecTest, ErrorFeedbackIdentity) {
  for (bool stochastic : {false, true}) {
    for (auto [n, bits, d] : std::vector<std::tuple<size_t, int, uint32_t>>{
             {1, 1, 512}, {7, 2, 3}, {3000, 4, 512}, {2049, 8, 1000}}) {
      MaxMinCodec codec(n, bits, d, stochastic);
      codec_testing::ExpectErrorFeedbackIdentity(codec, 5, 45);
    }
  }
}

TEST(MaxMinCodecTest, ValidateSpecNamesTheField) {
  EXPECT_TRUE(MaxMinCodec::ValidateSpec(Spec(1), "push").ok());
  EXPECT_TRUE(MaxMinCodec::ValidateSpec(Spec(8, 1 << 20, true), "push").ok());
  EXPECT_EQ(MaxMinCodec::ValidateSpec(Spec(0), "push").message(),
            "push.bits: must be in [1, 8], got 0");
  EXPECT_EQ(MaxMinCodec::ValidateSpec(Spec(9), "push").message(),
            "push.bits: must be in [1, 8], got 9");
  config::Codec zero_bucket = Spec(4);
  zero_bucket.set_bucket_size(0);
  EXPECT_EQ(MaxMinCodec::ValidateSpec(zero_bucket, "push").message(),
            "push.bucket_size: must be in [1, 1048576], got 0");
  config::Codec no_bits;
  no_bits.set_name("maxmin");
  EXPECT_EQ(MaxMinCodec::ValidateSpec(no_bits, "push").message(),
            "push: codec 'maxmin' needs 'bits' (bits per value, 1..8)");
}

TEST(MaxMinCodecTest, RegistryCreatesItWithDefaults) {
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(Spec(4), 1000);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ((*codec)->id(), CodecId::kMaxMin);
  EXPECT_EQ((*codec)->MaxPayloadBytes(), 528u);  // d = 512.
  EXPECT_FALSE(static_cast<MaxMinCodec&>(**codec).stochastic());
  EXPECT_EQ(ValidateCodecSpec(Spec(10), "push").message(), "push.bits: must be in [1, 8], got 10");
  config::Codec stray = Spec(3);
  stray.set_levels(4);
  EXPECT_EQ(ValidateCodecSpec(stray, "push").message(),
            "push.levels: codec 'maxmin' takes no parameter 'levels'");
}

}  // namespace
}  // namespace tamp::compress
