#include "compress/sparse.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

uint32_t ToBits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}

// The value of fp16 bits h (finite), computed from the definition.
double HalfValue(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// Reference rounding: the nearest finite fp16 (ties to the even bit pattern), saturating at
// 65504 beyond the fp16 range, by search over all positive finite fp16 values.
uint16_t ReferenceHalf(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65504) return sign | 0x7bff;
  uint16_t lo = 0, hi = 0x7bff;  // Largest h with HalfValue(h) <= a.
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (HalfValue(mid) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  const double below = HalfValue(lo), above = HalfValue(lo + 1);
  if (a - below < above - a) return sign | lo;
  if (a - below > above - a) return sign | (lo + 1);
  return sign | ((lo & 1) ? lo + 1 : lo);
}

TEST(HalfTest, EveryFp16RoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float x = HalfToFloat(static_cast<uint16_t>(h));
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
      ASSERT_TRUE(std::isnan(x)) << h;
      continue;
    }
    if ((h & 0x7fff) < 0x7c00) {
      ASSERT_EQ(static_cast<double>(x), HalfValue(h)) << h;
    }
    ASSERT_EQ(FloatToHalf(x), h) << h;
  }
}

TEST(HalfTest, RoundsToNearestEvenLikeTheReference) {
  // A sweep over float bit patterns (every sign, exponent and many mantissas), plus the
  // exact midpoints between neighbouring fp16 values and their float neighbours.
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 65521) {
    const float x = FromBits(static_cast<uint32_t>(bits));
    if (std::isnan(x) || std::isinf(x)) continue;
    ASSERT_EQ(FloatToHalf(x), ReferenceHalf(x)) << x << " bits " << bits;
  }
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    const float mid = static_cast<float>((HalfValue(h) + HalfValue(h + 1)) / 2);  // Exact.
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)}) {
      ASSERT_EQ(FloatToHalf(x), ReferenceHalf(x)) << x;
      ASSERT_EQ(FloatToHalf(-x), ReferenceHalf(-x)) << -x;
    }
  }
}

TEST(HalfTest, SpecialValues) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.5f), 0xc100);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.996f), 0x7bff);
  // Saturation instead of overflow to inf.
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(1e30f), 0x7bff);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::max()), 0xfbff);
  EXPECT_EQ(FloatToHalf(kInf), 0x7c00);
  EXPECT_EQ(FloatToHalf(-kInf), 0xfc00);
  // Subnormals: 2^-24 is the smallest; 2^-25 is a tie that goes to even (0); 3 * 2^-25 is a
  // tie between 1 and 2 units that goes to 2.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000);
  // Rounding up out of the subnormals gives the smallest normal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);
  // Every NaN becomes the wire's canonical 0x7e00 (compress/wire_format.h), whatever its
  // sign and payload, and decodes as the canonical fp32 NaN.
  for (const uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7fffffffu, 0x7f800001u, 0xffa5a5a5u}) {
    EXPECT_EQ(FloatToHalf(FromBits(bits)), 0x7e00) << std::hex << bits;
  }
  EXPECT_EQ(ToBits(HalfToFloat(0x7e00)), 0x7fc00000u);
  EXPECT_EQ(ToBits(HalfToFloat(0x7c00)), ToBits(kInf));
}

// NaNs of any sign and payload go out canonical, in both formats, appended or gathered.
TEST(ValuesTest, NaNsAreCanonicalOnTheWire) {
  const std::vector<float> input = {FromBits(0xffc00000u), FromBits(0x7fffffffu),
                                    FromBits(0x7f800001u), FromBits(0xffa5a5a5u)};
  const std::vector<size_t> all = {0, 1, 2, 3};
  const std::string fp32(std::string("\x00\x00\xc0\x7f", 4) + std::string("\x00\x00\xc0\x7f", 4) +
                         std::string("\x00\x00\xc0\x7f", 4) + std::string("\x00\x00\xc0\x7f", 4));
  const std::string fp16("\x00\x7e\x00\x7e\x00\x7e\x00\x7e", 8);
  std::string out;
  AppendValues(input, ValueFormat::kFp32, &out);
  EXPECT_EQ(out, fp32);
  out.clear();
  GatherValues(input, all, ValueFormat::kFp32, &out);
  EXPECT_EQ(out, fp32);
  out.clear();
  AppendValues(input, ValueFormat::kFp16, &out);
  EXPECT_EQ(out, fp16);
  out.clear();
  GatherValues(input, all, ValueFormat::kFp16, &out);
  EXPECT_EQ(out, fp16);
}

TEST(ValuesTest, AppendLoadGatherScatterInBothFormats) {
  const std::vector<float> input = {1.5f, -2.0f, 0.1f, 70000.0f, -0.0f};
  for (ValueFormat format : {ValueFormat::kFp32, ValueFormat::kFp16}) {
    std::string bytes = "x";  // Appends after existing content, unaligned.
    AppendValues(input, format, &bytes);
    ASSERT_EQ(bytes.size(), 1 + ValueBytes(format) * input.size());
    std::vector<float> loaded(input.size());
    LoadValues(bytes.data() + 1, input.size(), format, loaded.data());
    for (size_t j = 0; j < input.size(); ++j) {
      const float expected =
          format == ValueFormat::kFp32 ? input[j] : HalfToFloat(FloatToHalf(input[j]));
      EXPECT_EQ(ToBits(loaded[j]), ToBits(expected)) << j;
      EXPECT_EQ(ToBits(LoadValue(bytes.data() + 1, j, format)), ToBits(expected)) << j;
    }
    std::vector<float> sums = {1, 1, 1, 1, 1};
    AddValues(bytes.data() + 1, input.size(), format, sums.data());
    for (size_t j = 0; j < input.size(); ++j) EXPECT_EQ(sums[j], 1 + loaded[j]) << j;

    std::string gathered;
    const std::vector<size_t> indices = {0, 3, 4};
    GatherValues(input, indices, format, &gathered);
    std::vector<float> out(5, 9.0f);
    ScatterValues(indices, gathered.data(), format, out.data());
    EXPECT_THAT(out, ElementsAre(loaded[0], 9, 9, loaded[3], loaded[4]));
    ScatterAddValues(indices, gathered.data(), format, out.data());
    EXPECT_THAT(out, ElementsAre(2 * loaded[0], 9, 9, 2 * loaded[3], 0));
  }
  EXPECT_EQ(ValueBytes(ValueFormat::kFp32), 4u);
  EXPECT_EQ(ValueBytes(ValueFormat::kFp16), 2u);
  config::Codec spec;
  EXPECT_EQ(ValueFormatOf(spec), ValueFormat::kFp32);
  spec.set_fp16_values(true);
  EXPECT_EQ(ValueFormatOf(spec), ValueFormat::kFp16);
}

