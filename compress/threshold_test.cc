#include "compress/threshold.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compress/internal/codec_testing.h"
#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

int ReferenceIndexBits(size_t n) {
  int b = 1;
  while ((uint64_t{1} << b) < n) ++b;
  return b;
}

// The indices sent, by definition: |x| > threshold compared in double, NaN always.
std::vector<uint64_t> ReferenceSelection(const std::vector<float>& x, double threshold) {
  std::vector<uint64_t> indices;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::fabs(static_cast<double>(x[i])) > threshold) indices.push_back(i);
  }
  return indices;
}

uint64_t SentCount(const std::string& payload) {
  uint64_t count;
  std::memcpy(&count, payload.data() + kHeaderBytes, 8);
  return count;
}

std::vector<uint64_t> SentIndices(const std::string& payload, size_t n) {
  const uint64_t count = SentCount(payload);
  BitReader reader(absl::string_view(payload).substr(kHeaderBytes + 8));
  std::vector<uint64_t> indices(count);
  for (uint64_t& index : indices) EXPECT_TRUE(reader.Read(ReferenceIndexBits(n), &index).ok());
  return indices;
}

// A payload built by hand.
std::string MakePayload(size_t n, uint64_t count, const std::vector<uint64_t>& indices,
                        const std::vector<float>& values) {
  std::string payload;
  AppendHeader(CodecId::kThreshold, ThresholdCodec::kVersion, n, &payload);
  payload.append(reinterpret_cast<const char*>(&count), 8);
  BitWriter writer(&payload);
  for (uint64_t index : indices) writer.Write(index, ReferenceIndexBits(n));
  writer.Finish();
  payload.append(reinterpret_cast<const char*>(values.data()), 4 * values.size());
  return payload;
}

TEST(ThresholdCodecTest, SendsExactlyTheEntriesAboveTheThreshold) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (size_t n : {1, 2, 3, 17, 100, 1001, 65536}) {
    std::vector<float> input(n);
    for (float& x : input) x = normal(rng);
    if (n > 10) {
      input[1] = kNaN;
      input[2] = -kInf;
      input[3] = -0.0f;
      input[4] = -kNaN;
    }
    for (double threshold : {1e-30, 0.1, 1.0, 2.5, 1e30}) {
      ThresholdCodec codec(n, threshold);
      std::string payload;
      ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
      const std::vector<uint64_t> expected = ReferenceSelection(input, threshold);
      ASSERT_EQ(SentCount(payload), expected.size()) << n << " " << threshold;
      ASSERT_EQ(SentIndices(payload, n), expected) << n << " " << threshold;
      std::vector<float> out(n, 42.0f);
      ASSERT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
      for (size_t i = 0, j = 0; i < n; ++i) {
        if (j < expected.size() && expected[j] == i) {
          ++j;
          if (std::isnan(input[i])) {
            EXPECT_EQ(Bits(out[i]), 0x7fc00000u) << i;  // Canonical (compress/wire_format.h).
          } else {
            EXPECT_EQ(out[i], input[i]) << i;
          }
        } else {
          EXPECT_EQ(out[i], 0.0f) << i;
        }
      }
    }
  }
}

TEST(ThresholdCodecTest, ComparesWithTheExactDoubleThreshold) {
  // 0.1f is 0.100000001490116..., just above the double 0.1; the float below it is not.
  const float above = 0.1f;
  const float below = std::nextafter(0.1f, 0.0f);
  ThresholdCodec codec(4, 0.1);
  std::string payload;
  ASSERT_TRUE(codec.Encode(std::vector<float>{below, above, -above, -below}, {}, &payload).ok());
  EXPECT_THAT(SentIndices(payload, 4), ElementsAre(1, 2));
  // A threshold that is a float itself: equal is not above.
  ThresholdCodec one(3, 1.0);
  ASSERT_TRUE(
      one.Encode(std::vector<float>{1.0f, -1.0f, std::nextafter(1.0f, 2.0f)}, {}, &payload).ok());
  EXPECT_THAT(SentIndices(payload, 3), ElementsAre(2));
  EXPECT_EQ(ThresholdCodec::KeyFloor(1.0), 0x3f800000u);
  EXPECT_EQ(ThresholdCodec::KeyFloor(1e300), 0x7f7fffffu);  // Only inf and NaN exceed it.
  EXPECT_EQ(ThresholdCodec::KeyFloor(1e-300), 0u);          // Every non-zero exceeds it.
}

