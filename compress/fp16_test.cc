#include "compress/fp16.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "compress/internal/codec_testing.h"
#include "compress/registry.h"
#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using codec_testing::BitsOf;
using codec_testing::WithBits;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Independent reference: round |x| to the fp16 grid with double arithmetic (every fp32 and
// every grid point is exact in double; nearbyint rounds ties to even), then build the bits.
uint16_t ReferenceFp16(float x) {
  if (std::isnan(x)) return 0x7e00;  // The wire's one NaN (compress/wire_format.h).
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return sign | 0x7c00;
  int e;
  std::frexp(a, &e);                          // a = f * 2^e, f in [0.5, 1).
  const int exponent = std::max(e - 1, -14);  // Subnormals share 2^-14's quantum.
  const double quantum = std::ldexp(1.0, exponent - 10);
  const double rounded = std::nearbyint(a / quantum) * quantum;
  if (rounded < std::ldexp(1.0, -14))
    return sign | static_cast<uint16_t>(rounded / std::ldexp(1.0, -24));
  std::frexp(rounded, &e);
  const int biased = e - 1 + 15;
  const double mantissa = rounded / std::ldexp(1.0, e - 1) - 1.0;
  return sign | static_cast<uint16_t>((biased << 10) | static_cast<int>(mantissa * 1024));
}

TEST(Fp16ConversionTest, KnownValues) {
  struct Case {
    float x;
    uint16_t half;
  };
  const std::vector<Case> cases = {
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {65504.0f, 0x7bff},    // Largest half.
      {65519.996f, 0x7bff},  // Just below the midpoint to 2^16.
      {65520.0f, 0x7c00},    // The midpoint: ties to even = Inf.
      {1e6f, 0x7c00},        // Overflow.
      {-1e6f, 0xfc00},
      {kInf, 0x7c00},
      {-kInf, 0xfc00},
      {std::ldexp(1.0f, -14), 0x0400},               // Smallest normal.
      {std::ldexp(1.0f, -24), 0x0001},               // Smallest subnormal.
      {std::ldexp(1.0f, -25), 0x0000},               // Half of it: a tie, to even 0.
      {std::ldexp(1.0f, -25) * 1.0000001f, 0x0001},  // Just above the tie.
      {std::ldexp(3.0f, -25), 0x0002},               // 1.5 quanta: tie between 1 and 2, to 2.
      {std::ldexp(5.0f, -25), 0x0002},               // 2.5 quanta: tie between 2 and 3, to 2.
      {std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25), 0x0400},  // 1023.5 quanta, to 1024.
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},  // Tie between 0x3c00 and 0x3c01: even.
      {1.0f + std::ldexp(3.0f, -11), 0x3c02},  // Tie between 0x3c01 and 0x3c02: even.
      {1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -23), 0x3c01},  // Above the tie.
      {2047.5f, 0x6800},  // Tie at the top of a binade: carries to 2048.
      {0.1f, 0x2e66},
      {std::ldexp(1.0f, -149), 0x0000},  // fp32 subnormal.
      // Every NaN is the canonical 0x7e00: sign and payload dropped.
      {kNaN, 0x7e00},
      {-kNaN, 0x7e00},
      {WithBits(0x7f800001), 0x7e00},  // Signalling NaN, payload in low bits.
      {WithBits(0x7fffffff), 0x7e00},  // The GPU's NaN.
      {WithBits(0xffa5a5a5), 0x7e00},  // Negative signalling NaN with a payload.
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FloatToFp16(c.x), c.half) << c.x << " (0x" << std::hex << BitsOf(c.x) << ")";
    EXPECT_EQ(ReferenceFp16(c.x), c.half) << "reference disagrees on " << c.x;
  }
}

