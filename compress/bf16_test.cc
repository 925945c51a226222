#include "compress/bf16.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "compress/internal/codec_testing.h"
#include "compress/registry.h"
#include "compress/wire_format.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using codec_testing::BitsOf;
using codec_testing::WithBits;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Independent reference: round to 8 significant bits with double arithmetic (nearbyint rounds
// ties to even), subnormals on the 2^-133 grid, overflow to Inf at 2^128.
uint16_t ReferenceBf16(float x) {
  if (std::isnan(x)) return 0x7fc0;  // The wire's one NaN (compress/wire_format.h).
  const uint32_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isinf(x) || x == 0) return static_cast<uint16_t>(BitsOf(x) >> 16);
  const double a = std::fabs(static_cast<double>(x));
  int e;
  std::frexp(a, &e);
  const int exponent = std::max(e - 1, -126);
  const double quantum = std::ldexp(1.0, exponent - 7);
  const double rounded = std::nearbyint(a / quantum) * quantum;
  if (rounded >= std::ldexp(1.0, 128)) return static_cast<uint16_t>(sign | 0x7f80);
  return static_cast<uint16_t>(sign | (BitsOf(static_cast<float>(rounded)) >> 16));
}

TEST(Bf16ConversionTest, KnownValues) {
  struct Case {
    float x;
    uint16_t value;
  };
  const std::vector<Case> cases = {
      {1.0f, 0x3f80},
      {-2.0f, 0xc000},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f + std::ldexp(1.0f, -8), 0x3f80},                          // Tie: to even.
      {1.0f + std::ldexp(3.0f, -8), 0x3f82},                          // Tie: to even.
      {1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20), 0x3f81},  // Above the tie.
      {WithBits(0x7f7f7fff), 0x7f7f},                                 // Largest that stays finite.
      {WithBits(0x7f7f8000), 0x7f80},                                 // Tie at the top: Inf.
      {std::numeric_limits<float>::max(), 0x7f80},                    // Overflow to Inf.
      {-std::numeric_limits<float>::max(), 0xff80},
      {kInf, 0x7f80},
      {-kInf, 0xff80},
      {std::ldexp(1.0f, -149), 0x0000},  // fp32 subnormal: rounds away.
      {WithBits(0x00008000), 0x0000},    // Subnormal tie: to even 0.
      {WithBits(0x00018000), 0x0002},    // Subnormal tie: to even 2.
      {WithBits(0x007fffff), 0x0080},    // Rounds up to the smallest normal.
      // Every NaN is the canonical 0x7fc0: sign and payload dropped.
      {kNaN, 0x7fc0},
      {-kNaN, 0x7fc0},
      {WithBits(0x7f800001), 0x7fc0},  // Payload in the low bits only.
      {WithBits(0xffbfffff), 0x7fc0},  // Negative signalling NaN with a payload.
      {WithBits(0x7fffffff), 0x7fc0},  // The GPU's NaN.
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FloatToBf16(c.x), c.value) << c.x << " (0x" << std::hex << BitsOf(c.x) << ")";
    EXPECT_EQ(ReferenceBf16(c.x), c.value) << "reference disagrees on " << std::hex << BitsOf(c.x);
  }
}

TEST(Bf16ConversionTest, AgreesWithAnIndependentReference) {
  // Every float whose low 16 bits are a rounding-relevant pattern, for every upper half.
  const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
  for (uint32_t high = 0; high < 65536; ++high) {
    for (uint32_t low : lows) {
      const float x = WithBits((high << 16) | low);
      ASSERT_EQ(FloatToBf16(x), ReferenceBf16(x)) << std::hex << BitsOf(x);
    }
  }
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 65521) {
    const float x = WithBits(static_cast<uint32_t>(bits));
    ASSERT_EQ(FloatToBf16(x), ReferenceBf16(x)) << std::hex << bits;
  }
}

TEST(Bf16ConversionTest, DecodingIsTheTopHalfOfTheFloat) {
  for (uint32_t v = 0; v < 65536; ++v) {
    const float x = Bf16ToFloat(static_cast<uint16_t>(v));
    ASSERT_EQ(BitsOf(x), v << 16);
    if (!std::isnan(x)) {
      ASSERT_EQ(FloatToBf16(x), v);
    }
  }
}