TEST(IndicesTest, RoundTripAndSizes) {
  EXPECT_EQ(IndexBits(1), 1);
  EXPECT_EQ(IndexBits(2), 1);
  EXPECT_EQ(IndexBits(3), 2);
  EXPECT_EQ(IndexBits(1025), 11);
  EXPECT_EQ(PackedIndexBytes(0, 7), 0u);
  EXPECT_EQ(PackedIndexBytes(3, 3), 2u);
  EXPECT_EQ(PackedIndexBytes(8, 3), 3u);
  const std::vector<size_t> indices = {0, 5, 6, 99, 1000};
  std::string bytes;
  AppendIndices(indices, IndexBits(1001), &bytes);
  ASSERT_EQ(bytes.size(), PackedIndexBytes(5, 10));
  auto parsed = ParseIndices(bytes, 5, 10, 1001, "x");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed, ElementsAre(0, 5, 6, 99, 1000));
  EXPECT_EQ(ParseIndices(bytes, 5, 10, 1000, "x").status().message(),
            "x index 1000 (entry 4) is out of range for 1000 elements");
  auto empty = ParseIndices("", 0, 10, 1000, "x");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(IndicesTest, ParseIndexedValuesChecksLengthFirst) {
  std::string body;
  AppendIndices(std::vector<size_t>{1, 4}, 3, &body);
  AppendValues(std::vector<float>{2, -1}, ValueFormat::kFp16, &body);
  auto parsed = ParseIndexedValues(body, 2, 5, ValueFormat::kFp16, "dgc");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->indices, ElementsAre(1, 4));
  EXPECT_EQ(LoadValue(parsed->values, 1, ValueFormat::kFp16), -1.0f);
  EXPECT_EQ(ParseIndexedValues(body, 2, 5, ValueFormat::kFp32, "dgc").status().message(),
            "dgc payload body is 5 bytes, expected 9 (k = 2, 3 bits per index)");
}

config::Codec Spec(const char* name) {
  config::Codec spec;
  spec.set_name(name);
  return spec;
}

TEST(SpecTest, EntriesKeptAndValidation) {
  config::Codec spec = Spec("randomk");
  spec.set_ratio(0.07);
  EXPECT_EQ(EntriesKept(spec, 100), 7u);
  spec.set_ratio(0.001);
  EXPECT_EQ(EntriesKept(spec, 10), 1u);
  spec.set_ratio(1);
  EXPECT_EQ(EntriesKept(spec, 7), 7u);
  EXPECT_TRUE(ValidateRatioOrCount(spec, "p", "randomk").ok());
  spec.set_count(3);
  EXPECT_EQ(ValidateRatioOrCount(spec, "p", "randomk").message(),
            "p: codec 'randomk' needs exactly one of 'ratio' and 'count', got both");
  spec.clear_ratio();
  EXPECT_EQ(EntriesKept(spec, 2), 2u);
  EXPECT_TRUE(ValidateRatioOrCount(spec, "p", "randomk").ok());
  spec.set_count(0);
  EXPECT_EQ(ValidateRatioOrCount(spec, "p", "randomk").message(), "p.count: must be >= 1, got 0");
  EXPECT_EQ(ValidateRatio(Spec("dgc"), "p", "dgc").message(), "p: codec 'dgc' needs 'ratio'");
  config::Codec nan = Spec("dgc");
  nan.set_ratio(kNaN);
  EXPECT_EQ(ValidateRatio(nan, "p", "dgc").message(), "p.ratio: must be in (0, 1], got nan");
}

TEST(UniformDrawsTest, DrawsAreStreamWordPairsMappedIntoRange) {
  const RandomKey key{.seed = 11, .step = 2, .chunk = 3, .worker = kSharedStream};
  PhiloxStream stream(key);
  UniformDraws draws(key);
  for (uint64_t d : {0, 1, 2, 7, 1000, 999}) {  // Out of order: the cache must not matter.
    const uint64_t expected = uint64_t{stream.Bits(2 * d)} | uint64_t{stream.Bits(2 * d + 1)} << 32;
    EXPECT_EQ(draws.Bits64(d), expected) << d;
    EXPECT_EQ(draws.Below(d, 1), 0u);
    EXPECT_EQ(draws.Below(d, 10),
              static_cast<uint64_t>((static_cast<unsigned __int128>(expected) * 10) >> 64));
  }
  // Rough uniformity: 6 buckets over 60000 draws, each within 5% of 10000.
  std::vector<int> buckets(6);
  for (uint64_t d = 0; d < 60000; ++d) ++buckets[draws.Below(d, 6)];
  for (int count : buckets) EXPECT_NEAR(count, 10000, 500);
}

}  // namespace
}  // namespace tamp::compress