TEST(Fp16ConversionTest, DecodesEveryHalfExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float x = Fp16ToFloat(static_cast<uint16_t>(h));
    const bool negative = (h & 0x8000) != 0;
    const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    EXPECT_EQ(std::signbit(x), negative) << h;
    if (exponent == 0x1f && mantissa != 0) {
      ASSERT_TRUE(std::isnan(x)) << h;
      EXPECT_EQ(BitsOf(x) & 0x7fffffff, 0x7fc00000u | (mantissa << 13)) << h;  // Quiet.
      continue;
    }
    const double expected = exponent == 0x1f ? INFINITY
                            : exponent == 0
                                ? std::ldexp(mantissa, -24)
                                : std::ldexp(1024 + mantissa, static_cast<int>(exponent) - 25);
    ASSERT_EQ(std::fabs(static_cast<double>(x)), expected) << h;
    ASSERT_EQ(FloatToFp16(x), h) << "round trip of " << h;
  }
}

TEST(Fp16ConversionTest, AgreesWithAnIndependentReference) {
  // Every float whose low 13 bits are one of the rounding-relevant patterns (exact, just
  // below/at/above the tie, max), for every sign/exponent/upper mantissa: 2^19 * 7 values.
  const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x17ff, 0x1fff};
  for (uint32_t high = 0; high < (1u << 19); ++high) {
    for (uint32_t low : lows) {
      const float x = WithBits((high << 13) | low);
      ASSERT_EQ(FloatToFp16(x), ReferenceFp16(x)) << std::hex << BitsOf(x);
    }
  }
  // And a coarse stride over everything.
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 65521) {
    const float x = WithBits(static_cast<uint32_t>(bits));
    ASSERT_EQ(FloatToFp16(x), ReferenceFp16(x)) << std::hex << bits;
  }
}

TEST(Fp16ConversionTest, F16cKernelGivesIdenticalBitsForEveryFloat) {
  if (!Fp16KernelSupported(Fp16Kernel::kF16c)) GTEST_SKIP() << "no F16C on this CPU";
  // All 2^32 floats, 2^16 at a time, through both batch kernels (odd offsets included, so
  // the F16C path's portable tail is exercised too).
  std::vector<float> in(65536);
  std::string portable(2 * in.size(), '\0'), f16c(2 * in.size(), '\0');
  for (uint64_t high = 0; high < 65536; ++high) {
    for (uint32_t low = 0; low < 65536; ++low)
      in[low] = WithBits(static_cast<uint32_t>(high << 16) | low);
    const size_t skip = high % 7;
    FloatsToFp16sWith(Fp16Kernel::kPortable, in.data() + skip, in.size() - skip, portable.data());
    FloatsToFp16sWith(Fp16Kernel::kF16c, in.data() + skip, in.size() - skip, f16c.data());
    ASSERT_EQ(portable, f16c) << "floats 0x" << std::hex << (high << 16) << "..";
  }
  std::string all(2 * 65536, '\0');
  for (uint32_t h = 0; h < 65536; ++h) std::memcpy(&all[2 * h], &h, 2);
  std::vector<float> a(65536), b(65536);
  Fp16sToFloatsWith(Fp16Kernel::kPortable, all.data(), 65536, a.data());
  Fp16sToFloatsWith(Fp16Kernel::kF16c, all.data(), 65536, b.data());
  for (uint32_t h = 0; h < 65536; ++h) ASSERT_EQ(BitsOf(a[h]), BitsOf(b[h])) << h;
}

TEST(Fp16CodecTest, PayloadIs12Plus2n) {
  for (size_t n : {1, 2, 3, 7, 8, 9, 1023, 1024, 1025, 4097}) {
    Fp16Codec codec(n);
    std::string payload;
    ASSERT_TRUE(codec.Encode(codec_testing::NormalValues(n, 1), {}, &payload).ok());
    EXPECT_EQ(payload.size(), 12 + 2 * n) << n;
    EXPECT_EQ(codec.MaxPayloadBytes(), 12 + 2 * n) << n;
    EXPECT_EQ(Fp16Codec::PayloadBytes(n), 12 + 2 * n) << n;
  }
}

