#include "compress/registry.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace tamp::compress {
namespace {

using ::testing::ElementsAre;

constexpr char kPath[] = "compression.default_compression.push";

config::Codec Spec(const std::string& text) {
  config::Codec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &spec)) << text;
  return spec;
}

absl::Status Validate(const std::string& text) { return ValidateCodecSpec(Spec(text), kPath); }

TEST(RegistryTest, ListsCodecsInWireIdOrder) {
  const std::vector<CodecInfo>& codecs = ListCodecs();
  ASSERT_GE(codecs.size(), 2u);
  for (size_t i = 1; i < codecs.size(); ++i) EXPECT_LT(codecs[i - 1].id, codecs[i].id);
  EXPECT_EQ(codecs[0].name, "none");
  EXPECT_EQ(codecs[0].id, CodecId::kNone);
  EXPECT_THAT(codecs[0].parameters, ElementsAre());
  EXPECT_EQ(codecs[0].wire_bytes, "12 + 4n");
  EXPECT_EQ(codecs[1].name, "topk");
  EXPECT_EQ(codecs[1].id, CodecId::kTopK);
  EXPECT_THAT(codecs[1].parameters, ElementsAre("ratio", "count", "fp16_values"));
  EXPECT_EQ(codecs[1].wire_bytes,
            "12 + ceil(k*b/8) + v*k; b = max(1, ceil(log2 n)), "
            "k = clamp(round(ratio*n), 1, n) or min(count, n), v = 4 (2 with fp16_values)");
}

TEST(RegistryTest, EveryListedParameterIsAConfigCodecField) {
  const google::protobuf::Descriptor* descriptor = config::Codec::descriptor();
  for (const CodecInfo& info : ListCodecs()) {
    EXPECT_FALSE(info.summary.empty()) << info.name;
    EXPECT_EQ(info.name, CodecName(info.id));
    for (const std::string& parameter : info.parameters) {
      EXPECT_NE(descriptor->FindFieldByName(parameter), nullptr) << info.name << ": " << parameter;
    }
  }
}

TEST(RegistryTest, AcceptsValidSpecs) {
  EXPECT_TRUE(Validate("name: 'none'").ok());
  EXPECT_TRUE(Validate("name: 'topk' ratio: 0.01").ok());
  EXPECT_TRUE(Validate("name: 'topk' count: 100").ok());
}

TEST(RegistryTest, RejectsUnknownAndMissingNames) {
  // Every registered name, in wire-id order; the list grows as codecs are added.
  std::string known;
  for (const CodecInfo& info : ListCodecs()) known += (known.empty() ? "" : ", ") + info.name;
  EXPECT_EQ(known.rfind("none, topk", 0), 0u) << known;
  absl::Status status = Validate("name: 'topkk' ratio: 0.1");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "compression.default_compression.push.name: unknown codec 'topkk' "
                              "(known: " + known + ")");
  status = Validate("ratio: 0.1");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "compression.default_compression.push.name: missing codec name (known: " + known + ")");
}

TEST(RegistryTest, RejectsParametersTheCodecDoesNotTake) {
  absl::Status status = Validate("name: 'none' count: 3");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "compression.default_compression.push.count: codec 'none' takes no parameter 'count'");
  // Explicit presence: a zero that was set is still set.
  status = Validate("name: 'none' ratio: 0");
  EXPECT_EQ(status.message(),
            "compression.default_compression.push.ratio: codec 'none' takes no parameter 'ratio'");
}

TEST(RegistryTest, RangeErrorsNameTheField) {
  EXPECT_EQ(Validate("name: 'topk' ratio: 0").message(),
            "compression.default_compression.push.ratio: must be in (0, 1], got 0");
  EXPECT_EQ(Validate("name: 'topk' ratio: 1.5").message(),
            "compression.default_compression.push.ratio: must be in (0, 1], got 1.5");
  EXPECT_EQ(Validate("name: 'topk' count: 0").message(),
            "compression.default_compression.push.count: must be >= 1, got 0");
  EXPECT_EQ(Validate("name: 'topk'").message(),
            "compression.default_compression.push: codec 'topk' needs exactly one of 'ratio' "
            "and 'count', got neither");
  EXPECT_EQ(Validate("name: 'topk' ratio: 0.5 count: 2").message(),
            "compression.default_compression.push: codec 'topk' needs exactly one of 'ratio' "
            "and 'count', got both");
}

TEST(RegistryTest, CreateCodecBuildsTheNamedCodec) {
  absl::StatusOr<std::unique_ptr<Codec>> none = CreateCodec(Spec("name: 'none'"), 10);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)->id(), CodecId::kNone);
  EXPECT_EQ((*none)->size(), 10u);
  EXPECT_EQ((*none)->MaxPayloadBytes(), 52u);

  // n = 1000, k = 10, b = 10: 12 + 13 + 40.
  absl::StatusOr<std::unique_ptr<Codec>> topk = CreateCodec(Spec("name: 'topk' ratio: 0.01"), 1000);
  ASSERT_TRUE(topk.ok()) << topk.status();
  EXPECT_EQ((*topk)->id(), CodecId::kTopK);
  EXPECT_EQ((*topk)->size(), 1000u);
  EXPECT_EQ((*topk)->MaxPayloadBytes(), 65u);
}

