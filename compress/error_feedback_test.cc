#include "compress/error_feedback.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compress/none.h"
#include "compress/topk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

std::unique_ptr<ErrorFeedback> Make(config::ErrorFeedback::Kind kind, size_t n) {
  config::ErrorFeedback spec;
  spec.set_kind(kind);
  absl::StatusOr<std::unique_ptr<ErrorFeedback>> memory = ErrorFeedback::Create(spec, n);
  EXPECT_TRUE(memory.ok()) << memory.status();
  return *std::move(memory);
}

std::vector<float> Decode(const Codec& codec, const std::string& payload) {
  std::vector<float> out(codec.size());
  EXPECT_TRUE(codec.Decode(payload, {}, absl::MakeSpan(out)).ok());
  return out;
}

TEST(ErrorFeedbackTest, RejectsUnknownKinds) {
  config::ErrorFeedback spec;
  spec.set_kind(static_cast<config::ErrorFeedback::Kind>(7));
  const absl::Status status = ErrorFeedback::Create(spec, 4).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "error feedback kind 7 is not supported");
}

TEST(ErrorFeedbackTest, NoneKeepsNoResidualAndEncodesTheInputAsIs) {
  const size_t n = 6;
  auto memory = Make(config::ErrorFeedback::NONE, n);
  TopKCodec codec(n, 2);
  const std::vector<float> input = {1, -5, 2, 4, 0, 3};
  std::string payload, direct;
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(memory->Compress(codec, input, {}, &payload).ok());
    EXPECT_TRUE(memory->residual().empty());
    ASSERT_TRUE(codec.Encode(input, {}, &direct).ok());
    EXPECT_EQ(payload, direct);  // Nothing carried over: same bytes every step.
  }
}

