// Checks shared by the codec tests: every codec's decoder rejections; the quantization codecs'
// (fp16, bf16, qsgd, terngrad, natural, maxmin) error-feedback identity and moments.
// Test-only; internal to compress/.
//
//   ExpectErrorFeedbackIdentity(codec, steps, seed)   RESIDUAL memory keeps its identity
//   ExpectRejected(codec, payload, message)           Decode and DecodeAdd refuse, untouched
//   DecodeMoments(codec, input, keys)                 per-value mean/variance over many keys
//   NormalValues(n, seed), WithBits(x, bits), Key(step)
#ifndef TAMP_COMPRESS_INTERNAL_CODEC_TESTING_H_
#define TAMP_COMPRESS_INTERNAL_CODEC_TESTING_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "compress/wire_format.h"
#include "gtest/gtest.h"

namespace tamp::compress::codec_testing {

// A key whose step varies: each step of a test is a new draw of the codec's randomness.
inline RandomKey Key(uint64_t step, uint64_t seed = 17) {
  return {.seed = seed, .step = step, .chunk = 3, .worker = 1};
}

// n values from N(0, 1), fixed by `seed`.
inline std::vector<float> NormalValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> values(n);
  for (float& x : values) x = normal(rng);
  return values;
}

// The float with these bits.
inline float WithBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

inline uint32_t BitsOf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

// Runs `steps` steps of RESIDUAL error feedback over `codec` with fresh N(0, 1) inputs and
// a new key each step, checking input + old residual == decode(payload) + new residual up to
// the rounding of the one fp32 subtraction (c = input + old residual is formed in fp32 first,
// as the implementation does; a sparsifier's identity is exact, which this admits).
// `after_step(step, decoded, residual)` adds the codec's own checks of each step.
template <typename AfterStep>
void ExpectErrorFeedbackIdentity(Codec& codec, int steps, uint32_t seed, AfterStep after_step) {
  const size_t n = codec.size();
  config::ErrorFeedback spec;
  spec.set_kind(config::ErrorFeedback::RESIDUAL);
  absl::StatusOr<std::unique_ptr<ErrorFeedback>> memory = ErrorFeedback::Create(spec, n);
  ASSERT_TRUE(memory.ok()) << memory.status();
  std::string payload;
  std::vector<float> decoded(n);
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> input = NormalValues(n, seed + step);
    const std::vector<float> old_residual((*memory)->residual().begin(),
                                          (*memory)->residual().end());
    ASSERT_TRUE((*memory)->Compress(codec, input, Key(step), &payload).ok());
    ASSERT_TRUE(codec.Decode(payload, Key(step), absl::MakeSpan(decoded)).ok());
    for (size_t i = 0; i < n; ++i) {
      const float c = input[i] + old_residual[i];
      const float residual = (*memory)->residual()[i];
      const double error = std::fabs(double{c} - (double{decoded[i]} + residual));
      ASSERT_LE(error, std::fabs(residual) * std::numeric_limits<float>::epsilon() / 2)
          << "step " << step << " element " << i << ": c " << c << " decoded " << decoded[i]
          << " residual " << residual;
    }
    after_step(step, absl::Span<const float>(decoded), (*memory)->residual());
  }
}

inline void ExpectErrorFeedbackIdentity(Codec& codec, int steps, uint32_t seed) {
  ExpectErrorFeedbackIdentity(codec, steps, seed,
                              [](int, absl::Span<const float>, absl::Span<const float>) {});
}

// Decode and DecodeAdd both fail with INVALID_ARGUMENT and exactly `message`, and leave
// their output as it was.
inline void ExpectRejected(const Codec& codec, const std::string& payload,
                           const std::string& message) {
  std::vector<float> out(codec.size(), 7.0f);
  absl::Status status = codec.Decode(payload, Key(0), absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
  EXPECT_EQ(status.message(), message);
  status = codec.DecodeAdd(payload, Key(0), absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << message;
  EXPECT_EQ(status.message(), message);
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i], 7.0f) << message << ": element " << i << " was written";
  }
}