TEST(RegistryTest, CreateCodecRejectsBadSpecsAndEmptyChunks) {
  absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(Spec("name: 'topk' ratio: 2"), 10);
  EXPECT_EQ(codec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codec.status().message(), "codec.ratio: must be in (0, 1], got 2");

  codec = CreateCodec(Spec("name: 'none'"), 0);
  EXPECT_EQ(codec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(codec.status().message(), "codec 'none': a chunk needs at least one element");
}

}  // namespace
}  // namespace tamp::compress

namespace tamp::compress {
namespace {

TEST(RegistryExampleTest, EveryCodecHasAValidExampleThatCreatesACodec) {
  for (const CodecInfo& info : ListCodecs()) {
    EXPECT_EQ(info.example.name(), info.name);
    auto codec = CreateCodec(info.example, 1000);
    ASSERT_TRUE(codec.ok()) << info.name << ": " << codec.status();
    EXPECT_EQ((*codec)->id(), info.id);
  }
}

// DecodeSparse() is an exact, O(k) form of Decode() for the codecs whose payload names its
// entries, and declines (false) for every other codec.
TEST(RegistryExampleTest, DecodeSparseMatchesDecodeOrDeclines) {
  const size_t n = 1000;
  std::vector<float> input(n);
  for (size_t i = 0; i < n; ++i) input[i] = std::sin(0.37f * i) * (1.0f + i % 7);
  std::vector<std::string> sparse_codecs;
  for (const CodecInfo& info : ListCodecs()) {
    config::Codec with_fp16 = info.example;
    with_fp16.set_fp16_values(true);
    std::vector<config::Codec> specs = {info.example};
    if (ValidateCodecSpec(with_fp16, kPath).ok()) specs.push_back(with_fp16);
    for (const config::Codec& spec : specs) {
      const bool fp16 = spec.fp16_values();
      auto codec = *CreateCodec(spec, n);
      if (codec->rounds() != 1) continue;  // powersgd: its rounds are decoded otherwise.
      const RandomKey key{.seed = 3, .step = 1, .chunk = 2, .worker = 0};
      std::string payload;
      ASSERT_TRUE(codec->Encode(input, key, &payload).ok()) << info.name;
      SparseEntries entries;
      absl::StatusOr<bool> sparse = codec->DecodeSparse(payload, key, &entries);
      ASSERT_TRUE(sparse.ok()) << info.name << ": " << sparse.status();
      if (!*sparse) continue;
      if (!fp16) sparse_codecs.push_back(info.name);
      std::vector<float> dense(n), from_entries(n, 0.0f);
      ASSERT_TRUE(codec->Decode(payload, key, absl::MakeSpan(dense)).ok());
      ASSERT_EQ(entries.values.size(), entries.indices.size()) << info.name;
      for (size_t j = 0; j < entries.indices.size(); ++j) {
        ASSERT_LT(entries.indices[j], n) << info.name;
        if (j > 0) {
          ASSERT_GT(entries.indices[j], entries.indices[j - 1]) << info.name;
        }
        from_entries[entries.indices[j]] = entries.values[j];
      }
      EXPECT_EQ(from_entries, dense) << info.name << (fp16 ? " fp16_values" : "");
      // A damaged payload is refused as Decode() refuses it.
      const std::string truncated = payload.substr(0, payload.size() - 1);
      EXPECT_EQ(codec->DecodeSparse(truncated, key, &entries).status().code(),
                absl::StatusCode::kInvalidArgument)
          << info.name;
    }
  }
  EXPECT_THAT(sparse_codecs, ElementsAre("topk", "dgc", "threshold"));
}

}  // namespace
}  // namespace tamp::compress