// input + old residual == decoded + new residual, to the rounding of the one fp32
// subtraction residual = c - decoded (c = input + old residual is computed in fp32, as the
// implementation does).
void ExpectIdentityOverSteps(Codec& codec, int steps, uint32_t seed) {
  const size_t n = codec.size();
  auto memory = Make(config::ErrorFeedback::RESIDUAL, n);
  ASSERT_EQ(memory->residual().size(), n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> input(n);
  std::string payload;
  for (int step = 0; step < steps; ++step) {
    for (float& x : input) x = normal(rng);
    const std::vector<float> old_residual(memory->residual().begin(), memory->residual().end());
    ASSERT_TRUE(memory->Compress(codec, input, {}, &payload).ok());
    const std::vector<float> decoded = Decode(codec, payload);
    for (size_t i = 0; i < n; ++i) {
      const float c = input[i] + old_residual[i];
      const float residual = memory->residual()[i];
      const double error = std::fabs(double{c} - (double{decoded[i]} + residual));
      ASSERT_LE(error, std::fabs(residual) * std::numeric_limits<float>::epsilon() / 2)
          << "step " << step << " element " << i;
    }
  }
}

TEST(ErrorFeedbackTest, ResidualKeepsTheIdentityWithNone) {
  NoneCodec codec(100);
  ExpectIdentityOverSteps(codec, 5, 1);
}

TEST(ErrorFeedbackTest, ResidualKeepsTheIdentityWithTopK) {
  TopKCodec codec(1000, 37);
  ExpectIdentityOverSteps(codec, 20, 2);
}

TEST(ErrorFeedbackTest, ResidualIsExactlyWhatTopKDidNotSend) {
  auto memory = Make(config::ErrorFeedback::RESIDUAL, 4);
  TopKCodec codec(4, 1);
  std::string payload;
  ASSERT_TRUE(memory->Compress(codec, std::vector<float>{1, -4, 2, 3}, {}, &payload).ok());
  EXPECT_THAT(Decode(codec, payload), testing::ElementsAre(0, -4, 0, 0));
  EXPECT_THAT(memory->residual(), testing::ElementsAre(1, 0, 2, 3));
  // c = {2, -4, 4, 6}: the residual of index 3 now wins.
  ASSERT_TRUE(memory->Compress(codec, std::vector<float>{1, -4, 2, 3}, {}, &payload).ok());
  EXPECT_THAT(Decode(codec, payload), testing::ElementsAre(0, 0, 0, 6));
  EXPECT_THAT(memory->residual(), testing::ElementsAre(2, -4, 4, 0));
}

// A constant gradient through top-1%: entries that lose keep growing in the residual until
// they win, so every entry is sent, and sent + residual is the whole sum.
TEST(ErrorFeedbackTest, TopKWithResidualEventuallySendsEverything) {
  const size_t n = 200;
  const int steps = 400;
  auto memory = Make(config::ErrorFeedback::RESIDUAL, n);
  TopKCodec codec(n, 2);
  std::vector<float> gradient(n);
  for (size_t i = 0; i < n; ++i) gradient[i] = (i % 2 ? -1.0f : 1.0f) * (1.0f + 0.01f * i);
  std::vector<double> sent(n, 0.0);
  std::vector<int> times_sent(n, 0);
  std::string payload;
  for (int step = 0; step < steps; ++step) {
    ASSERT_TRUE(memory->Compress(codec, gradient, {}, &payload).ok());
    const std::vector<float> decoded = Decode(codec, payload);
    for (size_t i = 0; i < n; ++i) {
      sent[i] += decoded[i];
      times_sent[i] += decoded[i] != 0.0f;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    EXPECT_GE(times_sent[i], 1) << "element " << i << " was never sent";
    const double total = double{gradient[i]} * steps;
    EXPECT_NEAR(sent[i] + memory->residual()[i], total, 1e-4 * std::fabs(total)) << i;
  }
}


config::ErrorFeedback Spec(config::ErrorFeedback::Kind kind) {
  config::ErrorFeedback spec;
  spec.set_kind(kind);
  return spec;
}

std::unique_ptr<ErrorFeedback> Make(const config::ErrorFeedback& spec, size_t n) {
  absl::StatusOr<std::unique_ptr<ErrorFeedback>> memory = ErrorFeedback::Create(spec, n);
  EXPECT_TRUE(memory.ok()) << memory.status();
  return *std::move(memory);
}

std::vector<float> Vec(absl::Span<const float> span) { return {span.begin(), span.end()}; }

TEST(ErrorFeedbackTest, ValidateSpecNamesTheField) {
  constexpr char kPath[] = "compression.default_compression.push_feedback";
  auto validate = [&](const config::ErrorFeedback& spec) {
    return std::string(ValidateErrorFeedbackSpec(spec, kPath).message());
  };
  EXPECT_TRUE(ValidateErrorFeedbackSpec(Spec(config::ErrorFeedback::NONE), kPath).ok());
  config::ErrorFeedback spec = Spec(config::ErrorFeedback::RESIDUAL);
  EXPECT_TRUE(ValidateErrorFeedbackSpec(spec, kPath).ok());
  spec.set_scale(1);
  EXPECT_TRUE(ValidateErrorFeedbackSpec(spec, kPath).ok());
  spec.set_scale(0.5f);
  EXPECT_TRUE(ValidateErrorFeedbackSpec(spec, kPath).ok());
  spec.set_scale(0);
  EXPECT_EQ(validate(spec),
            "compression.default_compression.push_feedback.scale: must be in (0, 1], got 0");
  spec.set_scale(1.5f);
  EXPECT_EQ(validate(spec),
            "compression.default_compression.push_feedback.scale: must be in (0, 1], got 1.5");
  spec.set_scale(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(validate(spec),
            "compression.default_compression.push_feedback.scale: must be in (0, 1], got nan");
  spec.set_scale(1);
  spec.set_momentum(0.9f);
  EXPECT_EQ(validate(spec),
            "compression.default_compression.push_feedback.momentum: error feedback kind "
            "RESIDUAL takes no parameter 'momentum'");

  spec = Spec(config::ErrorFeedback::DGC_MOMENTUM);
  EXPECT_TRUE(ValidateErrorFeedbackSpec(spec, kPath).ok());
  spec.set_momentum(0);
  EXPECT_TRUE(ValidateErrorFeedbackSpec(spec, kPath).ok());
  spec.set_momentum(1);
  EXPECT_EQ(validate(spec),
            "compression.default_compression.push_feedback.momentum: must be in [0, 1), got 1");
  spec.set_momentum(-0.5f);
  EXPECT_EQ(validate(spec),
            "compression.default_compression.push_feedback.momentum: must be in [0, 1), got -0.5");
  spec.set_momentum(0.5f);
  spec.set_scale(0.5f);
  EXPECT_EQ(validate(spec),
            "compression.default_compression.push_feedback.scale: error feedback kind "
            "DGC_MOMENTUM takes no parameter 'scale'");

  spec = Spec(config::ErrorFeedback::NONE);
  spec.set_scale(1);
  EXPECT_EQ(validate(spec),
            "compression.default_compression.push_feedback.scale: error feedback kind NONE "
            "takes no parameter 'scale'");
  spec = Spec(static_cast<config::ErrorFeedback::Kind>(7));
  EXPECT_EQ(validate(spec),
            "compression.default_compression.push_feedback.kind: error feedback kind 7 is not "
            "supported");
}

TEST(ErrorFeedbackTest, CreateValidatesTheSpec) {
  config::ErrorFeedback spec = Spec(config::ErrorFeedback::RESIDUAL);
  spec.set_scale(2);
  absl::Status status = ErrorFeedback::Create(spec, 4).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "error_feedback.scale: must be in (0, 1], got 2");
  spec = Spec(config::ErrorFeedback::DGC_MOMENTUM);
  spec.set_momentum(1);
  EXPECT_EQ(ErrorFeedback::Create(spec, 4).status().message(),
            "error_feedback.momentum: must be in [0, 1), got 1");
}

TEST(ErrorFeedbackTest, ResidualScaleDampsWhatIsCarried) {
  config::ErrorFeedback spec = Spec(config::ErrorFeedback::RESIDUAL);
  spec.set_scale(0.5f);
  auto memory = Make(spec, 4);
  EXPECT_TRUE(memory->velocity().empty());
  TopKCodec codec(4, 1);
  std::string payload;
  // c = {1, -4, 2, 3}: -4 sent; residual = 0.5 * {1, 0, 2, 3}.
  ASSERT_TRUE(memory->Compress(codec, std::vector<float>{1, -4, 2, 3}, {}, &payload).ok());
  EXPECT_THAT(Decode(codec, payload), testing::ElementsAre(0, -4, 0, 0));
  EXPECT_THAT(memory->residual(), testing::ElementsAre(0.5, 0, 1, 1.5));
  // c = {1.5, -4, 3, 4.5}: 4.5 sent; residual = 0.5 * {1.5, -4, 3, 0}.
  ASSERT_TRUE(memory->Compress(codec, std::vector<float>{1, -4, 2, 3}, {}, &payload).ok());
  EXPECT_THAT(Decode(codec, payload), testing::ElementsAre(0, 0, 0, 4.5));
  EXPECT_THAT(memory->residual(), testing::ElementsAre(0.75, -2, 1.5, 0));
}

// m = 0.5 and a constant gradient through top-1 of 4; every value is exact.
//   u = m u + g;  v = v + u;  send the largest |v|;  zero u and v where sent.
TEST(ErrorFeedbackTest, DgcMomentumByHandWithTopK) {
  config::ErrorFeedback spec = Spec(config::ErrorFeedback::DGC_MOMENTUM);
  spec.set_momentum(0.5f);
  auto memory = Make(spec, 4);
  TopKCodec codec(4, 1);
  const std::vector<float> g = {1, -2, 3, 0.5};
  std::string payload;
  struct Step {
    std::vector<float> sent, u, v;
  };
  const std::vector<Step> steps = {
      // u = g = v = {1, -2, 3, 0.5}; 3 is sent.
      {{0, 0, 3, 0}, {1, -2, 0, 0.5}, {1, -2, 0, 0.5}},
      // u = {1.5, -3, 3, 0.75}, v = {2.5, -5, 3, 1.25}; -5 is sent.
      {{0, -5, 0, 0}, {1.5, 0, 3, 0.75}, {2.5, 0, 3, 1.25}},
      // u = {1.75, -2, 4.5, 0.875}, v = {4.25, -2, 7.5, 2.125}; 7.5 is sent.
      {{0, 0, 7.5, 0}, {1.75, -2, 0, 0.875}, {4.25, -2, 0, 2.125}},
      // u = {1.875, -3, 3, 0.9375}, v = {6.125, -5, 3, 3.0625}; 6.125 is sent.
      {{6.125, 0, 0, 0}, {0, -3, 3, 0.9375}, {0, -5, 3, 3.0625}},
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    ASSERT_TRUE(memory->Compress(codec, g, {}, &payload).ok());
    EXPECT_EQ(Decode(codec, payload), steps[i].sent) << "step " << i;
    EXPECT_EQ(Vec(memory->velocity()), steps[i].u) << "step " << i;
    EXPECT_EQ(Vec(memory->residual()), steps[i].v) << "step " << i;
  }
}

TEST(ErrorFeedbackTest, DgcMomentumDefaultsToPointNine) {
  auto memory = Make(Spec(config::ErrorFeedback::DGC_MOMENTUM), 2);
  TopKCodec codec(2, 1);
  std::string payload;
  ASSERT_TRUE(memory->Compress(codec, std::vector<float>{4, 1}, {}, &payload).ok());
  ASSERT_TRUE(memory->Compress(codec, std::vector<float>{4, 1}, {}, &payload).ok());
  // Element 1 is never sent: u = 0.9 * 1 + 1, v = 1 + u.
  EXPECT_EQ(memory->velocity()[1], 0.9f * 1.0f + 1.0f);
  EXPECT_EQ(memory->residual()[1], 1.0f + (0.9f * 1.0f + 1.0f));
}

// A chunk that travels raw (below min_compress_bytes) under DGC momentum: momentum SGD's
// velocity, sent whole step after step; masking would have sent the plain gradient.
TEST(ErrorFeedbackTest, DgcMomentumWithNoneSendsTheVelocity) {
  config::ErrorFeedback spec = Spec(config::ErrorFeedback::DGC_MOMENTUM);
  spec.set_momentum(0.5f);
  auto memory = Make(spec, 2);
  NoneCodec codec(2);
  std::string payload;
  std::vector<float> velocity = {0, 0};
  const std::vector<float> gradient = {1, -2};
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(memory->Compress(codec, gradient, {}, &payload).ok());
    for (size_t i = 0; i < 2; ++i) velocity[i] = 0.5f * velocity[i] + gradient[i];
    EXPECT_EQ(Decode(codec, payload), velocity) << "step " << step;  // 1, 1.5, 1.75; x -2.
  }
  memory->Reset();  // A rejoin: the velocity starts again.
  ASSERT_TRUE(memory->Compress(codec, gradient, {}, &payload).ok());
  EXPECT_EQ(Decode(codec, payload), gradient);
}

// Random data: after each step u and v are exactly 0 where the payload decodes non-zero and
// hold the unmasked recurrence elsewhere.
TEST(ErrorFeedbackTest, DgcMaskingZeroesExactlyTheSentPositions) {
  const size_t n = 500;
  config::ErrorFeedback spec = Spec(config::ErrorFeedback::DGC_MOMENTUM);
  spec.set_momentum(0.75f);
  auto memory = Make(spec, n);
  TopKCodec codec(n, 20);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  std::vector<float> u(n, 0.0f), v(n, 0.0f), g(n);
  std::string payload;
  for (int step = 0; step < 10; ++step) {
    for (float& x : g) x = normal(rng);
    ASSERT_TRUE(memory->Compress(codec, g, {}, &payload).ok());
    const std::vector<float> sent = Decode(codec, payload);
    size_t masked = 0;
    for (size_t i = 0; i < n; ++i) {
      u[i] = 0.75f * u[i] + g[i];
      v[i] = v[i] + u[i];
      if (sent[i] != 0) {
        ASSERT_EQ(sent[i], v[i]) << "step " << step << " element " << i;
        u[i] = v[i] = 0;
        ++masked;
      }
      ASSERT_EQ(memory->velocity()[i], u[i]) << "step " << step << " element " << i;
      ASSERT_EQ(memory->residual()[i], v[i]) << "step " << step << " element " << i;
    }
    EXPECT_EQ(masked, 20u);
  }
}

}  // namespace
// A codec that hides its inner codec's DecodeSparse(), so error feedback takes the dense
// path (Decode(), then a pass over the chunk) with the very same payloads.
class DenseOnly final : public Codec {
 public:
  explicit DenseOnly(Codec& inner) : Codec(inner.size()), inner_(inner) {}
  CodecId id() const override { return inner_.id(); }
  size_t MaxPayloadBytes() const override { return inner_.MaxPayloadBytes(); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override {
    return inner_.Encode(input, key, payload);
  }
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override {
    return inner_.Decode(payload, key, out);
  }

 private:
  Codec& inner_;
};

// The sparse path (DecodeSparse, then the k sent entries) leaves the memory bit-identical to
// the dense path, for each kind of feedback, with fp32 and fp16 values (where c - decoded is
// not zero at the sent entries) and a residual scale.
TEST(ErrorFeedbackTest, SparseAndDensePathsKeepBitIdenticalMemories) {
  const size_t n = 2000;
  config::ErrorFeedback scaled = Spec(config::ErrorFeedback::RESIDUAL);
  scaled.set_scale(0.5f);
  for (const config::ErrorFeedback& spec :
       {Spec(config::ErrorFeedback::RESIDUAL), scaled, Spec(config::ErrorFeedback::DGC_MOMENTUM)}) {
    for (const ValueFormat values : {ValueFormat::kFp32, ValueFormat::kFp16}) {
      TopKCodec sparse_codec(n, 30, values), inner(n, 30, values);
      DenseOnly dense_codec(inner);
      auto sparse = Make(spec, n), dense = Make(spec, n);
      std::mt19937 rng(5);
      std::normal_distribution<float> normal;
      std::vector<float> g(n);
      std::string sparse_payload, dense_payload;
      for (int step = 0; step < 8; ++step) {
        for (float& x : g) x = normal(rng);
        // Step 0 has 10 non-zeros for k = 30, so top-k sends zeros too: DGC must not count
        // them as sent (mask them) on either path.
        if (step == 0) std::fill(g.begin() + 10, g.end(), 0.0f);
        ASSERT_TRUE(sparse->Compress(sparse_codec, g, {}, &sparse_payload).ok());
        ASSERT_TRUE(dense->Compress(dense_codec, g, {}, &dense_payload).ok());
        ASSERT_EQ(sparse_payload, dense_payload) << "step " << step;
        EXPECT_EQ(Vec(sparse->residual()), Vec(dense->residual())) << "step " << step;
        EXPECT_EQ(Vec(sparse->velocity()), Vec(dense->velocity())) << "step " << step;
      }
    }
  }
}

// A codec whose Encode() fails (a codec bug), to check what a memory keeps then.
class FailingEncode final : public Codec {
 public:
  explicit FailingEncode(size_t n) : Codec(n) {}
  CodecId id() const override { return CodecId::kNone; }
  size_t MaxPayloadBytes() const override { return 0; }
  absl::Status Encode(absl::Span<const float>, const RandomKey&, std::string*) override {
    return absl::InternalError("encode failed");
  }
  absl::Status Decode(absl::string_view, const RandomKey&, absl::Span<float>) const override {
    return absl::InternalError("not reached");
  }
};

// CompressAdded() after the input was added into AddTarget() sends Compress()'s payload and
// keeps the same memory, over several steps, for RESIDUAL at scale 1 and 0.5, with a
// sparse codec (fp32 and fp16 values) and a dense one.
TEST(ErrorFeedbackTest, CompressAddedMatchesCompress) {
  const size_t n = 3000;
  config::ErrorFeedback scaled = Spec(config::ErrorFeedback::RESIDUAL);
  scaled.set_scale(0.5f);
  for (const config::ErrorFeedback& spec : {Spec(config::ErrorFeedback::RESIDUAL), scaled}) {
    for (const int variant : {0, 1, 2}) {
      SCOPED_TRACE(spec.ShortDebugString() + " variant " + std::to_string(variant));
      std::unique_ptr<Codec> codec, twin;
      if (variant == 2) {
        codec = std::make_unique<NoneCodec>(n);
        twin = std::make_unique<NoneCodec>(n);
      } else {
        const ValueFormat values = variant == 0 ? ValueFormat::kFp32 : ValueFormat::kFp16;
        codec = std::make_unique<TopKCodec>(n, 40, values);
        twin = std::make_unique<TopKCodec>(n, 40, values);
      }
      auto plain = Make(spec, n), added = Make(spec, n);
      std::mt19937 rng(7);
      std::normal_distribution<float> normal;
      std::vector<float> input(n);
      std::string expected, payload;
      for (int step = 0; step < 6; ++step) {
        for (float& x : input) x = normal(rng);
        ASSERT_TRUE(plain->Compress(*codec, input, {}, &expected).ok());
        const absl::Span<float> target = added->AddTarget();
        ASSERT_EQ(target.size(), n);
        for (size_t i = 0; i < n; ++i) target[i] = input[i] + target[i];
        ASSERT_TRUE(added->CompressAdded(*twin, {}, &payload).ok());
        ASSERT_EQ(payload, expected) << "step " << step;
        ASSERT_EQ(Vec(added->residual()), Vec(plain->residual())) << "step " << step;
      }
    }
  }
}

TEST(ErrorFeedbackTest, OnlyResidualTakesAddedInput) {
  EXPECT_TRUE(Make(Spec(config::ErrorFeedback::NONE), 5)->AddTarget().empty());
  EXPECT_TRUE(Make(Spec(config::ErrorFeedback::DGC_MOMENTUM), 5)->AddTarget().empty());
  EXPECT_EQ(Make(Spec(config::ErrorFeedback::RESIDUAL), 5)->AddTarget().size(), 5u);
}

// Nothing was sent when the codec fails: the memory owes c = input + residual, all of it.
TEST(ErrorFeedbackTest, CompressAddedKeepsTheSumWhenTheCodecFails) {
  auto memory = Make(Spec(config::ErrorFeedback::RESIDUAL), 3);
  TopKCodec codec(3, 1);
  std::string payload;
  ASSERT_TRUE(memory->Compress(codec, std::vector<float>{1, 4, -2}, {}, &payload).ok());
  ASSERT_THAT(memory->residual(), testing::ElementsAre(1, 0, -2));
  absl::Span<float> target = memory->AddTarget();
  target[0] += 0.5f;
  target[1] += 1.0f;
  target[2] += -1.0f;
  FailingEncode failing(3);
  EXPECT_EQ(memory->CompressAdded(failing, {}, &payload).code(), absl::StatusCode::kInternal);
  EXPECT_THAT(memory->residual(), testing::ElementsAre(1.5, 1, -3));
  // And the memory goes on from there.
  ASSERT_TRUE(memory->Compress(codec, std::vector<float>{0, 0, 0}, {}, &payload).ok());
  EXPECT_THAT(memory->residual(), testing::ElementsAre(1.5, 1, 0));
}

}  // namespace tamp::compress
