#include "compress/signsgd.h"

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compress/internal/codec_testing.h"
#include "compress/registry.h"
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
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

std::string Header(uint8_t id, uint8_t version, uint64_t n) {
  std::string header = {'T', 'P', static_cast<char>(id), static_cast<char>(version)};
  header.append(reinterpret_cast<const char*>(&n), 8);
  return header;
}

std::vector<float> EncodeDecode(SignSgdCodec& codec, const std::vector<float>& input,
                                std::string* payload) {
  EXPECT_TRUE(codec.Encode(input, {}, payload).ok());
  std::vector<float> out(input.size(), 123.0f);  // Decode must overwrite every entry.
  EXPECT_TRUE(codec.Decode(*payload, {}, absl::MakeSpan(out)).ok());
  return out;
}

TEST(SignSgdCodecTest, PayloadSizeIs12PlusCeilNOver8) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<size_t> sizes;
  for (size_t n = 1; n <= 130; ++n) sizes.push_back(n);
  for (size_t n : {1000, 1023, 1024, 1025, 65535, 65536, 65537}) sizes.push_back(n);
  for (size_t n : sizes) {
    std::vector<float> input(n);
    for (float& x : input) x = normal(rng);
    SignSgdCodec codec(n);
    std::string payload;
    ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
    const size_t expected = 12 + (n + 7) / 8;
    EXPECT_EQ(payload.size(), expected) << n;
    EXPECT_EQ(codec.MaxPayloadBytes(), expected) << n;
    EXPECT_EQ(SignSgdCodec::PayloadBytes(n), expected) << n;
  }
  // Worked by hand.
  EXPECT_EQ(SignSgdCodec::PayloadBytes(1), 13u);
  EXPECT_EQ(SignSgdCodec::PayloadBytes(8), 13u);
  EXPECT_EQ(SignSgdCodec::PayloadBytes(9), 14u);
  EXPECT_EQ(SignSgdCodec::PayloadBytes(64), 20u);
  EXPECT_EQ(SignSgdCodec::PayloadBytes(65), 21u);
  EXPECT_EQ(SignSgdCodec::PayloadBytes(1000), 137u);
  EXPECT_EQ(SignSgdCodec::PayloadBytes(size_t{1} << 24), 12u + (size_t{1} << 21));
}

TEST(SignSgdCodecTest, KnownVectorBytesAndDecode) {
  // Negative: 1, 4 (-inf), 7 -> byte 0 = 0x92. 0, -0 and NaN are +. Value 8 is +, and the
  // 7 padding bits of byte 1 are 0.
  const std::vector<float> input = {1, -2, 0, -0.0f, -kInf, kNaN, 3, -4, 5};
  SignSgdCodec codec(input.size());
  std::string payload;
  const std::vector<float> out = EncodeDecode(codec, input, &payload);
  EXPECT_EQ(payload, Header(10, 1, 9) + std::string("\x92\x00", 2));
  EXPECT_THAT(out, ElementsAre(1, -1, 1, 1, -1, 1, 1, -1, 1));
}

TEST(SignSgdCodecTest, NaNOfEitherSignAndZerosCountAsPlus) {
  const std::vector<float> input = {kNaN, FromBits(0xffc00000), -0.0f, 0.0f, kInf, -kInf};
  SignSgdCodec codec(input.size());
  std::string payload;
  EXPECT_THAT(EncodeDecode(codec, input, &payload), ElementsAre(1, 1, 1, 1, 1, -1));
}

TEST(SignSgdCodecTest, SingleElementChunk) {
  SignSgdCodec codec(1);
  std::string payload;
  EXPECT_THAT(EncodeDecode(codec, {-0.5f}, &payload), ElementsAre(-1));
  EXPECT_EQ(payload, Header(10, 1, 1) + std::string("\x01", 1));
  EXPECT_THAT(EncodeDecode(codec, {0.5f}, &payload), ElementsAre(1));
  EXPECT_EQ(payload, Header(10, 1, 1) + std::string("\x00", 1));
}

TEST(SignSgdCodecTest, RoundTripIsTheSignForOddAndLargeSizes) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  for (size_t n : {3, 7, 63, 65, 127, 1001, (1 << 20) + 5}) {
    std::vector<float> input(n), expected(n);
    for (size_t i = 0; i < n; ++i) {
      input[i] = normal(rng);
      expected[i] = input[i] < 0 ? -1.0f : 1.0f;
    }
    SignSgdCodec codec(n);
    std::string payload;
    ASSERT_EQ(EncodeDecode(codec, input, &payload), expected) << n;
  }
}

