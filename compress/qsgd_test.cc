#include "compress/qsgd.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
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

config::Codec Spec(uint32_t levels, uint32_t bucket_size = 0) {
  config::Codec spec;
  spec.set_name("qsgd");
  spec.set_levels(levels);
  if (bucket_size != 0) spec.set_bucket_size(bucket_size);
  return spec;
}

// B recomputed independently: 1 + the smallest b with 2^b > s.
int ReferenceCodeBits(uint32_t levels) {
  int b = 0;
  while ((uint64_t{1} << b) <= levels) ++b;
  return b + 1;
}

// Builds a payload by hand, for decoder tests.
std::string MakePayload(size_t n, const std::vector<float>& norms,
                        const std::vector<uint64_t>& codes, int bits) {
  std::string payload;
  AppendHeader(CodecId::kQsgd, QsgdCodec::kVersion, n, &payload);
  payload.append(reinterpret_cast<const char*>(norms.data()), 4 * norms.size());
  BitWriter writer(&payload);
  for (uint64_t code : codes) writer.Write(code, bits);
  writer.Finish();
  return payload;
}

std::vector<float> Norms(const std::string& payload, size_t buckets) {
  std::vector<float> norms(buckets);
  std::memcpy(norms.data(), payload.data() + kHeaderBytes, 4 * buckets);
  return norms;
}

std::vector<float> EncodeDecode(QsgdCodec& codec, const std::vector<float>& input,
                                const RandomKey& key, std::string* payload) {
  EXPECT_TRUE(codec.Encode(input, key, payload).ok());
  std::vector<float> out(input.size(), 123.0f);
  const absl::Status status = codec.Decode(*payload, key, absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

TEST(QsgdCodecTest, CodeBitsIsOneMoreThanCeilLog2OfLevelsPlusOne) {
  for (uint32_t s : {1u, 2u, 3u, 4u, 7u, 8u, 127u, 128u, 255u, 256u, 32767u}) {
    EXPECT_EQ(QsgdCodec::CodeBits(s), ReferenceCodeBits(s)) << s;
  }
  EXPECT_EQ(QsgdCodec::CodeBits(1), 2);
  EXPECT_EQ(QsgdCodec::CodeBits(127), 8);
  EXPECT_EQ(QsgdCodec::CodeBits(128), 9);
  EXPECT_EQ(QsgdCodec::CodeBits(32767), 16);
}

TEST(QsgdCodecTest, PayloadSizeMatchesTheFormulaExactly) {
  for (uint32_t s : {1u, 3u, 5u, 127u, 300u, 32767u}) {
    for (uint32_t d : {1u, 2u, 7u, 512u, 1u << 20}) {
      for (size_t n : {1, 2, 3, 7, 8, 9, 511, 512, 513, 1023, 1024, 1025, 3001}) {
        const size_t buckets = (n + d - 1) / d;
        const size_t expected = 12 + 4 * buckets + (n * ReferenceCodeBits(s) + 7) / 8;
        QsgdCodec codec(n, s, d);
        std::string payload;
        ASSERT_TRUE(codec.Encode(NormalValues(n, 3), Key(0), &payload).ok());
        ASSERT_EQ(payload.size(), expected) << "n=" << n << " s=" << s << " d=" << d;
        ASSERT_EQ(codec.MaxPayloadBytes(), expected);
        ASSERT_EQ(QsgdCodec::PayloadBytes(n, s, d), expected);
      }
    }
  }
  // By hand: n = 1000, s = 127 (B = 8), d = 512: 12 + 4 * 2 + 1000.
  EXPECT_EQ(QsgdCodec::PayloadBytes(1000, 127, 512), 1020u);
}

TEST(QsgdCodecTest, HandWorkedExample) {
  // Norm 5, s = 5: v = 3 and 4 exactly, so no randomness. B = 4: codes 0b0011 and
  // 0b1100 (sign bit + level 4) pack into 0xc3.
  QsgdCodec codec(2, 5, 2);
  std::string payload;
  const std::vector<float> out = EncodeDecode(codec, {3, -4}, Key(9), &payload);
  EXPECT_EQ(payload, MakePayload(2, {5.0f}, {3, 12}, 4));
  EXPECT_EQ(payload.substr(16), "\xc3");
  EXPECT_THAT(out, ElementsAre(3, -4));
}

TEST(QsgdCodecTest, DecodesToSignedGridPointsNextToTheValue) {
  const size_t n = 2500;
  for (uint32_t s : {1u, 4u, 127u, 1000u}) {
    QsgdCodec codec(n, s, 256);
    const std::vector<float> input = NormalValues(n, 4);
    std::string payload;
    const std::vector<float> out = EncodeDecode(codec, input, Key(1), &payload);
    const std::vector<float> norms = Norms(payload, (n + 255) / 256);
    for (size_t i = 0; i < n; ++i) {
      const float norm = norms[i / 256];
      const float scale = norm / static_cast<float>(s);
      const double v = s * std::fabs(double{input[i]}) / norm;
      const double level = std::round(std::fabs(out[i]) / scale);
      ASSERT_EQ(std::fabs(out[i]), static_cast<float>(level) * scale) << i;  // The decode rule.
      ASSERT_TRUE(level == std::floor(v) || level == std::floor(v) + 1) << i << " v " << v;
      ASSERT_LE(level, s);
      if (level > 0) {
        ASSERT_EQ(std::signbit(out[i]), std::signbit(input[i])) << i;
      }
    }
  }
}

TEST(QsgdCodecTest, NormIsTheL2NormOfEachBucket) {
  const size_t n = 1000;
  const std::vector<float> input = NormalValues(n, 5);
  QsgdCodec codec(n, 7, 300);
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, Key(0), &payload).ok());
  const std::vector<float> norms = Norms(payload, 4);
  for (size_t b = 0; b < 4; ++b) {
    double sum = 0;
    for (size_t i = 300 * b; i < std::min<size_t>(n, 300 * (b + 1)); ++i)
      sum += double{input[i]} * input[i];
    EXPECT_NEAR(norms[b], std::sqrt(sum), 1e-6 * std::sqrt(sum)) << b;
  }
}

