#include "compress/ratio_warmup.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "compress/registry.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

constexpr char kPush[] = "compression.default_compression.push";
constexpr char kPull[] = "compression.default_compression.pull";

config::Codec Spec(const std::string& text) {
  config::Codec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

TEST(RatioWarmupTest, AcceptedByEveryCodecThatTakesRatio) {
  for (const char* name : {"topk", "dgc", "randomk", "randomblock"}) {
    const config::Codec spec =
        Spec(absl::StrCat("name: '", name, "' ratio: 0.001 ratio_warmup: [0.25, 0.0625]"));
    EXPECT_TRUE(ValidateCodecSpec(spec, kPush).ok()) << name << ": " << ValidateCodecSpec(spec, kPush);
  }
  // topk by count: the warm-up epochs use ratios, the rest the count.
  EXPECT_TRUE(ValidateCodecSpec(Spec("name: 'topk' count: 10 ratio_warmup: 0.5"), kPush).ok());
}

TEST(RatioWarmupTest, ValidationErrorsNameTheField) {
  absl::Status status =
      ValidateCodecSpec(Spec("name: 'qsgd' levels: 15 ratio_warmup: [0.25]"), kPush);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "compression.default_compression.push.ratio_warmup: codec 'qsgd' takes no parameter "
            "'ratio_warmup' (sparsity warm-up needs a codec that keeps k = ratio * n entries: "
            "topk, dgc, randomk, randomblock)");
  status = ValidateCodecSpec(Spec("name: 'topk' ratio: 0.01 ratio_warmup: [0.25, 0, 0.1]"), kPush);
  EXPECT_EQ(status.message(),
            "compression.default_compression.push.ratio_warmup[1]: must be in (0, 1], got 0");
  status = ValidateCodecSpec(Spec("name: 'topk' ratio: 0.01 ratio_warmup: [1.5]"), kPush);
  EXPECT_EQ(status.message(),
            "compression.default_compression.push.ratio_warmup[0]: must be in (0, 1], got 1.5");
  status = ValidatePullCodecSpec(Spec("name: 'topk' ratio: 0.01 ratio_warmup: [0.25]"), kPull);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "compression.default_compression.pull.ratio_warmup: sparsity warm-up applies to push "
            "codecs only");
}

TEST(RatioWarmupTest, WarmupSpecReplacesTheRatioDuringWarmupOnly) {
  const config::Codec spec = Spec("name: 'topk' count: 7 ratio_warmup: [0.25, 0.125]");
  const config::Codec e0 = WarmupSpec(spec, 0);
  EXPECT_EQ(e0.ratio_warmup_size(), 0);
  EXPECT_FALSE(e0.has_count());
  EXPECT_EQ(e0.ratio(), 0.25);
  EXPECT_EQ(WarmupSpec(spec, 1).ratio(), 0.125);
  const config::Codec e2 = WarmupSpec(spec, 2);
  EXPECT_FALSE(e2.has_ratio());
  EXPECT_EQ(e2.count(), 7u);
  EXPECT_EQ(e2.ratio_warmup_size(), 0);
}

TEST(RatioWarmupTest, NoWarmupGivesNull) {
  absl::StatusOr<std::unique_ptr<RatioWarmup>> warmup =
      RatioWarmup::Create(Spec("name: 'topk' ratio: 0.01"), ChunkShape{.elements = 100});
  ASSERT_TRUE(warmup.ok()) << warmup.status();
  EXPECT_EQ(*warmup, nullptr);
}

TEST(RatioWarmupTest, CodecForEpochKeepsTheWarmupRatioThenTheConfiguredOne) {
  // n = 1024, b = 10 bits per index: payload 12 + ceil(10k / 8) + 4k.
  const config::Codec spec = Spec("name: 'topk' ratio: 0.001 ratio_warmup: [0.25, 0.0625, 0.25]");
  const ChunkShape shape{.elements = 1024};
  absl::StatusOr<std::unique_ptr<RatioWarmup>> warmup = RatioWarmup::Create(spec, shape);
  ASSERT_TRUE(warmup.ok()) << warmup.status();
  ASSERT_NE(*warmup, nullptr);
  EXPECT_EQ((*warmup)->epochs(), 3u);
  absl::StatusOr<std::unique_ptr<Codec>> configured = CreateCodec(spec, shape);
  ASSERT_TRUE(configured.ok()) << configured.status();

  auto bytes = [](size_t k) { return 12 + (10 * k + 7) / 8 + 4 * k; };
  EXPECT_EQ((*warmup)->CodecFor(0, **configured).MaxPayloadBytes(), bytes(256));
  EXPECT_EQ((*warmup)->CodecFor(1, **configured).MaxPayloadBytes(), bytes(64));
  // The same ratio shares one instance.
  EXPECT_EQ(&(*warmup)->CodecFor(2, **configured), &(*warmup)->CodecFor(0, **configured));
  EXPECT_EQ(&(*warmup)->CodecFor(3, **configured), configured->get());
  EXPECT_EQ((*warmup)->CodecFor(3, **configured).MaxPayloadBytes(), bytes(1));
}

}  // namespace
}  // namespace tamp::compress
