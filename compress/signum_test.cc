#include "compress/signum.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
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

config::Codec Momentum(double momentum) {
  config::Codec spec;
  spec.set_name("signum");
  spec.set_momentum(momentum);
  return spec;
}

std::string Header(uint8_t id, uint8_t version, uint64_t n) {
  std::string header = {'T', 'P', static_cast<char>(id), static_cast<char>(version)};
  header.append(reinterpret_cast<const char*>(&n), 8);
  return header;
}

std::vector<float> EncodeDecode(SignumCodec& codec, const std::vector<float>& input,
                                std::string* payload) {
  EXPECT_TRUE(codec.Encode(input, {}, payload).ok());
  std::vector<float> out(input.size(), 123.0f);  // Decode must overwrite every entry.
  EXPECT_TRUE(codec.Decode(*payload, {}, absl::MakeSpan(out)).ok());
  return out;
}

std::vector<float> Buffer(const SignumCodec& codec) {
  return {codec.momentum_buffer().begin(), codec.momentum_buffer().end()};
}

TEST(SignumCodecTest, PayloadSizeIs12PlusCeilNOver8) {
  for (size_t n = 1; n <= 130; ++n) {
    SignumCodec codec(n, 0.9);
    std::string payload;
    ASSERT_TRUE(codec.Encode(std::vector<float>(n, -1.0f), {}, &payload).ok());
    EXPECT_EQ(payload.size(), 12 + (n + 7) / 8) << n;
    EXPECT_EQ(codec.MaxPayloadBytes(), 12 + (n + 7) / 8) << n;
  }
  EXPECT_EQ(SignumCodec::PayloadBytes(1), 13u);
  EXPECT_EQ(SignumCodec::PayloadBytes(65), 21u);
  EXPECT_EQ(SignumCodec::PayloadBytes(1000), 137u);
}

// momentum 0.5: b = c = 0.5, every value below is exact.
TEST(SignumCodecTest, MomentumStateOverStepsByHand) {
  SignumCodec codec(4, 0.5);
  EXPECT_TRUE(codec.momentum_buffer().empty());
  std::string payload;
  // m = 0.5 * 0 + 0.5 * {4, -4, 2, 0} = {2, -2, 1, 0}.
  EXPECT_THAT(EncodeDecode(codec, {4, -4, 2, 0}, &payload), ElementsAre(1, -1, 1, 1));
  EXPECT_THAT(Buffer(codec), ElementsAre(2, -2, 1, 0));
  EXPECT_EQ(payload, Header(12, 1, 4) + std::string("\x02", 1));
  // m = {1, -1, 0.5, 0} + {-4, 1, -0.5, -1} = {-3, 0, 0, -1}: the large gradient flips
  // element 0; elements 1 and 2 reach exactly 0, which counts as +.
  EXPECT_THAT(EncodeDecode(codec, {-8, 2, -1, -2}, &payload), ElementsAre(-1, 1, 1, -1));
  EXPECT_THAT(Buffer(codec), ElementsAre(-3, 0, 0, -1));
  EXPECT_EQ(payload, Header(12, 1, 4) + std::string("\x09", 1));
  // m = {-1.5, 0, 0, -0.5} + {2, 0, -1, 2} = {0.5, 0, -1, 1.5}: elements 0 and 3 turn back
  // to +, element 2 turns -.
  EXPECT_THAT(EncodeDecode(codec, {4, 0, -2, 4}, &payload), ElementsAre(1, 1, -1, 1));
  EXPECT_THAT(Buffer(codec), ElementsAre(0.5, 0, -1, 1.5));
}