// The documented norm, computed the plain way: value j of the bucket in lane j % 8 (double),
// lanes added pairwise, sqrt, rounded to fp32.
float ReferenceNorm(const float* x, size_t length) {
  double lanes[8] = {};
  for (size_t j = 0; j < length; ++j) lanes[j % 8] += double{x[j]} * x[j];
  return static_cast<float>(std::sqrt(((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                                      ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))));
}

TEST(QsgdCodecTest, NormsAreBitExactWhetherComputedAloneOrFourAtATime) {
  // Buckets of 37 (lanes with a remainder) and 300 (spanning tiles): whole batches of four,
  // single whole buckets after them, and a short last bucket.
  for (const auto& [n, d] : std::vector<std::pair<size_t, uint32_t>>{{13 * 37 + 5, 37},
                                                                    {9 * 300 + 17, 300}}) {
    std::vector<float> input = NormalValues(n, 12);
    for (size_t i = 0; i < n; i += 7) input[i] *= 1e3f;  // Sums whose order matters.
    QsgdCodec codec(n, 127, d);
    std::string payload;
    ASSERT_TRUE(codec.Encode(input, Key(0), &payload).ok());
    const size_t buckets = (n + d - 1) / d;
    const std::vector<float> norms = Norms(payload, buckets);
    for (size_t b = 0; b < buckets; ++b) {
      const size_t length = std::min<size_t>(d, n - b * d);
      EXPECT_EQ(norms[b], ReferenceNorm(input.data() + b * d, length)) << "d " << d << " b " << b;
    }
  }
}