TEST(Fp16CodecTest, BodyIsTheConvertedValuesAndDecodesExactly) {
  for (size_t n : {1, 5, 1024, 2051}) {
    std::vector<float> input = codec_testing::NormalValues(n, 2);
    input[0] = 70000.0f;  // Overflows to Inf.
    if (n > 4) {
      input[1] = kNaN;
      input[2] = -0.0f;
      input[3] = std::ldexp(1.0f, -20);  // Subnormal half.
    }
    Fp16Codec codec(n);
    std::string payload;
    ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
    std::vector<float> out(n, 5.0f);
    ASSERT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
    for (size_t i = 0; i < n; ++i) {
      uint16_t half;
      std::memcpy(&half, &payload[12 + 2 * i], 2);
      ASSERT_EQ(half, FloatToFp16(input[i])) << i;
      ASSERT_EQ(BitsOf(out[i]), BitsOf(Fp16ToFloat(half))) << i;
    }
    EXPECT_EQ(out[0], kInf);
    if (n > 4) {
      EXPECT_TRUE(std::isnan(out[1]));
      EXPECT_TRUE(std::signbit(out[2]));
      EXPECT_EQ(out[3], std::ldexp(1.0f, -20));
    }
  }
}

// NaNs of any sign and payload, through both batch kernels: canonical bytes out.
TEST(Fp16CodecTest, NaNsAreCanonicalOnTheWire) {
  const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7fffffffu, 0xffffffffu,
                           0x7f800001u, 0xff800001u, 0x7fc01234u, 0xffa5a5a5u};
  std::vector<float> input;
  for (int copy = 0; copy < 5; ++copy) {  // 40 values: whole vectors and a tail.
    for (const uint32_t bits : nans) input.push_back(WithBits(bits));
  }
  std::string expected;
  for (size_t i = 0; i < input.size(); ++i) expected += std::string("\x00\x7e", 2);
  for (const Fp16Kernel kernel : {Fp16Kernel::kPortable, Fp16Kernel::kF16c}) {
    if (!Fp16KernelSupported(kernel)) continue;
    std::string body(2 * input.size(), '\xff');
    FloatsToFp16sWith(kernel, input.data(), input.size(), body.data());
    EXPECT_EQ(body, expected) << "kernel " << static_cast<int>(kernel);
  }
  Fp16Codec codec(input.size());
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
  EXPECT_EQ(payload.substr(12), expected);
}

TEST(Fp16CodecTest, HeaderAndKeyIndependence) {
  Fp16Codec codec(3);
  std::string a, b;
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, -2, 0.5f}, codec_testing::Key(1), &a).ok());
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, -2, 0.5f}, codec_testing::Key(2), &b).ok());
  EXPECT_EQ(a, b);  // Deterministic rounding: the key plays no part.
  EXPECT_EQ(a, std::string("TP\x02\x02\x03\0\0\0\0\0\0\0\x00\x3c\x00\xc0\x00\x38", 18));
}

TEST(Fp16CodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  Fp16Codec codec(5);
  std::string good;
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, 2, 3, 4, 5}, {}, &good).ok());
  codec_testing::ExpectHeaderAndLengthChecks(codec, good, [](size_t bytes) {
    return absl::StrCat("fp16 payload body is ", bytes, " bytes, expected 10");
  });
}

TEST(Fp16CodecTest, ErrorFeedbackIdentity) {
  for (size_t n : {1, 7, 3000}) {
    Fp16Codec codec(n);
    codec_testing::ExpectErrorFeedbackIdentity(codec, 5, 40);
  }
}

TEST(Fp16CodecTest, RegistryCreatesIt) {
  config::Codec spec;
  spec.set_name("fp16");
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(spec, 10);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ((*codec)->id(), CodecId::kFp16);
  EXPECT_EQ((*codec)->MaxPayloadBytes(), 32u);
  spec.set_levels(3);
  EXPECT_EQ(ValidateCodecSpec(spec, "push").message(),
            "push.levels: codec 'fp16' takes no parameter 'levels'");
}

}  // namespace
}  // namespace tamp::compress
