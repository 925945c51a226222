#include "compress/internal/sign_bits.h"

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress::internal {
namespace {

using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// Bit by bit, independently of the word packing: bit i of byte i / 8 is x[i] < 0.
std::string ReferencePlane(const std::vector<float>& x) {
  std::string plane((x.size() + 7) / 8, '\0');
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] < 0) plane[i / 8] = static_cast<char>(plane[i / 8] | (1 << (i % 8)));
  }
  return plane;
}

std::string Pack(const std::vector<float>& x) {
  std::string plane(SignBytes(x.size()), '\x55');  // Garbage: every byte must be written.
  PackSigns(x, plane.data());
  return plane;
}

TEST(SignBitsTest, SignBytesIsCeilNOver8) {
  EXPECT_EQ(SignBytes(0), 0u);
  EXPECT_EQ(SignBytes(1), 1u);
  EXPECT_EQ(SignBytes(7), 1u);
  EXPECT_EQ(SignBytes(8), 1u);
  EXPECT_EQ(SignBytes(9), 2u);
  EXPECT_EQ(SignBytes(64), 8u);
  EXPECT_EQ(SignBytes(65), 9u);
  EXPECT_EQ(SignBytes(size_t{1} << 24), size_t{1} << 21);
}

// The multiply gather of PackSignWord, checked for every byte value at every byte position.
TEST(SignBitsTest, PackSignWordIsExactForEveryBytePattern) {
  for (int position = 0; position < 8; ++position) {
    for (int byte = 0; byte < 256; ++byte) {
      float x[64];
      for (int j = 0; j < 64; ++j) x[j] = 1.0f + j;
      for (int j = 0; j < 8; ++j) {
        if ((byte >> j) & 1) x[8 * position + j] = -1.0f - j;
      }
      ASSERT_EQ(PackSignWord(x), static_cast<uint64_t>(byte) << (8 * position))
          << "byte " << byte << " at " << position;
    }
  }
  float all_negative[64];
  for (float& v : all_negative) v = -2.0f;
  EXPECT_EQ(PackSignWord(all_negative), ~uint64_t{0});
}

TEST(SignBitsTest, SpecialValues) {
  // -0, NaN and -NaN count as +; infinities and denormals keep their sign.
  const std::vector<float> x = {-0.0f, 0.0f, kNaN, FromBits(0xffc00001), -kInf, kInf,
                                -std::numeric_limits<float>::denorm_min(),
                                std::numeric_limits<float>::denorm_min()};
  EXPECT_EQ(Pack(x), std::string("\x50", 1));  // Bits 4 and 6.
}

TEST(SignBitsTest, PackMatchesTheReferenceForAllTailLengths) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (size_t n = 1; n <= 200; ++n) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    const std::string plane = Pack(x);
    ASSERT_EQ(plane, ReferencePlane(x)) << n;
    EXPECT_TRUE(SignPaddingIsZero(plane, n)) << n;
  }
  std::vector<float> big((size_t{1} << 20) + 13);
  for (float& v : big) v = normal(rng);
  EXPECT_EQ(Pack(big), ReferencePlane(big));
}

TEST(SignBitsTest, PaddingCheck) {
  EXPECT_TRUE(SignPaddingIsZero(std::string("\x07", 1), 3));
  EXPECT_FALSE(SignPaddingIsZero(std::string("\x0f", 1), 3));
  EXPECT_FALSE(SignPaddingIsZero(std::string("\x80", 1), 7));
  EXPECT_TRUE(SignPaddingIsZero(std::string("\xff", 1), 8));  // No padding.
  EXPECT_FALSE(SignPaddingIsZero(std::string("\xff\x02", 2), 9));
  EXPECT_TRUE(SignPaddingIsZero(std::string("\xff\x01", 2), 9));
}

TEST(SignBitsTest, UnpackScalesTheSigns) {
  // Bits 1, 3, 8: values 1, 3 and 8 negative; n = 10 leaves a 2-value tail.
  const std::string plane("\x0a\x01", 2);
  std::vector<float> out(10, 9.0f);
  UnpackSigns(plane, 1.0f, absl::MakeSpan(out));
  EXPECT_THAT(out, ElementsAre(1, -1, 1, -1, 1, 1, 1, 1, -1, 1));
  UnpackSigns(plane, 0.25f, absl::MakeSpan(out));
  EXPECT_THAT(out, ElementsAre(0.25, -0.25, 0.25, -0.25, 0.25, 0.25, 0.25, 0.25, -0.25, 0.25));
  UnpackSignsAdd(plane, 2.0f, absl::MakeSpan(out));
  EXPECT_THAT(out, ElementsAre(2.25, -2.25, 2.25, -2.25, 2.25, 2.25, 2.25, 2.25, -2.25, 2.25));
  UnpackSigns(plane, kInf, absl::MakeSpan(out));
  EXPECT_THAT(out, ElementsAre(kInf, -kInf, kInf, -kInf, kInf, kInf, kInf, kInf, -kInf, kInf));
}

TEST(SignBitsTest, UnpackRoundTripsLargePlanes) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  for (size_t n : {1, 63, 64, 65, 1000, 4099}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    std::vector<float> out(n), expected(n);
    for (size_t i = 0; i < n; ++i) expected[i] = x[i] < 0 ? -1.0f : 1.0f;
    UnpackSigns(Pack(x), 1.0f, absl::MakeSpan(out));
    ASSERT_EQ(out, expected) << n;
  }
}

TEST(SignBitsTest, MajorityVoteIsTheSignWithZeroForTies) {
  std::vector<float> votes = {3, -1, 0, -0.0f, 1, -5, kNaN, kInf};
  MajorityVote(absl::MakeSpan(votes));
  EXPECT_THAT(votes, ElementsAre(1, -1, 0, 0, 1, -1, 0, 1));
}

}  // namespace
}  // namespace tamp::compress::internal