TEST(QsgdCodecTest, RoundsUpExactlyWhenThe16BitUniformIsBelowTheFraction) {
  // Pins the version-2 rule: v = min(|x| * (s / norm), s) in fp32, level = floor(v) + 1 iff
  // PhiloxStream(key).Bits16(i) / 2^16 < v - floor(v).
  const size_t n = 3000;
  const uint32_t s = 15, d = 512;
  const std::vector<float> input = NormalValues(n, 13);
  QsgdCodec codec(n, s, d);
  const RandomKey key = Key(4);
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, key, &payload).ok());
  const size_t buckets = (n + d - 1) / d;
  const std::vector<float> norms = Norms(payload, buckets);
  BitReader reader(absl::string_view(payload).substr(kHeaderBytes + 4 * buckets));
  const PhiloxStream stream(key);
  const float levels = static_cast<float>(s);
  int rounded_up = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t code = 0;
    ASSERT_TRUE(reader.Read(5, &code).ok());
    const float v = std::min(std::fabs(input[i]) * (levels / norms[i / d]), levels);
    const float whole = std::floor(v);
    const bool up = PhiloxStream::ToUniform16(stream.Bits16(i)) < v - whole;
    ASSERT_EQ(code & 15, static_cast<uint64_t>(whole) + up) << i;
    rounded_up += up;
  }
  EXPECT_GT(rounded_up, 0);
  EXPECT_LT(rounded_up, static_cast<int>(n));
}

TEST(QsgdCodecTest, UnbiasedWithinFiveStandardErrors) {
  // Values over several orders of magnitude, 4000 keys.
  const size_t n = 600;
  const uint32_t s = 3, d = 100;
  std::vector<float> input = NormalValues(n, 6);
  for (size_t i = 0; i < n; ++i) input[i] *= std::pow(10.0f, static_cast<float>(i % 4) - 2);
  QsgdCodec codec(n, s, d);
  const int draws = 4000;
  const codec_testing::Moments moments = codec_testing::DecodeMoments(codec, input, draws);
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, Key(0), &payload).ok());
  const std::vector<float> norms = Norms(payload, n / d);
  std::vector<double> target(n), lower(n), gap(n);
  double bound_total = 0, variance_total = 0;
  for (size_t i = 0; i < n; ++i) {
    const double scale = norms[i / d] / static_cast<float>(s);  // As the decoder rounds it.
    const double v = s * std::fabs(double{input[i]}) / norms[i / d];
    const double sign = input[i] < 0 ? -1 : 1;
    target[i] = input[i];
    lower[i] = sign * std::floor(v) * scale;
    gap[i] = sign * scale;
    const double p = v - std::floor(v);
    bound_total += scale * scale * p * (1 - p);
    variance_total += moments.variance[i];
  }
  codec_testing::ExpectUnbiased(moments.mean, target, lower, gap, draws);
  // Var = (norm/s)^2 p (1 - p) per value: the sample total within 5% of it...
  EXPECT_NEAR(variance_total, bound_total, 0.05 * bound_total);
  // ...and each bucket within the QSGD bound min(d/s^2, sqrt(d)/s) * ||x||^2.
  for (size_t b = 0; b < n / d; ++b) {
    double variance = 0;
    for (size_t i = b * d; i < (b + 1) * d; ++i) variance += moments.variance[i];
    const double norm2 = double{norms[b]} * norms[b];
    EXPECT_LE(variance, std::min(double{d} / (s * s), std::sqrt(double{d}) / s) * norm2) << b;
  }
}

TEST(QsgdCodecTest, SameKeySameBytesOtherKeyOtherRounding) {
  const std::vector<float> input = NormalValues(3000, 7);
  QsgdCodec a(3000, 15, 512), b(3000, 15, 512);
  std::string p1, p2, p3;
  ASSERT_TRUE(a.Encode(input, Key(5), &p1).ok());
  ASSERT_TRUE(b.Encode(input, Key(5), &p2).ok());
  ASSERT_TRUE(a.Encode(input, Key(6), &p3).ok());
  EXPECT_EQ(p1, p2);
  EXPECT_NE(p1, p3);
  EXPECT_EQ(p1.substr(0, 12 + 4 * 6), p3.substr(0, 12 + 4 * 6));  // Same norms.
  // A different seed or worker changes the rounding too.
  std::string p4;
  ASSERT_TRUE(a.Encode(input, {.seed = 18, .step = 5, .chunk = 3, .worker = 1}, &p4).ok());
  EXPECT_NE(p1, p4);
}

