#include "compress/dgc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "compress/internal/codec_testing.h"
#include "compress/topk.h"
#include "compress/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::ElementsAre;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

int ReferenceIndexBits(size_t n) {
  int b = 1;
  while ((uint64_t{1} << b) < n) ++b;
  return b;
}

double Magnitude(float x) { return std::isnan(x) ? INFINITY : std::fabs(static_cast<double>(x)); }

// Brute force: stable sort by magnitude (NaN as +inf), descending, keep k, sort by index.
std::vector<uint64_t> ReferenceTopK(const std::vector<float>& x, size_t k) {
  std::vector<uint64_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint64_t a, uint64_t b) { return Magnitude(x[a]) > Magnitude(x[b]); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

std::vector<uint64_t> SentIndices(const std::string& payload, size_t n, size_t k) {
  BitReader reader(absl::string_view(payload).substr(kHeaderBytes));
  std::vector<uint64_t> indices(k);
  for (uint64_t& index : indices) EXPECT_TRUE(reader.Read(ReferenceIndexBits(n), &index).ok());
  return indices;
}

// k for a ratio, as the codec computes it (clamp(round(ratio * n), 1, n)).
size_t K(double ratio, size_t n) {
  return std::clamp<size_t>(static_cast<size_t>(std::llround(ratio * n)), 1, n);
}

// The positions the sample of `key` reads (compress/dgc.h step 1).
std::vector<size_t> SampledPositions(const RandomKey& key, size_t n, size_t s) {
  std::vector<size_t> positions;
  compress::SamplePositions(key, n, s, &positions);
  return positions;
}

// Encodes with dgc and checks the guarantee: the payload is topk's for the same input,
// byte for byte apart from the codec id.
void ExpectSameAsTopK(DgcCodec& dgc, const std::vector<float>& input, const RandomKey& key) {
  std::string payload, reference;
  ASSERT_TRUE(dgc.Encode(input, key, &payload).ok());
  TopKCodec topk(input.size(), dgc.k());
  ASSERT_TRUE(topk.Encode(input, key, &reference).ok());
  ASSERT_EQ(payload.size(), reference.size());
  EXPECT_EQ(payload[2], static_cast<char>(CodecId::kDgc));
  reference[2] = static_cast<char>(CodecId::kDgc);
  ASSERT_TRUE(payload == reference) << "n=" << input.size() << " k=" << dgc.k();
  EXPECT_EQ(SentIndices(payload, input.size(), dgc.k()), ReferenceTopK(input, dgc.k()));
}

TEST(DgcCodecTest, PayloadSizeIsTopKsFormula) {
  for (size_t n : {1, 2, 3, 9, 100, 1000, 65537}) {
    for (double ratio : {0.001, 0.01, 0.3, 1.0}) {
      const size_t k = K(ratio, n);
      const size_t b = ReferenceIndexBits(n);
      DgcCodec fp32(n, k, 0.01);
      DgcCodec fp16(n, k, 0.01, ValueFormat::kFp16);
      EXPECT_EQ(fp32.MaxPayloadBytes(), 12 + (k * b + 7) / 8 + 4 * k) << n << " " << ratio;
      EXPECT_EQ(fp16.MaxPayloadBytes(), 12 + (k * b + 7) / 8 + 2 * k) << n << " " << ratio;
      std::vector<float> input(n);
      std::iota(input.begin(), input.end(), 1.0f);
      std::string payload;
      ASSERT_TRUE(fp32.Encode(input, {}, &payload).ok());
      EXPECT_EQ(payload.size(), fp32.MaxPayloadBytes());
      ASSERT_TRUE(fp16.Encode(input, {}, &payload).ok());
      EXPECT_EQ(payload.size(), fp16.MaxPayloadBytes());
    }
  }
  // By hand: n = 1000 (b = 10), k = 10: 12 + 13 + 40.
  EXPECT_EQ(DgcCodec(1000, 10, 0.01).MaxPayloadBytes(), 65u);
}

TEST(DgcCodecTest, SampleSizeRoundsAndClamps) {
  EXPECT_EQ(SampleSize(0.01, 1 << 20), 10486u);
  EXPECT_EQ(SampleSize(0.01, 10), 1u);
  EXPECT_EQ(SampleSize(1.0, 10), 10u);
  EXPECT_EQ(SampleSize(0.07, 100), 7u);
}

TEST(DgcCodecTest, SampledPathSendsExactlyTheTopK) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  const size_t n = 1 << 16;
  DgcCodec codec(n, K(0.01, n), 0.05);
  std::vector<float> input(n);
  for (uint64_t step = 0; step < 20; ++step) {
    for (float& x : input) x = normal(rng) * (1 + step);
    ExpectSameAsTopK(codec, input, {.seed = 3, .step = step, .chunk = 1, .worker = 2});
  }
  EXPECT_EQ(codec.stats().selections, 20u);
  EXPECT_EQ(codec.stats().sampled + codec.stats().exact_fallbacks, 20u);
  EXPECT_GE(codec.stats().sampled, 19u);  // A miss has a chance of about 0.1% per encode.
}