TEST(ThresholdCodecTest, NothingAboveIsAValidEmptyPayload) {
  ThresholdCodec codec(1000, 5.0);
  std::vector<float> input(1000, 4.9f);
  std::string payload;
  ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
  EXPECT_EQ(payload.size(), 20u);
  EXPECT_EQ(SentCount(payload), 0u);
  std::vector<float> out(1000, 1.0f);
  ASSERT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, std::vector<float>(1000, 0.0f));
  ASSERT_TRUE(codec.DecodeAdd(payload, {}, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, std::vector<float>(1000, 0.0f));
}

TEST(ThresholdCodecTest, PayloadSizeMatchesTheFormulaForEveryCount) {
  for (size_t n : {1, 2, 3, 8, 9, 100, 1000, 4097}) {
    const size_t b = ReferenceIndexBits(n);
    std::vector<float> input(n);
    for (size_t i = 0; i < n; ++i) input[i] = static_cast<float>(i);  // c = n - 1 - floor(t).
    for (ValueFormat format : {ValueFormat::kFp32, ValueFormat::kFp16}) {
      const size_t v = format == ValueFormat::kFp16 ? 2 : 4;
      for (double threshold : {0.5, n / 3.0 + 0.5, n - 1.5, static_cast<double>(n)}) {
        if (threshold <= 0) continue;
        ThresholdCodec codec(n, threshold, format);
        std::string payload;
        ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
        const uint64_t c = SentCount(payload);
        ASSERT_EQ(c, ReferenceSelection(input, threshold).size());
        EXPECT_EQ(payload.size(), 12 + 8 + (c * b + 7) / 8 + v * c) << n << " " << threshold;
        EXPECT_EQ(ThresholdCodec::PayloadBytes(n, c, format), payload.size());
      }
      EXPECT_EQ(ThresholdCodec(n, 1.0, format).MaxPayloadBytes(), 20 + (n * b + 7) / 8 + v * n);
    }
  }
  // By hand: n = 1000 (b = 10), c = 10: 12 + 8 + 13 + 40; all 1000: 12 + 8 + 1250 + 4000.
  EXPECT_EQ(ThresholdCodec::PayloadBytes(1000, 10, ValueFormat::kFp32), 73u);
  EXPECT_EQ(ThresholdCodec(1000, 1.0).MaxPayloadBytes(), 5270u);
  EXPECT_EQ(ThresholdCodec(1, 1.0).MaxPayloadBytes(), 25u);  // n = 1: b = 1.
}