namespace tamp::compress {
namespace {

// The sparsification codecs (dgc, threshold, randomk, randomblock): specs, validation through
// the registry, and payload sizes worked by hand for n = 1000 (b = 10 index bits).
TEST(RegistrySparseTest, CreatesTheSparsificationCodecsWithTheirSizes) {
  const struct {
    const char* text;
    CodecId id;
    size_t bytes;
  } cases[] = {
      {"name: 'topk' ratio: 0.01 fp16_values: true", CodecId::kTopK, 12 + 13 + 20},
      {"name: 'dgc' ratio: 0.01", CodecId::kDgc, 12 + 13 + 40},
      {"name: 'dgc' ratio: 0.01 sample_ratio: 0.1 fp16_values: true", CodecId::kDgc, 12 + 13 + 20},
      {"name: 'threshold' threshold: 0.5", CodecId::kThreshold, 12 + 8 + 1250 + 4000},
      {"name: 'threshold' threshold: 0.5 fp16_values: true", CodecId::kThreshold,
       12 + 8 + 1250 + 2000},
      {"name: 'randomk' count: 10", CodecId::kRandomK, 12 + 40},
      {"name: 'randomk' ratio: 0.01 fp16_values: true", CodecId::kRandomK, 12 + 20},
      {"name: 'randomblock' ratio: 0.01", CodecId::kRandomBlock, 12 + 40},
      {"name: 'randomblock' ratio: 0.01 num_blocks: 4", CodecId::kRandomBlock, 12 + 32},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::unique_ptr<Codec>> codec = CreateCodec(Spec(c.text), 1000);
    ASSERT_TRUE(codec.ok()) << c.text << ": " << codec.status();
    EXPECT_EQ((*codec)->id(), c.id) << c.text;
    EXPECT_EQ((*codec)->MaxPayloadBytes(), c.bytes) << c.text;
  }
  EXPECT_EQ(Validate("name: 'dgc' count: 10").message(),
            "compression.default_compression.push.count: codec 'dgc' takes no parameter 'count'");
  EXPECT_EQ(Validate("name: 'randomblock' ratio: 0.1 num_blocks: 0").message(),
            "compression.default_compression.push.num_blocks: must be >= 1, got 0");
  EXPECT_EQ(Validate("name: 'threshold'").message(),
            "compression.default_compression.push: codec 'threshold' needs 'threshold'");
  EXPECT_EQ(Validate("name: 'randomk' ratio: 0.1 count: 3").message(),
            "compression.default_compression.push: codec 'randomk' needs exactly one of 'ratio' "
            "and 'count', got both");
}

// The pull's payload decodes to the update workers add to their weights: codecs whose decode
// is +-1 per element cannot carry it, and every codec says whether it can.
TEST(RegistryTest, PullCodecsDecodeToTheUpdatesScale) {
  constexpr char kPull[] = "compression.default_compression.pull";
  const absl::Status sign = ValidatePullCodecSpec(Spec("name: 'signsgd'"), kPull);
  EXPECT_EQ(sign.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sign.message().rfind("compression.default_compression.pull.name: codec 'signsgd' "
                                 "cannot carry the pull (the servers' update, or in "
                                 "AGGREGATE mode the mean gradient): its decode is +-1",
                                 0),
            0u)
      << sign;
  EXPECT_FALSE(ValidatePullCodecSpec(Spec("name: 'signum' momentum: 0.9"), kPull).ok());
  EXPECT_TRUE(ValidateCodecSpec(Spec("name: 'signsgd'"), kPath).ok());  // A push codec.
  for (const CodecInfo& info : ListCodecs()) {
    const bool pulls = ValidatePullCodecSpec(info.example, kPull).ok();
    EXPECT_EQ(info.can_pull, pulls) << info.name;
    EXPECT_EQ(info.cannot_pull.empty(), pulls) << info.name;
  }
  for (const char* name : {"signsgd", "signum", "powersgd"}) {
    const auto it = std::find_if(ListCodecs().begin(), ListCodecs().end(),
                                 [&](const CodecInfo& info) { return info.name == name; });
    ASSERT_NE(it, ListCodecs().end()) << name;
    EXPECT_FALSE(it->can_pull) << name;
  }
  EXPECT_TRUE(ValidatePullCodecSpec(Spec("name: 'efsign'"), kPull).ok());
  EXPECT_TRUE(ValidatePullCodecSpec(Spec("name: 'topk' ratio: 0.01"), kPull).ok());
}

// Each codec's recommended settings are valid and are those bench/convergence.py measured: the
// run config it wrote to bench/configs/recommended/NAME.pbtxt has the same push codec, memory
// and optimizer.
TEST(RegistryTest, RecommendedSettingsAreTheMeasuredConfigs) {
  for (const CodecInfo& info : ListCodecs()) {
    const config::ChunkCompression& recommended = info.recommended;
    EXPECT_EQ(recommended.push().name(), info.name);
    EXPECT_TRUE(ValidateCodecSpec(recommended.push(), kPath).ok()) << info.name;
    EXPECT_TRUE(info.recommended_optimizer.learning_rate() > 0) << info.name;

    const std::string path = "bench/configs/recommended/" + info.name + ".pbtxt";
    std::ifstream file(path);
    ASSERT_TRUE(file) << path << " is missing (bench/convergence.py writes it)";
    std::stringstream text;
    text << file.rdbuf();
    config::RunConfig measured;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &measured)) << path;
    const config::ChunkCompression& ran = measured.compression().default_compression();
    EXPECT_EQ(ran.push().DebugString(), recommended.push().DebugString()) << path;
    EXPECT_EQ(ran.push_feedback().DebugString(), recommended.push_feedback().DebugString())
        << path;
    EXPECT_EQ(ran.pull().DebugString(), recommended.pull().DebugString()) << path;
    EXPECT_EQ(measured.optimizer().DebugString(), info.recommended_optimizer.DebugString())
        << path;
  }
}

}  // namespace
}  // namespace tamp::compress