TEST(DgcCodecTest, AMisleadingSampleIsRetriedWithAHalvedFloor) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  const size_t n = 1 << 16;
  const RandomKey key{.seed = 9, .step = 4, .chunk = 0, .worker = 1};
  DgcCodec codec(n, K(0.015, n), 0.01);  // k = 983, s = 655.
  std::vector<float> input(n);
  for (float& x : input) x = normal(rng);
  // The sample sees only 10s, which fewer than k entries reach: floors 10 and 5 gather too
  // few; 2.5 gathers the 10s plus the normal tail, enough.
  for (size_t i : SampledPositions(key, n, codec.sample_size())) input[i] = 10;
  ExpectSameAsTopK(codec, input, key);
  EXPECT_EQ(codec.stats().retries, 2u);
  EXPECT_EQ(codec.stats().sampled, 1u);
  EXPECT_EQ(codec.stats().exact_fallbacks, 0u);

  // With 1e6 instead, three halvings do not get there: exact selection.
  for (size_t i : SampledPositions(key, n, codec.sample_size())) input[i] = -1e6f;
  ExpectSameAsTopK(codec, input, key);
  EXPECT_EQ(codec.stats().retries, 2u + kMaxFloorRetries);
  EXPECT_EQ(codec.stats().sampled, 1u);
  EXPECT_EQ(codec.stats().exact_fallbacks, 1u);
}

TEST(DgcCodecTest, FallsBackToExactSelectionWhenTheSampleCannotHelp) {
  // Too many entries clear the floor: all values equal, more than 4k + 65536 of them.
  {
    const size_t n = 100000;
    DgcCodec codec(n, K(0.001, n), 0.01);
    std::vector<float> input(n, 1.0f);
    ExpectSameAsTopK(codec, input, {.step = 1});
    EXPECT_EQ(codec.stats().exact_fallbacks, 1u);
    EXPECT_EQ(codec.stats().retries, 0u);
  }
  // The floor is 0: mostly zeros, fewer non-zeros than k.
  {
    const size_t n = 10000;
    DgcCodec codec(n, K(0.05, n), 0.1);
    std::vector<float> input(n, 0.0f);
    for (size_t i = 0; i < n; i += 100) input[i] = static_cast<float>(i % 7) - 3;
    ExpectSameAsTopK(codec, input, {.step = 2});
    EXPECT_EQ(codec.stats().exact_fallbacks, 1u);
    EXPECT_EQ(codec.stats().retries, 0u);
  }
  // The sample is too small to resolve the rank (small chunks), and k = n.
  for (size_t n : {1, 2, 3, 10, 101}) {
    std::vector<float> input(n);
    std::iota(input.begin(), input.end(), -1.5f);
    for (double ratio : {0.01, 0.5, 1.0}) {
      DgcCodec codec(n, K(ratio, n), 0.01);
      ExpectSameAsTopK(codec, input, {.step = 3});
      EXPECT_EQ(codec.stats().exact_fallbacks, 1u) << n << " " << ratio;
    }
  }
}