TEST(SignSgdCodecTest, MajorityVoteOfThreeWorkers) {
  SignSgdCodec codec(6);
  // Signs per element:    +  +  -  -  +  -
  // Worker 1:             +  -  -  +  +  -
  // Worker 2:             +  +  +  -  -  -
  // Worker 3:             -  +  -  -  +  +
  const std::vector<std::vector<float>> workers = {
      {1, -2, -3, 4, 0, -6}, {2, 3, 0.5f, -1, -2, -kInf}, {-1, 5, -1, -1, 7, 8}};
  std::vector<float> accumulator(6, 0.0f);
  std::string payload;
  for (const auto& gradient : workers) {
    ASSERT_TRUE(codec.Encode(gradient, {}, &payload).ok());
    ASSERT_TRUE(codec.DecodeAdd(payload, {}, absl::MakeSpan(accumulator)).ok());
  }
  EXPECT_THAT(accumulator, ElementsAre(1, 1, -1, -1, 1, -1));  // Sums of +-1.
  codec.FinishAggregate(3, absl::MakeSpan(accumulator));
  EXPECT_THAT(accumulator, ElementsAre(1, 1, -1, -1, 1, -1));  // No division by 3.

  // Unanimous: the sums are +-3 and the vote is still +-1.
  std::vector<float> unanimous(6, 0.0f);
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(codec.Encode(workers[0], {}, &payload).ok());
    ASSERT_TRUE(codec.DecodeAdd(payload, {}, absl::MakeSpan(unanimous)).ok());
  }
  EXPECT_THAT(unanimous, ElementsAre(3, -3, -3, 3, 3, -3));
  codec.FinishAggregate(3, absl::MakeSpan(unanimous));
  EXPECT_THAT(unanimous, ElementsAre(1, -1, -1, 1, 1, -1));
}

TEST(SignSgdCodecTest, TiesVoteZero) {
  SignSgdCodec codec(4);
  const std::vector<std::vector<float>> workers = {
      {1, 1, -1, 1}, {-1, 1, 1, -1}, {1, -1, -1, -1}, {-1, 1, 1, -1}};
  std::vector<float> accumulator(4, 0.0f);
  std::string payload;
  for (const auto& gradient : workers) {
    ASSERT_TRUE(codec.Encode(gradient, {}, &payload).ok());
    ASSERT_TRUE(codec.DecodeAdd(payload, {}, absl::MakeSpan(accumulator)).ok());
  }
  EXPECT_THAT(accumulator, ElementsAre(0, 2, 0, -2));
  codec.FinishAggregate(4, absl::MakeSpan(accumulator));
  EXPECT_THAT(accumulator, ElementsAre(0, 1, 0, -1));
}

TEST(SignSgdCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  SignSgdCodec codec(10);  // Body: 2 bytes, 6 padding bits.
  const std::string good = Header(10, 1, 10) + std::string("\x0a\x01", 2);
  std::vector<float> out(10);
  ASSERT_TRUE(codec.Decode(good, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(1, -1, 1, -1, 1, 1, 1, 1, -1, 1));

  struct Case {
    std::string payload;
    std::string message;
  };
  const std::vector<Case> cases = {
      {good.substr(0, 13), "signsgd payload body is 1 bytes, expected 2"},
      {good + "x", "signsgd payload body is 3 bytes, expected 2"},
      {good.substr(0, 12), "signsgd payload body is 0 bytes, expected 2"},
      {good.substr(0, 5), "payload truncated: 5 bytes, header needs 12"},
      {Header(10, 1, 10) + std::string("\x0a\x05", 2), "signsgd sign padding bits are not zero"},
      {Header(10, 1, 10) + std::string("\x0a\x81", 2), "signsgd sign padding bits are not zero"},
      {Header(12, 1, 10) + std::string("\x0a\x01", 2),
       "payload is for codec 12 (signum), expected 10 (signsgd)"},
      {Header(10, 2, 10) + std::string("\x0a\x01", 2),
       "unsupported signsgd payload version 2 (this build reads 1)"},
      {Header(10, 1, 9) + std::string("\x0a\x01", 2),
       "element count 9 does not match chunk size 10"},
  };
  for (const Case& c : cases) codec_testing::ExpectRejected(codec, c.payload, c.message);
}

TEST(SignSgdCodecTest, RegistryBuildsItAndRejectsParameters) {
  config::Codec spec;
  spec.set_name("signsgd");
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(spec, 1000);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ((*codec)->id(), CodecId::kSignSgd);
  EXPECT_EQ((*codec)->MaxPayloadBytes(), 137u);
  spec.set_momentum(0.5);
  EXPECT_EQ(ValidateCodecSpec(spec, "push").message(),
            "push.momentum: codec 'signsgd' takes no parameter 'momentum'");
}

}  // namespace
}  // namespace tamp::compress