// The header-level rejections every codec shares: truncated header, another codec's id, a
// newer or older version, another element count, and a body one byte short or long. `good` is a
// valid payload of `codec`; `body_message(bytes)` is the codec's message for a body of
// `bytes` bytes.
template <typename BodyMessage>
void ExpectHeaderAndLengthChecks(const Codec& codec, const std::string& good,
                                 BodyMessage body_message) {
  const std::string name(CodecName(codec.id()));
  const int id = static_cast<int>(codec.id());
  const size_t body = good.size() - kHeaderBytes;
  ExpectRejected(codec, good.substr(0, good.size() - 1), body_message(body - 1));
  ExpectRejected(codec, good + "x", body_message(body + 1));
  ExpectRejected(codec, good.substr(0, kHeaderBytes), body_message(0));
  ExpectRejected(codec, good.substr(0, 5), "payload truncated: 5 bytes, header needs 12");
  std::string other = good;
  other[2] = static_cast<char>(CodecId::kNone);
  ExpectRejected(codec, other,
                 absl::StrCat("payload is for codec 0 (none), expected ", id, " (", name, ")"));
  // The next version, and the previous one where there is one (an old stream or layout).
  const int current = static_cast<uint8_t>(good[3]);
  for (const int other_version : {current + 1, current - 1}) {
    if (other_version < 1) continue;
    std::string version = good;
    version[3] = static_cast<char>(other_version);
    ExpectRejected(codec, version,
                   absl::StrCat("unsupported ", name, " payload version ", other_version,
                                " (this build reads ", current, ")"));
  }
  std::string count = good;
  const uint64_t wrong = codec.size() + 1;
  std::memcpy(&count[4], &wrong, 8);
  ExpectRejected(
      codec, count,
      absl::StrCat("element count ", wrong, " does not match chunk size ", codec.size()));
}

// Per-value sample mean and variance of decode(encode(input, key)) over keys Key(0..draws).
struct Moments {
  std::vector<double> mean;
  std::vector<double> variance;  // Unbiased sample variance.
};

inline Moments DecodeMoments(Codec& codec, const std::vector<float>& input, int draws) {
  const size_t n = input.size();
  std::vector<double> sum(n, 0.0), squares(n, 0.0);
  std::vector<float> decoded(n);
  std::string payload;
  for (int d = 0; d < draws; ++d) {
    EXPECT_TRUE(codec.Encode(input, Key(d), &payload).ok());
    EXPECT_TRUE(codec.Decode(payload, Key(d), absl::MakeSpan(decoded)).ok());
    for (size_t i = 0; i < n; ++i) {
      sum[i] += decoded[i];
      squares[i] += double{decoded[i]} * decoded[i];
    }
  }
  Moments moments{std::vector<double>(n), std::vector<double>(n)};
  for (size_t i = 0; i < n; ++i) {
    moments.mean[i] = sum[i] / draws;
    moments.variance[i] = std::max(0.0, (squares[i] - sum[i] * sum[i] / draws) / (draws - 1));
  }
  return moments;
}

// Unbiasedness of stochastic rounding between two grid points: each value i is decoded to
// lower[i] or lower[i] + gap[i] (gap may be negative) with mean target[i], so its sample
// mean over `draws` draws has standard error |gap| * sqrt(p (1 - p) / draws),
// p = (target - lower) / gap. Checks every
// value within 5 standard errors (plus 1e-6 relative slack for fp32 rounding), and the sum
// of the errors of all values within 5 of its standard errors (a sensitive test of a
// systematic bias).
inline void ExpectUnbiased(const std::vector<double>& mean, const std::vector<double>& target,
                           const std::vector<double>& lower, const std::vector<double>& gap,
                           int draws) {
  double total_error = 0, total_variance = 0;
  for (size_t i = 0; i < mean.size(); ++i) {
    const double p = gap[i] != 0 ? std::clamp((target[i] - lower[i]) / gap[i], 0.0, 1.0) : 0.0;
    const double standard_error = std::fabs(gap[i]) * std::sqrt(p * (1 - p) / draws);
    const double slack = 1e-6 * (std::fabs(target[i]) + std::fabs(gap[i]));
    EXPECT_LE(std::fabs(mean[i] - target[i]), 5 * standard_error + slack)
        << "value " << i << ": target " << target[i] << ", mean " << mean[i] << ", p " << p;
    total_error += mean[i] - target[i];
    total_variance += standard_error * standard_error;
  }
  double total_slack = 0;
  for (size_t i = 0; i < mean.size(); ++i)
    total_slack += 1e-6 * (std::fabs(target[i]) + std::fabs(gap[i]));
  EXPECT_LE(std::fabs(total_error), 5 * std::sqrt(total_variance) + total_slack)
      << "systematic bias";
}

}  // namespace tamp::compress::codec_testing

#endif  // TAMP_COMPRESS_INTERNAL_CODEC_TESTING_H_