TEST(Bf16CodecTest, PayloadIs12Plus2n) {
  for (size_t n : {1, 2, 3, 7, 8, 9, 1023, 1024, 1025, 4097}) {
    Bf16Codec codec(n);
    std::string payload;
    ASSERT_TRUE(codec.Encode(codec_testing::NormalValues(n, 1), {}, &payload).ok());
    EXPECT_EQ(payload.size(), 12 + 2 * n) << n;
    EXPECT_EQ(codec.MaxPayloadBytes(), 12 + 2 * n) << n;
    EXPECT_EQ(Bf16Codec::PayloadBytes(n), 12 + 2 * n) << n;
  }
}

TEST(Bf16CodecTest, BodyIsTheConvertedValuesAndDecodesExactly) {
  for (size_t n : {1, 6, 1024, 2051}) {
    std::vector<float> input = codec_testing::NormalValues(n, 2);
    input[0] = 1e30f;
    if (n > 5) {
      input[1] = kNaN;
      input[2] = -0.0f;
      input[3] = -kInf;
      input[4] = std::numeric_limits<float>::max();
    }
    Bf16Codec codec(n);
    std::string payload;
    ASSERT_TRUE(codec.Encode(input, codec_testing::Key(0), &payload).ok());
    std::vector<float> out(n, 5.0f);
    ASSERT_TRUE(codec.Decode(payload, codec_testing::Key(0), absl::MakeSpan(out)).ok());
    for (size_t i = 0; i < n; ++i) {
      uint16_t value;
      std::memcpy(&value, &payload[12 + 2 * i], 2);
      ASSERT_EQ(value, FloatToBf16(input[i])) << i;
      ASSERT_EQ(BitsOf(out[i]), uint32_t{value} << 16) << i;
      if (std::isfinite(input[i]) && std::isfinite(out[i])) {
        ASSERT_LE(std::fabs(out[i] - input[i]), std::ldexp(std::fabs(input[i]), -8)) << i;
      }
    }
    if (n > 5) {
      EXPECT_TRUE(std::isnan(out[1]));
      EXPECT_TRUE(std::signbit(out[2]) && out[2] == 0);
      EXPECT_EQ(out[3], -kInf);
      EXPECT_EQ(out[4], kInf);  // FLT_MAX rounds up past the largest bfloat16.
    }
  }
}

// NaNs of any sign and payload, through the batch conversion: canonical bytes out.
TEST(Bf16CodecTest, NaNsAreCanonicalOnTheWire) {
  const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7fffffffu, 0xffffffffu,
                           0x7f800001u, 0xff800001u, 0x7fc01234u, 0xffa5a5a5u};
  std::vector<float> input;
  for (int copy = 0; copy < 5; ++copy) {  // 40 values: whole vectors and a tail.
    for (const uint32_t bits : nans) input.push_back(WithBits(bits));
  }
  Bf16Codec codec(input.size());
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
  std::string expected;
  for (size_t i = 0; i < input.size(); ++i) expected += std::string("\xc0\x7f", 2);
  EXPECT_EQ(payload.substr(12), expected);
}

TEST(Bf16CodecTest, HeaderAndKeyIndependence) {
  Bf16Codec codec(3);
  std::string a, b;
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, -2, 0.5f}, codec_testing::Key(1), &a).ok());
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, -2, 0.5f}, codec_testing::Key(2), &b).ok());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, std::string("TP\x03\x02\x03\0\0\0\0\0\0\0\x80\x3f\x00\xc0\x00\x3f", 18));
}

TEST(Bf16CodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  Bf16Codec codec(5);
  std::string good;
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, 2, 3, 4, 5}, {}, &good).ok());
  codec_testing::ExpectHeaderAndLengthChecks(codec, good, [](size_t bytes) {
    return absl::StrCat("bf16 payload body is ", bytes, " bytes, expected 10");
  });
}

TEST(Bf16CodecTest, ErrorFeedbackIdentity) {
  for (size_t n : {1, 7, 3000}) {
    Bf16Codec codec(n);
    codec_testing::ExpectErrorFeedbackIdentity(codec, 5, 41);
  }
}

TEST(Bf16CodecTest, RegistryCreatesIt) {
  config::Codec spec;
  spec.set_name("bf16");
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(spec, 10);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ((*codec)->id(), CodecId::kBf16);
  EXPECT_EQ((*codec)->MaxPayloadBytes(), 32u);
}

}  // namespace
}  // namespace tamp::compress