// momentum 0.9 over 10 steps of random data, against m = b*m + c*x computed here.
TEST(SignumCodecTest, MomentumStateMatchesTheReferenceRecurrence) {
  const size_t n = 1000 + 37;  // Whole words and a tail.
  SignumCodec codec(n, 0.9);
  EXPECT_EQ(codec.momentum(), 0.9);
  const float b = 0.9f;
  const float c = static_cast<float>(1.0 - 0.9);
  std::vector<float> m(n, 0.0f), input(n);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::string payload;
  for (int step = 0; step < 10; ++step) {
    for (float& x : input) x = normal(rng);
    std::vector<float> expected(n);
    for (size_t i = 0; i < n; ++i) {
      m[i] = b * m[i] + c * input[i];
      expected[i] = m[i] < 0 ? -1.0f : 1.0f;
    }
    ASSERT_EQ(EncodeDecode(codec, input, &payload), expected) << "step " << step;
    for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(codec.momentum_buffer()[i], m[i]) << i;
  }
}

TEST(SignumCodecTest, ZeroMomentumIsSignSgd) {
  SignumCodec codec(5, 0.0);
  std::string payload;
  EXPECT_THAT(EncodeDecode(codec, {1, -1, 0, -2, 3}, &payload), ElementsAre(1, -1, 1, -1, 1));
  EXPECT_THAT(EncodeDecode(codec, {-1, 1, -5, 2, 0}, &payload), ElementsAre(-1, 1, -1, 1, 1));
}

TEST(SignumCodecTest, NaNSticksInTheMomentumAndCountsAsPlus) {
  SignumCodec codec(3, 0.5);
  std::string payload;
  EXPECT_THAT(EncodeDecode(codec, {kNaN, -kInf, -1}, &payload), ElementsAre(1, -1, -1));
  EXPECT_TRUE(std::isnan(codec.momentum_buffer()[0]));
  EXPECT_EQ(codec.momentum_buffer()[1], -kInf);
  // Later finite inputs leave NaN and -inf where they are; +inf on -inf gives NaN.
  EXPECT_THAT(EncodeDecode(codec, {-4, 8, kInf}, &payload), ElementsAre(1, -1, 1));
  EXPECT_TRUE(std::isnan(codec.momentum_buffer()[0]));
  EXPECT_EQ(codec.momentum_buffer()[1], -kInf);
  EXPECT_EQ(codec.momentum_buffer()[2], kInf);
  EXPECT_THAT(EncodeDecode(codec, {-4, kInf, -kInf}, &payload), ElementsAre(1, 1, 1));
  EXPECT_TRUE(std::isnan(codec.momentum_buffer()[1]));
  EXPECT_TRUE(std::isnan(codec.momentum_buffer()[2]));
}

TEST(SignumCodecTest, MajorityVoteOfThreeWorkersEachWithItsOwnMomentum) {
  // Worker w has its own codec (its own state); the server has another, which only decodes.
  SignumCodec server(3, 0.5);
  std::vector<std::unique_ptr<SignumCodec>> codecs;
  for (int w = 0; w < 3; ++w) codecs.push_back(std::make_unique<SignumCodec>(3, 0.5));
  // Step 1 gradients; m = x / 2.
  const std::vector<std::vector<float>> step1 = {{2, -2, 2}, {2, 2, -2}, {-2, -2, -2}};
  // Step 2: m = m / 2 + x / 2.
  //   worker 0: {0.5, -0.5, 0.5} + {-1, 0, 0}    = {-0.5, -0.5, 0.5}  -> - - +
  //   worker 1: {0.5, 0.5, -0.5} + {0, -2, 0}    = {0.5, -1.5, -0.5}  -> + - -
  //   worker 2: {-0.5, -0.5, -0.5} + {0, 0, 1}   = {-0.5, -0.5, 0.5}  -> - - +
  const std::vector<std::vector<float>> step2 = {{-2, 0, 0}, {0, -4, 0}, {0, 0, 2}};
  std::string payload;
  std::vector<float> votes(3, 0.0f);
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(codecs[w]->Encode(step1[w], {}, &payload).ok());
    ASSERT_TRUE(server.DecodeAdd(payload, {}, absl::MakeSpan(votes)).ok());
  }
  EXPECT_THAT(votes, ElementsAre(1, -1, -1));
  server.FinishAggregate(3, absl::MakeSpan(votes));
  EXPECT_THAT(votes, ElementsAre(1, -1, -1));

  std::fill(votes.begin(), votes.end(), 0.0f);
  for (int w = 0; w < 3; ++w) {
    ASSERT_TRUE(codecs[w]->Encode(step2[w], {}, &payload).ok());
    ASSERT_TRUE(server.DecodeAdd(payload, {}, absl::MakeSpan(votes)).ok());
  }
  EXPECT_THAT(votes, ElementsAre(-1, -3, 1));
  server.FinishAggregate(3, absl::MakeSpan(votes));
  EXPECT_THAT(votes, ElementsAre(-1, -1, 1));
  EXPECT_TRUE(server.momentum_buffer().empty());  // Decoding holds no state.

  // A tie between two workers votes 0.
  std::vector<float> tie(3, 0.0f);
  ASSERT_TRUE(codecs[0]->Encode(std::vector<float>{0, 0, 0}, {}, &payload).ok());  // - - +
  ASSERT_TRUE(server.DecodeAdd(payload, {}, absl::MakeSpan(tie)).ok());
  ASSERT_TRUE(codecs[1]->Encode(std::vector<float>{0, 0, 0}, {}, &payload).ok());  // + - -
  ASSERT_TRUE(server.DecodeAdd(payload, {}, absl::MakeSpan(tie)).ok());
  server.FinishAggregate(2, absl::MakeSpan(tie));
  EXPECT_THAT(tie, ElementsAre(0, -1, 0));
}

