#include "compress/none.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::ElementsAre;

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

TEST(NoneCodecTest, RoundTripIsBitExactIncludingSpecialValuesButNaNIsCanonical) {
  const std::vector<float> input = {1.5f,
                                    -0.0f,
                                    std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity(),
                                    std::numeric_limits<float>::quiet_NaN(),
                                    FromBits(0xffc12345),  // Negative NaN with a payload.
                                    std::numeric_limits<float>::denorm_min(),
                                    -3.0e38f};
  NoneCodec codec(input.size());
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
  EXPECT_EQ(payload.size(), 12 + 4 * input.size());
  EXPECT_EQ(payload.size(), codec.MaxPayloadBytes());

  std::vector<float> out(input.size(), 7.0f);
  ASSERT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
  for (size_t i = 0; i < input.size(); ++i) {
    EXPECT_EQ(Bits(out[i]), std::isnan(input[i]) ? 0x7fc00000u : Bits(input[i])) << i;
  }
}

// GPU arithmetic and x86 make differently-coded NaNs; the wire holds one (wire_format.h).
TEST(NoneCodecTest, NaNsTravelAsTheCanonicalQuietNaN) {
  const std::vector<float> input = {FromBits(0xffc12345), FromBits(0x7f800001),
                                    FromBits(0x7fffffff), FromBits(0xffc00000)};
  NoneCodec codec(input.size());
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
  EXPECT_EQ(payload.substr(12), std::string("\x00\x00\xc0\x7f\x00\x00\xc0\x7f"
                                            "\x00\x00\xc0\x7f\x00\x00\xc0\x7f",
                                            16));
}

TEST(NoneCodecTest, PayloadIsHeaderThenRawLittleEndianFloats) {
  NoneCodec codec(2);
  std::string payload;
  ASSERT_TRUE(codec.Encode(std::vector<float>{1.0f, -2.0f}, {}, &payload).ok());
  EXPECT_EQ(payload, std::string("TP\x00\x02\x02\x00\x00\x00\x00\x00\x00\x00"
                                 "\x00\x00\x80\x3f"   // 1.0f
                                 "\x00\x00\x00\xc0",  // -2.0f
                                 20));
}

TEST(NoneCodecTest, EncodeReplacesThePayload) {
  NoneCodec codec(1);
  std::string payload = "stale bytes";
  ASSERT_TRUE(codec.Encode(std::vector<float>{3.0f}, {}, &payload).ok());
  EXPECT_EQ(payload.size(), 16u);
}

TEST(NoneCodecTest, DecodeAddAddsAndAggregatesToTheMean) {
  NoneCodec codec(3);
  std::string a, b;
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, 2, 3}, {}, &a).ok());
  ASSERT_TRUE(codec.Encode(std::vector<float>{3, 4, -9}, {}, &b).ok());
  std::vector<float> sum(3, 0.0f);
  ASSERT_TRUE(codec.DecodeAdd(a, {}, absl::MakeSpan(sum)).ok());
  ASSERT_TRUE(codec.DecodeAdd(b, {}, absl::MakeSpan(sum)).ok());
  EXPECT_THAT(sum, ElementsAre(4, 6, -6));
  codec.FinishAggregate(2, absl::MakeSpan(sum));
  EXPECT_THAT(sum, ElementsAre(2, 3, -3));
}

TEST(NoneCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  NoneCodec codec(3);
  std::string good;
  ASSERT_TRUE(codec.Encode(std::vector<float>{1, 2, 3}, {}, &good).ok());
  struct Case {
    std::string payload;
    std::string message;
  };
  std::string four_elements;
  AppendHeader(CodecId::kNone, NoneCodec::kVersion, 4, &four_elements);
  four_elements.append(16, '\0');
  std::string topk;
  AppendHeader(CodecId::kTopK, 1, 3, &topk);
  topk.append(12, '\0');
  const std::vector<Case> cases = {
      {good.substr(0, good.size() - 1), "none payload body is 11 bytes, expected 12"},
      {good + "x", "none payload body is 13 bytes, expected 12"},
      {good.substr(0, 5), "payload truncated: 5 bytes, header needs 12"},
      {four_elements, "element count 4 does not match chunk size 3"},
      {topk, "payload is for codec 1 (topk), expected 0 (none)"},
  };
  for (const Case& c : cases) {
    std::vector<float> out = {7, 8, 9};
    absl::Status status = codec.Decode(c.payload, {}, absl::MakeSpan(out));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), c.message);
    status = codec.DecodeAdd(c.payload, {}, absl::MakeSpan(out));
    EXPECT_EQ(status.message(), c.message);
    EXPECT_THAT(out, ElementsAre(7, 8, 9));
  }
}

}  // namespace
}  // namespace tamp::compress