TEST(QsgdCodecTest, NonFiniteBucketsDecodeToNaNAndLeaveOthersAlone) {
  // d = 4: buckets [0, 4), [4, 8), [8, 12), [12, 14).
  std::vector<float> input = {1, 2, 3, 4, 1, kNaN, 1, 1, -kInf, 1, 1, 1, 3e38f, 3e38f};
  QsgdCodec codec(input.size(), 127, 4);
  std::string payload;
  const std::vector<float> out = EncodeDecode(codec, input, Key(2), &payload);
  const std::vector<float> norms = Norms(payload, 4);
  EXPECT_FLOAT_EQ(norms[0], std::sqrt(30.0f));
  EXPECT_TRUE(std::isnan(norms[1]));
  EXPECT_TRUE(std::isnan(norms[2]));
  EXPECT_TRUE(std::isnan(norms[3]));  // sqrt(2) * 3e38 is not a finite fp32.
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(out[i], input[i], std::sqrt(30.0f) / 127) << i;
  for (size_t i = 4; i < input.size(); ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
  // The codes of a NaN bucket are zero: everything after bucket 0's 4 bytes of codes.
  const std::string codes = payload.substr(12 + 16);
  EXPECT_EQ(codes.substr(4), std::string(10, '\0'));
}

TEST(QsgdCodecTest, ZeroBucketsSendZeroCodes) {
  QsgdCodec codec(6, 3, 3);
  std::string payload;
  const std::vector<float> out = EncodeDecode(codec, {0, -0.0f, 0, 0, -2, 0}, Key(0), &payload);
  EXPECT_THAT(out, ElementsAre(0, 0, 0, 0, -2, 0));
  EXPECT_FALSE(std::signbit(out[1]));  // Level 0 carries no sign.
  EXPECT_EQ(Norms(payload, 2)[0], 0.0f);
}

TEST(QsgdCodecTest, SingleValueAndSingleLevel) {
  QsgdCodec one(1, 1, 512);
  std::string payload;
  EXPECT_THAT(EncodeDecode(one, {-2.5f}, Key(0), &payload), ElementsAre(-2.5f));
  EXPECT_EQ(payload.size(), 12u + 4 + 1);
  // s = 1: every value decodes to 0 or ±norm.
  const std::vector<float> input = NormalValues(37, 8);
  QsgdCodec binary(37, 1, 10);
  const std::vector<float> out = EncodeDecode(binary, input, Key(3), &payload);
  const std::vector<float> norms = Norms(payload, 4);
  for (size_t i = 0; i < 37; ++i) {
    EXPECT_TRUE(out[i] == 0 || std::fabs(out[i]) == norms[i / 10]) << i;
  }
}

TEST(QsgdCodecTest, ManyLevelsAreAccurate) {
  const std::vector<float> input = NormalValues(5000, 9);
  QsgdCodec codec(5000, 32767, 512);
  std::string payload;
  const std::vector<float> out = EncodeDecode(codec, input, Key(4), &payload);
  const std::vector<float> norms = Norms(payload, 10);
  for (size_t i = 0; i < input.size(); ++i) {
    ASSERT_LE(std::fabs(out[i] - input[i]), norms[i / 512] / 32767 * 1.0001f) << i;
  }
}

TEST(QsgdCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  // n = 5, s = 5 (B = 4), d = 2: 3 norms, then 20 bits of codes in 3 bytes.
  QsgdCodec codec(5, 5, 2);
  const std::string good = MakePayload(5, {5, 1, 2}, {3, 12, 5, 0, 9}, 4);
  std::vector<float> out(5);
  ASSERT_TRUE(codec.Decode(good, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(3, -4, 1, 0, -0.4f));

  codec_testing::ExpectHeaderAndLengthChecks(codec, good, [](size_t bytes) {
    return absl::StrCat("qsgd payload body is ", bytes,
                        " bytes, expected 15 (3 buckets, 4 bits per value)");
  });
  ExpectRejected(codec, MakePayload(5, {5, -1, 2}, {3, 12, 5, 0, 9}, 4),
                 "qsgd norm of bucket 1 is -1; it must be NaN or finite and >= +0");
  ExpectRejected(codec, MakePayload(5, {5, 1, -0.0f}, {3, 12, 5, 0, 0}, 4),
                 "qsgd norm of bucket 2 is -0; it must be NaN or finite and >= +0");
  ExpectRejected(codec, MakePayload(5, {kInf, 1, 2}, {3, 12, 5, 0, 9}, 4),
                 "qsgd norm of bucket 0 is inf; it must be NaN or finite and >= +0");
  ExpectRejected(codec, MakePayload(5, {5, 1, 2}, {3, 12, 6, 0, 9}, 4),
                 "qsgd level 6 of element 2 exceeds levels 5");
  ExpectRejected(codec, MakePayload(5, {5, 1, 2}, {3, 12, 5, 8, 9}, 4),
                 "qsgd element 3 has a sign bit but level 0");
  ExpectRejected(codec, MakePayload(5, {5, 1, kNaN}, {3, 12, 5, 0, 1}, 4),
                 "qsgd element 4 has a nonzero code in bucket 2, whose norm is nan");
  ExpectRejected(codec, MakePayload(5, {5, 0, 2}, {3, 12, 0, 8, 9}, 4),
                 "qsgd element 3 has a nonzero code in bucket 1, whose norm is 0");
  std::string padding = good;
  padding.back() |= 0x10;  // Bit 20: past the 5 codes.
  ExpectRejected(codec, padding, "qsgd padding bits are not zero");
  // A NaN bucket with zero codes is valid and decodes to NaN.
  ASSERT_TRUE(
      codec.Decode(MakePayload(5, {5, 1, kNaN}, {3, 12, 5, 0, 0}, 4), {}, absl::MakeSpan(out))
          .ok());
  EXPECT_TRUE(std::isnan(out[4]));
}

TEST(QsgdCodecTest, ErrorFeedbackIdentity) {
  for (auto [n, s, d] : std::vector<std::tuple<size_t, uint32_t, uint32_t>>{
           {1, 1, 512}, {7, 3, 2}, {3000, 127, 512}, {2049, 255, 1000}}) {
    QsgdCodec codec(n, s, d);
    codec_testing::ExpectErrorFeedbackIdentity(codec, 5, 42);
  }
}

TEST(QsgdCodecTest, ValidateSpecNamesTheField) {
  EXPECT_TRUE(QsgdCodec::ValidateSpec(Spec(1), "push").ok());
  EXPECT_TRUE(QsgdCodec::ValidateSpec(Spec(32767, 1 << 20), "push").ok());
  EXPECT_EQ(QsgdCodec::ValidateSpec(Spec(0), "push").message(),
            "push.levels: must be in [1, 32767], got 0");
  EXPECT_EQ(QsgdCodec::ValidateSpec(Spec(32768), "push").message(),
            "push.levels: must be in [1, 32767], got 32768");
  config::Codec zero_bucket = Spec(4);
  zero_bucket.set_bucket_size(0);
  EXPECT_EQ(QsgdCodec::ValidateSpec(zero_bucket, "push").message(),
            "push.bucket_size: must be in [1, 1048576], got 0");
  EXPECT_EQ(QsgdCodec::ValidateSpec(Spec(4, (1 << 20) + 1), "push").message(),
            "push.bucket_size: must be in [1, 1048576], got 1048577");
  config::Codec no_levels;
  no_levels.set_name("qsgd");
  EXPECT_EQ(QsgdCodec::ValidateSpec(no_levels, "push").message(),
            "push: codec 'qsgd' needs 'levels' (quantization levels s)");
}

TEST(QsgdCodecTest, RegistryCreatesItWithTheDefaultBucketSize) {
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(Spec(127), 1000);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ((*codec)->id(), CodecId::kQsgd);
  EXPECT_EQ((*codec)->MaxPayloadBytes(), 1020u);  // d = 512: 2 norms.
  EXPECT_EQ(ValidateCodecSpec(Spec(0), "push").message(),
            "push.levels: must be in [1, 32767], got 0");
  config::Codec stray = Spec(3);
  stray.set_bits(4);
  EXPECT_EQ(ValidateCodecSpec(stray, "push").message(),
            "push.bits: codec 'qsgd' takes no parameter 'bits'");
}

}  // namespace
}  // namespace tamp::compress