TEST(DgcCodecTest, NaNAndInfinityAreSelectedFirstOnEveryPath) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal;
  const size_t n = 1 << 15;
  for (int nans : {3, 300, 3000}) {  // Fewer than, about, and more than the sample's rank.
    std::vector<float> input(n);
    for (float& x : input) x = normal(rng);
    for (int j = 0; j < nans; ++j) {
      const float specials[] = {kNaN, -kNaN, kInf, -kInf};
      input[rng() % n] = specials[j % 4];
    }
    input[5] = -0.0f;
    DgcCodec codec(n, K(0.05, n), 0.05);
    ExpectSameAsTopK(codec, input, {.step = static_cast<uint64_t>(nans)});
    std::string payload;
    ASSERT_TRUE(codec.Encode(input, {}, &payload).ok());
    std::vector<float> out(n);
    ASSERT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
    if (static_cast<size_t>(nans) >= codec.k()) continue;  // Then not every one fits.
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(input[i])) {
        EXPECT_TRUE(std::isnan(out[i])) << i;
      } else if (std::isinf(input[i])) {
        EXPECT_EQ(out[i], input[i]) << i;
      }
    }
  }
}

TEST(DgcCodecTest, TheKeyDoesNotChangeThePayload) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const size_t n = 50000;
  std::vector<float> input(n);
  for (float& x : input) x = normal(rng);
  DgcCodec codec(n, K(0.01, n), 0.01);
  std::string first, other;
  ASSERT_TRUE(codec.Encode(input, {.seed = 1, .worker = 0}, &first).ok());
  for (uint32_t worker = 1; worker < 5; ++worker) {
    ASSERT_TRUE(
        codec.Encode(input, {.seed = worker * 77, .step = worker, .worker = worker}, &other).ok());
    EXPECT_TRUE(first == other) << worker;
  }
}

TEST(DgcCodecTest, Fp16ValuesAndDecodeAdd) {
  DgcCodec codec(6, 2, 1.0, ValueFormat::kFp16);
  std::string a, b;
  ASSERT_TRUE(codec.Encode(std::vector<float>{0.1f, -9, 0, 1e6f, 2, 0}, {}, &a).ok());
  ASSERT_TRUE(codec.Encode(std::vector<float>{0, 3, 0, 0, -4, 0}, {}, &b).ok());
  EXPECT_EQ(a.size(), 12u + 1 + 4);  // b = 3: two indices in 6 bits, one byte; 2 bytes each.
  std::vector<float> out(6, 5.0f);
  ASSERT_TRUE(codec.Decode(a, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(0, -9, 0, 65504, 0, 0));
  std::vector<float> accumulator = {1, 1, 1, 1, 1, 1};
  ASSERT_TRUE(codec.DecodeAdd(a, {}, absl::MakeSpan(accumulator)).ok());
  ASSERT_TRUE(codec.DecodeAdd(b, {}, absl::MakeSpan(accumulator)).ok());
  EXPECT_THAT(accumulator, ElementsAre(1, -5, 1, 65505, -3, 1));
}

// A payload built by hand: k indices then fp32 values.
std::string MakePayload(size_t n, const std::vector<uint64_t>& indices,
                        const std::vector<float>& values, CodecId id = CodecId::kDgc) {
  std::string payload;
  AppendHeader(id, DgcCodec::kVersion, n, &payload);
  BitWriter writer(&payload);
  for (uint64_t index : indices) writer.Write(index, ReferenceIndexBits(n));
  writer.Finish();
  payload.append(reinterpret_cast<const char*>(values.data()), 4 * values.size());
  return payload;
}

TEST(DgcCodecTest, RejectsBadPayloadsWithoutTouchingTheOutput) {
  DgcCodec codec(5, 2, 0.5);
  const std::string good = MakePayload(5, {1, 4}, {2.0f, -1.0f});
  std::vector<float> out(5);
  ASSERT_TRUE(codec.Decode(good, {}, absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ElementsAre(0, 2, 0, 0, -1));
  std::string padding = good;
  padding[12] |= 0x40;
  std::string version = good;
  version[3] = 1;  // Version 1 kept NaN payloads (compress/wire_format.h).
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good.substr(0, good.size() - 1),
       "dgc payload body is 8 bytes, expected 9 (k = 2, 3 bits per index)"},
      {good + "x", "dgc payload body is 10 bytes, expected 9 (k = 2, 3 bits per index)"},
      {good.substr(0, 11), "payload truncated: 11 bytes, header needs 12"},
      {MakePayload(5, {4, 1}, {2, -1}),
       "dgc indices not strictly increasing: entry 1 is 1 after 4"},
      {MakePayload(5, {2, 2}, {2, -1}),
       "dgc indices not strictly increasing: entry 1 is 2 after 2"},
      {MakePayload(5, {1, 7}, {2, -1}), "dgc index 7 (entry 1) is out of range for 5 elements"},
      {padding, "dgc index padding bits are not zero"},
      {version, "unsupported dgc payload version 1 (this build reads 2)"},
      {MakePayload(5, {1, 4}, {2, -1}, CodecId::kTopK),
       "payload is for codec 1 (topk), expected 4 (dgc)"},
      {MakePayload(4, {1, 3}, {2, -1}), "element count 4 does not match chunk size 5"},
  };
  for (const auto& [payload, message] : cases) {
    codec_testing::ExpectRejected(codec, payload, message);
  }
}