TEST(SignumCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  SignumCodec codec(3, 0.9);
  const std::string good = Header(12, 1, 3) + std::string("\x05", 1);
  std::vector<float> out(3);
  ASSERT_TRUE(codec.Decode(good, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(-1, 1, -1));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good.substr(0, 12), "signum payload body is 0 bytes, expected 1"},
      {good + "x", "signum payload body is 2 bytes, expected 1"},
      {Header(12, 1, 3) + std::string("\x0d", 1), "signum sign padding bits are not zero"},
      {Header(10, 1, 3) + std::string("\x05", 1),
       "payload is for codec 10 (signsgd), expected 12 (signum)"},
      {Header(12, 1, 4) + std::string("\x05", 1), "element count 4 does not match chunk size 3"},
  };
  for (const auto& [payload, message] : cases) {
    codec_testing::ExpectRejected(codec, payload, message);
  }
}

TEST(SignumCodecTest, ValidateSpecNamesTheField) {
  EXPECT_TRUE(SignumCodec::ValidateSpec(Momentum(0), "push").ok());
  EXPECT_TRUE(SignumCodec::ValidateSpec(Momentum(0.99), "push").ok());
  EXPECT_EQ(SignumCodec::ValidateSpec(Momentum(1), "push").message(),
            "push.momentum: must be in [0, 1), got 1");
  EXPECT_EQ(SignumCodec::ValidateSpec(Momentum(-0.1), "push").message(),
            "push.momentum: must be in [0, 1), got -0.1");
  EXPECT_EQ(SignumCodec::ValidateSpec(Momentum(kNaN), "push").message(),
            "push.momentum: must be in [0, 1), got nan");
}

TEST(SignumCodecTest, RegistryBuildsItWithTheDefaultMomentum) {
  config::Codec spec;
  spec.set_name("signum");
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(spec, 1000);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ((*codec)->id(), CodecId::kSignum);
  EXPECT_EQ((*codec)->MaxPayloadBytes(), 137u);
  EXPECT_EQ(static_cast<SignumCodec&>(**codec).momentum(), 0.9);
  codec = CreateCodec(Momentum(0.25), 10);
  ASSERT_TRUE(codec.ok()) << codec.status();
  EXPECT_EQ(static_cast<SignumCodec&>(**codec).momentum(), 0.25);
  EXPECT_EQ(CreateCodec(Momentum(1.5), 10).status().message(),
            "codec.momentum: must be in [0, 1), got 1.5");
}

}  // namespace
}  // namespace tamp::compress
