// The default DecodeAdd/FinishAggregate of Codec, through a codec that overrides neither.
#include "compress/codec.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::ElementsAre;

// Payload "ok" decodes to 1, 2, 3, ...; anything else is an error.
class CountingCodec final : public Codec {
 public:
  explicit CountingCodec(size_t size) : Codec(size) {}
  CodecId id() const override { return CodecId::kNone; }
  size_t MaxPayloadBytes() const override { return 2; }
  absl::Status Encode(absl::Span<const float>, const RandomKey&, std::string* payload) override {
    *payload = "ok";
    return absl::OkStatus();
  }
  absl::Status Decode(absl::string_view payload, const RandomKey&,
                      absl::Span<float> out) const override {
    if (payload != "ok") return absl::InvalidArgumentError("bad payload");
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(i + 1);
    return absl::OkStatus();
  }
};

TEST(CodecTest, DefaultDecodeAddAddsTheDecodedValues) {
  CountingCodec codec(3);
  std::vector<float> accumulator = {10, 20, 30};
  ASSERT_TRUE(codec.DecodeAdd("ok", {}, absl::MakeSpan(accumulator)).ok());
  ASSERT_TRUE(codec.DecodeAdd("ok", {}, absl::MakeSpan(accumulator)).ok());
  EXPECT_THAT(accumulator, ElementsAre(12, 24, 36));
}

TEST(CodecTest, DefaultDecodeAddLeavesTheAccumulatorAloneOnError) {
  CountingCodec codec(3);
  std::vector<float> accumulator = {10, 20, 30};
  const absl::Status status = codec.DecodeAdd("bad", {}, absl::MakeSpan(accumulator));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "bad payload");
  EXPECT_THAT(accumulator, ElementsAre(10, 20, 30));
}

TEST(CodecTest, DefaultDecodeAddServesCodecsOfDifferentSizesOnOneThread) {
  CountingCodec big(5), small(2);
  std::vector<float> a(5, 0.0f), b(2, 0.0f);
  ASSERT_TRUE(big.DecodeAdd("ok", {}, absl::MakeSpan(a)).ok());
  ASSERT_TRUE(small.DecodeAdd("ok", {}, absl::MakeSpan(b)).ok());
  ASSERT_TRUE(big.DecodeAdd("ok", {}, absl::MakeSpan(a)).ok());
  EXPECT_THAT(a, ElementsAre(2, 4, 6, 8, 10));
  EXPECT_THAT(b, ElementsAre(1, 2));
}

TEST(CodecTest, DefaultFinishAggregateIsTheMean) {
  CountingCodec codec(3);
  std::vector<float> sum = {4, -8, 12};
  codec.FinishAggregate(4, absl::MakeSpan(sum));
  EXPECT_THAT(sum, ElementsAre(1, -2, 3));
}

// A single-round codec is the one-round case of the round API the shard runs every codec
// through: round 0 is Decode / DecodeAdd / FinishAggregate, any other round is refused.
TEST(CodecTest, SingleRoundCodecIsTheOneRoundCaseOfTheRoundApi) {
  CountingCodec codec(3);
  EXPECT_EQ(codec.rounds(), 1);
  EXPECT_EQ(codec.RoundValues(0), 3u);
  std::vector<float> decoded(3, -1.0f);
  ASSERT_TRUE(codec.DecodeRound(0, "ok", {}, absl::MakeSpan(decoded)).ok());
  EXPECT_THAT(decoded, ElementsAre(1, 2, 3));
  std::vector<float> accumulator = {10, 20, 30};
  ASSERT_TRUE(codec.DecodeAddRound(0, "ok", {}, absl::MakeSpan(accumulator)).ok());
  ASSERT_TRUE(codec.DecodeAddRound(0, "ok", {}, absl::MakeSpan(accumulator)).ok());
  EXPECT_THAT(accumulator, ElementsAre(12, 24, 36));
  const absl::Status round1 = codec.DecodeAddRound(1, "ok", {}, absl::MakeSpan(accumulator));
  EXPECT_EQ(round1.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(round1.message(), "codec none takes one round per step, got round 1");
  EXPECT_EQ(codec.DecodeRound(1, "ok", {}, absl::MakeSpan(decoded)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(accumulator, ElementsAre(12, 24, 36));  // A refused round changes nothing.

  // The mean, in place when the aggregate is the accumulator, else copied out.
  std::string answer = "stale";
  codec.FinishRound(0, 2, absl::MakeSpan(accumulator), {}, &answer, absl::MakeSpan(accumulator));
  EXPECT_THAT(accumulator, ElementsAre(6, 12, 18));
  EXPECT_EQ(answer, "");
  std::vector<float> aggregate(3, -1.0f);
  codec.FinishRound(0, 3, absl::MakeSpan(accumulator), {}, &answer, absl::MakeSpan(aggregate));
  EXPECT_THAT(aggregate, ElementsAre(2, 4, 6));
}

TEST(CodecTest, CodecNameCoversEveryWireIdAndUnknownBytes) {
  EXPECT_EQ(CodecName(CodecId::kNone), "none");
  EXPECT_EQ(CodecName(CodecId::kTopK), "topk");
  EXPECT_EQ(CodecName(CodecId::kPowerSgd), "powersgd");
  EXPECT_EQ(CodecName(static_cast<CodecId>(200)), "unknown");
}

}  // namespace
}  // namespace tamp::compress