TEST(DgcCodecTest, ErrorFeedbackIdentityHolds) {
  for (ValueFormat format : {ValueFormat::kFp32, ValueFormat::kFp16}) {
    const size_t n = 3001;
    DgcCodec codec(n, K(0.02, n), 0.1, format);
    codec_testing::ExpectErrorFeedbackIdentity(
        codec, 5, 6, [&](int step, absl::Span<const float> decoded, absl::Span<const float>) {
          EXPECT_EQ(std::count_if(decoded.begin(), decoded.end(), [](float v) { return v != 0; }),
                    codec.k())
              << "step " << step;
        });
  }
}

TEST(DgcCodecTest, ValidateSpecNamesTheField) {
  config::Codec spec;
  spec.set_name("dgc");
  EXPECT_EQ(DgcCodec::ValidateSpec(spec, "push").message(), "push: codec 'dgc' needs 'ratio'");
  spec.set_ratio(0.01);
  EXPECT_TRUE(DgcCodec::ValidateSpec(spec, "push").ok());
  spec.set_sample_ratio(0);
  EXPECT_EQ(DgcCodec::ValidateSpec(spec, "push").message(),
            "push.sample_ratio: must be in (0, 1], got 0");
  spec.set_sample_ratio(1.5);
  EXPECT_EQ(DgcCodec::ValidateSpec(spec, "push").message(),
            "push.sample_ratio: must be in (0, 1], got 1.5");
  spec.set_sample_ratio(0.001);
  EXPECT_TRUE(DgcCodec::ValidateSpec(spec, "push").ok());
  spec.set_ratio(2);
  EXPECT_EQ(DgcCodec::ValidateSpec(spec, "push").message(), "push.ratio: must be in (0, 1], got 2");
  spec.set_ratio(0.1);
  spec.set_fp16_values(true);
  std::unique_ptr<Codec> codec = DgcCodec::Create(spec, 1000);
  EXPECT_EQ(codec->id(), CodecId::kDgc);
  EXPECT_EQ(codec->MaxPayloadBytes(), 12u + 125 + 200);  // k = 100, b = 10.
  EXPECT_EQ(static_cast<DgcCodec&>(*codec).sample_size(), 1u);
}

TEST(DgcCodecTest, SamplePositionsAreOnePerStratum) {
  for (size_t n : {1, 7, 100, 1001, 65536}) {
    for (size_t s : {size_t{1}, size_t{3}, n / 7 + 1, n}) {
      if (s > n) continue;
      const RandomKey key{.seed = 2, .step = n, .chunk = 1, .worker = 4};
      const std::vector<size_t> positions = SampledPositions(key, n, s);
      ASSERT_EQ(positions.size(), s);
      for (size_t j = 0; j < s; ++j) {
        ASSERT_GE(positions[j], j * n / s) << n << " " << s << " " << j;
        ASSERT_LT(positions[j], (j + 1) * n / s) << n << " " << s << " " << j;
      }
      if (s == n) continue;
      // Offsets come from the key: the worker's own stream.
      EXPECT_EQ(positions, SampledPositions(key, n, s));
      if (n / s >= 8) {
        EXPECT_NE(positions,
                  SampledPositions({.seed = 2, .step = n, .chunk = 1, .worker = 5}, n, s));
      }
    }
  }
}

}  // namespace
}  // namespace tamp::compress