TEST(ThresholdCodecTest, Fp16ValuesAndDecodeAdd) {
  ThresholdCodec codec(5, 1.0, ValueFormat::kFp16);
  std::string a, b;
  ASSERT_TRUE(codec.Encode(std::vector<float>{0.5f, -2, 1e6f, 0.1f, 1.5f}, {}, &a).ok());
  ASSERT_TRUE(codec.Encode(std::vector<float>{3, 0, 0, 0, -1.25f}, {}, &b).ok());
  EXPECT_EQ(a.size(), 20u + 2 + 6);  // c = 3, b = 3: 9 bits.
  std::vector<float> out(5, 9.0f);
  ASSERT_TRUE(codec.Decode(a, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(0, -2, 65504, 0, 1.5f));
  std::vector<float> accumulator(5, 1.0f);
  ASSERT_TRUE(codec.DecodeAdd(a, {}, absl::MakeSpan(accumulator)).ok());
  ASSERT_TRUE(codec.DecodeAdd(b, {}, absl::MakeSpan(accumulator)).ok());
  EXPECT_THAT(accumulator, ElementsAre(4, -1, 65505, 1, 1.25f));
  codec.FinishAggregate(2, absl::MakeSpan(accumulator));
  EXPECT_THAT(accumulator, ElementsAre(2, -0.5f, 32752.5f, 0.5f, 0.625f));
}

TEST(ThresholdCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  ThresholdCodec codec(5, 1.0);
  const std::string good = MakePayload(5, 2, {1, 4}, {2.0f, -1.0f});
  std::vector<float> out(5);
  ASSERT_TRUE(codec.Decode(good, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(0, 2, 0, 0, -1));
  std::string padding = good;
  padding[20] |= 0x40;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good.substr(0, 19), "threshold payload body is 7 bytes, too short for the 8-byte count"},
      {good.substr(0, 12), "threshold payload body is 0 bytes, too short for the 8-byte count"},
      {MakePayload(5, 6, {1, 2, 3, 4, 0, 1}, {1, 1, 1, 1, 1, 1}),
       "threshold count 6 exceeds the chunk size 5"},
      {MakePayload(5, ~uint64_t{0}, {}, {}),
       "threshold count 18446744073709551615 exceeds the chunk size 5"},
      {good.substr(0, good.size() - 1),
       "threshold payload body is 16 bytes, expected 17 for count 2 (3 bits per index)"},
      {good + "x",
       "threshold payload body is 18 bytes, expected 17 for count 2 (3 bits per index)"},
      {MakePayload(5, 3, {1, 4}, {2, -1}),
       "threshold payload body is 17 bytes, expected 22 for count 3 (3 bits per index)"},
      {MakePayload(5, 0, {1, 4}, {2, -1}),
       "threshold payload body is 17 bytes, expected 8 for count 0 (3 bits per index)"},
      {MakePayload(5, 2, {3, 3}, {2, -1}),
       "threshold indices not strictly increasing: entry 1 is 3 after 3"},
      {MakePayload(5, 2, {4, 2}, {2, -1}),
       "threshold indices not strictly increasing: entry 1 is 2 after 4"},
      {MakePayload(5, 2, {1, 5}, {2, -1}),
       "threshold index 5 (entry 1) is out of range for 5 elements"},
      {padding, "threshold index padding bits are not zero"},
      {MakePayload(6, 2, {1, 4}, {2, -1}), "element count 6 does not match chunk size 5"},
  };
  for (const auto& [payload, message] : cases) {
    codec_testing::ExpectRejected(codec, payload, message);
  }
}

TEST(ThresholdCodecTest, ErrorFeedbackIdentityHolds) {
  for (ValueFormat format : {ValueFormat::kFp32, ValueFormat::kFp16}) {
    ThresholdCodec codec(2999, 1.5, format);
    codec_testing::ExpectErrorFeedbackIdentity(
        codec, 5, 2, [](int step, absl::Span<const float>, absl::Span<const float> residual) {
          // What stays behind is at most the threshold (plus fp16 rounding of what was sent).
          for (size_t i = 0; i < residual.size(); ++i) {
            ASSERT_LE(std::fabs(residual[i]), 1.5f) << "step " << step << " i " << i;
          }
        });
  }
}

TEST(ThresholdCodecTest, ValidateSpecNamesTheField) {
  config::Codec spec;
  spec.set_name("threshold");
  EXPECT_EQ(ThresholdCodec::ValidateSpec(spec, "push").message(),
            "push: codec 'threshold' needs 'threshold'");
  for (double bad : {0.0, -1.0, static_cast<double>(kNaN), static_cast<double>(kInf)}) {
    spec.set_threshold(bad);
    EXPECT_EQ(ThresholdCodec::ValidateSpec(spec, "push").code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  spec.set_threshold(0);
  EXPECT_EQ(ThresholdCodec::ValidateSpec(spec, "push").message(),
            "push.threshold: must be finite and > 0, got 0");
  spec.set_threshold(-std::numeric_limits<double>::infinity());
  EXPECT_EQ(ThresholdCodec::ValidateSpec(spec, "push").message(),
            "push.threshold: must be finite and > 0, got -inf");
  spec.set_threshold(0.25);
  EXPECT_TRUE(ThresholdCodec::ValidateSpec(spec, "push").ok());
  spec.set_fp16_values(true);
  std::unique_ptr<Codec> codec = ThresholdCodec::Create(spec, 100);
  EXPECT_EQ(codec->id(), CodecId::kThreshold);
  EXPECT_EQ(static_cast<ThresholdCodec&>(*codec).threshold(), 0.25);
  EXPECT_EQ(codec->MaxPayloadBytes(), 20u + 88 + 200);  // b = 7: 700 bits.
}

}  // namespace
}  // namespace tamp::compress
