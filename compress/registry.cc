#include "compress/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compress/bf16.h"
#include "compress/dgc.h"
#include "compress/efsign.h"
#include "compress/fp16.h"
#include "compress/maxmin.h"
#include "compress/natural.h"
#include "compress/none.h"
#include "compress/powersgd.h"
#include "compress/qsgd.h"
#include "compress/randomblock.h"
#include "compress/randomk.h"
#include "compress/signsgd.h"
#include "compress/signum.h"
#include "compress/terngrad.h"
#include "compress/threshold.h"
#include "compress/topk.h"
#include "glog/logging.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"

namespace tamp::compress {
namespace {

// One row per codec. A new codec adds its file and one row here; which config::Codec
// fields are set is checked generically against `parameters`, so `validate` only checks
// ranges and combinations.
struct Entry {
  CodecId id;
  const char* summary;
  std::vector<std::string> parameters;
  const char* wire_bytes;
  // A typical spec in text format, without the name (ListCodecs() adds it).
  const char* example;
  // Null when there is nothing to check beyond which parameters are set.
  absl::Status (*validate)(const config::Codec& spec, absl::string_view field_path);
  std::unique_ptr<Codec> (*create)(const config::Codec& spec, size_t num_elements);
  // Exchanges per step (Codec::rounds()); only multi-round codecs set it.
  int rounds = 1;
  // Used instead of `create` (then null) by codecs that view a chunk within its tensor or may
  // refuse a chunk (powersgd).
  absl::StatusOr<std::unique_ptr<Codec>> (*create_for_chunk)(const config::Codec& spec,
                                                             const ChunkShape& shape) = nullptr;
};

// In wire-id order.
const std::vector<Entry>& Entries() {
  static const auto* const entries = new std::vector<Entry>{
      {CodecId::kNone, "all n values as raw fp32", {}, "12 + 4n", "", nullptr, &NoneCodec::Create},
      {CodecId::kTopK,
       "the k largest-magnitude values: bit-packed indices, then fp32 (or fp16) values",
       {"ratio", "count", "fp16_values"},
       "12 + ceil(k*b/8) + v*k; b = max(1, ceil(log2 n)), "
       "k = clamp(round(ratio*n), 1, n) or min(count, n), v = 4 (2 with fp16_values)",
       "ratio: 0.01",
       &TopKCodec::ValidateSpec,
       &TopKCodec::Create},
      {CodecId::kFp16,
       "every value as an IEEE binary16, rounded to nearest even (|x| >= 65520 becomes Inf)",
       {},
       "12 + 2n",
       "",
       nullptr,
       &Fp16Codec::Create},
      {CodecId::kBf16,
       "every value as a bfloat16 (the top 16 bits of its fp32), rounded to nearest even",
       {},
       "12 + 2n",
       "",
       nullptr,
       &Bf16Codec::Create},
      {CodecId::kDgc,
       "exactly topk's k entries, found from a sampled threshold: bit-packed indices, then "
       "fp32 (or fp16) values",
       {"ratio", "sample_ratio", "fp16_values"},
       "12 + ceil(k*b/8) + v*k; b = max(1, ceil(log2 n)), k = clamp(round(ratio*n), 1, n), "
       "v = 4 (2 with fp16_values)",
       "ratio: 0.01 sample_ratio: 0.01",
       &DgcCodec::ValidateSpec,
       &DgcCodec::Create},
      {CodecId::kThreshold,
       "every entry with |x| > threshold (NaN always): a count, bit-packed indices, then fp32 "
       "(or fp16) values",
       {"threshold", "fp16_values"},
       "12 + 8 + ceil(c*b/8) + v*c for c entries sent (at most n); b = max(1, ceil(log2 n)), "
       "v = 4 (2 with fp16_values)",
       "threshold: 0.01",
       &ThresholdCodec::ValidateSpec,
       &ThresholdCodec::Create},
      {CodecId::kRandomK,
       "k values at positions drawn from the shared random stream (no indices travel), "
       "fp32 (or fp16), not rescaled",
       {"ratio", "count", "fp16_values"},
       "12 + v*k; k = clamp(round(ratio*n), 1, n) or min(count, n), v = 4 (2 with fp16_values)",
       "ratio: 0.01",
       &RandomKCodec::ValidateSpec,
       &RandomKCodec::Create},
      {CodecId::kRandomBlock,
       "B contiguous blocks of L values at positions drawn from the shared random stream (no "
       "indices travel), fp32 (or fp16), not rescaled",
       {"ratio", "num_blocks", "fp16_values"},
       "12 + v*B*L; k = clamp(round(ratio*n), 1, n), B = min(num_blocks (default 1), k), "
       "L = floor(k/B), v = 4 (2 with fp16_values)",
       "ratio: 0.01 num_blocks: 4",
       &RandomBlockCodec::ValidateSpec,
       &RandomBlockCodec::Create},
      {CodecId::kQsgd,
       "per bucket its fp32 L2 norm, then per value a sign and a stochastically rounded "
       "level in [0, s]",
       {"levels", "bucket_size"},
       "12 + 4*ceil(n/d) + ceil(n*B/8); s = levels, B = ceil(log2(s+1)) + 1, "
       "d = bucket_size (default 512)",
       "levels: 127 bucket_size: 512",
       &QsgdCodec::ValidateSpec,
       &QsgdCodec::Create},
      {CodecId::kTernGrad,
       "one fp32 scale (max |x| after clipping at 2.5 sigma), then a stochastic ternary "
       "{-1, 0, +1} per value in 2 bits",
       {},
       "12 + 4 + ceil(2n/8)",
       "",
       nullptr,
       &TernGradCodec::Create},
      {CodecId::kSignSgd,
       "1 sign bit per value (set iff x < 0: 0 and NaN count as +); the server takes the "
       "majority vote (0 on a tie)",
       {},
       "12 + ceil(n/8)",
       "",
       nullptr,
       &SignSgdCodec::Create},
      {CodecId::kEfSign,
       "scale = mean |x| as fp32, then 1 sign bit per value; decodes to +-scale (for error "
       "feedback)",
       {},
       "12 + 4 + ceil(n/8)",
       "",
       nullptr,
       &EfSignCodec::Create},
      {CodecId::kSignum,
       "1 sign bit per value of the encoder's momentum m = momentum*m + (1-momentum)*x; "
       "majority vote",
       {"momentum"},
       "12 + ceil(n/8)",
       "momentum: 0.9",
       &SignumCodec::ValidateSpec,
       &SignumCodec::Create},
      {CodecId::kNatural,
       "per value its sign and one of the two powers of two around |x|, chosen by unbiased "
       "stochastic rounding, in 9 bits",
       {},
       "12 + ceil(9n/8)",
       "",
       nullptr,
       &NaturalCodec::Create},
      {CodecId::kMaxMin,
       "per bucket its fp32 min and max, then per value a bits-wide code on the uniform grid "
       "between them (nearest or stochastic rounding)",
       {"bits", "bucket_size", "stochastic"},
       "12 + 8*ceil(n/d) + ceil(n*bits/8); d = bucket_size (default 512)",
       "bits: 8 bucket_size: 512",
       &MaxMinCodec::ValidateSpec,
       &MaxMinCodec::Create},
      {CodecId::kPowerSgd,
       "rank-r approximation P Q^T in two rounds: P = M Q, then Q = M^T orth(sum P), with Q "
       "warm-started from the last step",
       {"rank"},
       "round 0: 16 + 4*m*r, answered with 16 + 4*m*r; round 1: 16 + 4*c*r, answered with the "
       "pull update plus 16 + 4*c*r; r = rank, M [m, c] = the chunk's rows of its tensor (c "
       "values per row, partial rows zero-padded) or, for a vector, c = ceil(sqrt(n)), "
       "m = ceil(n/c)",
       "rank: 2",
       &PowerSgdCodec::ValidateSpec,
       nullptr,
       PowerSgdCodec::kRounds,
       &PowerSgdCodec::Create},
  };
  return *entries;
}

// The recommended settings of each codec (CodecInfo::recommended), in text format: the
// push side of a ChunkCompression, then the optimizer. Keep in step with bench/convergence.py's
// RECOMMENDED (//compress:registry_test compares them with bench/configs/recommended/).
struct Recommendation {
  CodecId id;
  const char* compression;
  const char* optimizer;
};

// The example's optimizer, with which most codecs train as they are.
constexpr char kExampleSgd[] =
    "name: 'sgd' learning_rate: 0.05 momentum: 0.9 schedule { kind: COSINE }";

const Recommendation kRecommendations[] = {
    {CodecId::kNone, "push { name: 'none' } push_feedback { kind: NONE }", kExampleSgd},
    {CodecId::kTopK, "push { name: 'topk' ratio: 0.01 } push_feedback { kind: RESIDUAL }",
     kExampleSgd},
    {CodecId::kFp16, "push { name: 'fp16' } push_feedback { kind: NONE }", kExampleSgd},
    {CodecId::kBf16, "push { name: 'bf16' } push_feedback { kind: NONE }", kExampleSgd},
    // DGC's momentum correction keeps the momentum on the workers: plain SGD on the servers.
    {CodecId::kDgc,
     "push { name: 'dgc' ratio: 0.01 sample_ratio: 0.01 } push_feedback { kind: DGC_MOMENTUM }",
     "name: 'sgd' learning_rate: 0.05 momentum: 0 schedule { kind: COSINE }"},
    {CodecId::kThreshold,
     "push { name: 'threshold' threshold: 0.01 } push_feedback { kind: RESIDUAL }", kExampleSgd},
    // A coordinate is sent about once per 1/ratio steps with that many steps of residual;
    // server momentum would multiply those bursts.
    {CodecId::kRandomK, "push { name: 'randomk' ratio: 0.01 } push_feedback { kind: RESIDUAL }",
     "name: 'sgd' learning_rate: 0.05 momentum: 0 schedule { kind: COSINE }"},
    {CodecId::kRandomBlock,
     "push { name: 'randomblock' ratio: 0.01 num_blocks: 4 } push_feedback { kind: RESIDUAL }",
     "name: 'sgd' learning_rate: 0.05 momentum: 0 schedule { kind: COSINE }"},
    {CodecId::kQsgd,
     "push { name: 'qsgd' levels: 127 bucket_size: 512 } push_feedback { kind: NONE }",
     kExampleSgd},
    {CodecId::kTernGrad, "push { name: 'terngrad' } push_feedback { kind: NONE }", kExampleSgd},
    // The vote moves each weight by lr a step, whatever the gradient's size.
    {CodecId::kSignSgd, "push { name: 'signsgd' } push_feedback { kind: NONE }",
     "name: 'sgd' learning_rate: 0.00005 momentum: 0.9 schedule { kind: COSINE }"},
    {CodecId::kEfSign, "push { name: 'efsign' } push_feedback { kind: RESIDUAL }",
     "name: 'sgd' learning_rate: 0.01 momentum: 0.9 schedule { kind: COSINE }"},
    // Momentum is the codec's, on the workers.
    {CodecId::kSignum, "push { name: 'signum' momentum: 0.9 } push_feedback { kind: NONE }",
     "name: 'sgd' learning_rate: 0.0003 momentum: 0 schedule { kind: COSINE }"},
    {CodecId::kNatural, "push { name: 'natural' } push_feedback { kind: NONE }", kExampleSgd},
    {CodecId::kMaxMin,
     "push { name: 'maxmin' bits: 8 bucket_size: 512 } push_feedback { kind: NONE }",
     kExampleSgd},
    {CodecId::kPowerSgd, "push { name: 'powersgd' rank: 2 } push_feedback { kind: RESIDUAL }",
     kExampleSgd},
};

const Recommendation& RecommendationOf(CodecId id) {
  for (const Recommendation& recommendation : kRecommendations) {
    if (recommendation.id == id) return recommendation;
  }
  LOG(FATAL) << "codec " << CodecName(id) << " has no recommended settings";
}

// Why codec `id` cannot carry the pull, or null when it can. The pull's payload decodes to
// the update every worker adds to its weights, so only a decode on the update's scale fits.
const char* CannotPull(CodecId id) {
  switch (id) {
    case CodecId::kSignSgd:
      return "its decode is +-1 per element (a vote, for the push), not the update's "
             "magnitude: every weight would move by +-1 a step";
    case CodecId::kSignum:
      return "its decode is +-1 per element of a momentum it keeps (a vote, for the push), "
             "not the update's magnitude: every weight would move by +-1 a step";
    default:
      return nullptr;
  }
}

// Whether codec `id` sends a subset of the entries each step (the others decode to zero).
bool Sparsifies(CodecId id) {
  switch (id) {
    case CodecId::kTopK:
    case CodecId::kDgc:
    case CodecId::kThreshold:
    case CodecId::kRandomK:
    case CodecId::kRandomBlock:
      return true;
    default:
      return false;
  }
}

// The codecs that can carry the pull, for the refusal's suggestion.
std::string PullCodecNames() {
  std::vector<std::string> names;
  for (const Entry& entry : Entries()) {
    if (entry.rounds == 1 && CannotPull(entry.id) == nullptr) {
      names.emplace_back(CodecName(entry.id));
    }
  }
  return absl::StrJoin(names, ", ");
}

const Entry* Find(absl::string_view name) {
  for (const Entry& entry : Entries()) {
    if (CodecName(entry.id) == name) return &entry;
  }
  return nullptr;
}

std::string KnownNames() {
  return absl::StrJoin(Entries(), ", ", [](std::string* out, const Entry& entry) {
    absl::StrAppend(out, CodecName(entry.id));
  });
}

// The codecs that take `ratio`, hence `ratio_warmup`.
std::string RatioCodecNames() {
  std::vector<std::string> names;
  for (const Entry& entry : Entries()) {
    const auto& accepted = entry.parameters;
    if (std::find(accepted.begin(), accepted.end(), "ratio") != accepted.end()) {
      names.emplace_back(CodecName(entry.id));
    }
  }
  return absl::StrJoin(names, ", ");
}

// Rejects any set field of `spec`, other than the name, that the codec does not document.
absl::Status CheckParameters(const config::Codec& spec, const Entry& entry,
                             absl::string_view field_path) {
  std::vector<const google::protobuf::FieldDescriptor*> set_fields;
  spec.GetReflection()->ListFields(spec, &set_fields);
  for (const google::protobuf::FieldDescriptor* field : set_fields) {
    if (field->number() == config::Codec::kNameFieldNumber) continue;
    const auto& accepted = entry.parameters;
    if (std::find(accepted.begin(), accepted.end(), field->name()) != accepted.end()) continue;
    if (field->number() == config::Codec::kRatioWarmupFieldNumber) {
      // Sparsity warm-up replaces `ratio`, so every codec whose k comes from it takes it.
      if (std::find(accepted.begin(), accepted.end(), "ratio") != accepted.end()) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          field_path, ".ratio_warmup: codec '", spec.name(),
          "' takes no parameter 'ratio_warmup' (sparsity warm-up needs a codec that keeps "
          "k = ratio * n entries: ", RatioCodecNames(), ")"));
    }
    return absl::InvalidArgumentError(absl::StrCat(field_path, ".", field->name(), ": codec '",
                                                   spec.name(), "' takes no parameter '",
                                                   field->name(), "'"));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<CodecInfo>& ListCodecs() {
  static const auto* const infos = [] {
    auto* list = new std::vector<CodecInfo>;
    for (const Entry& entry : Entries()) {
      CodecInfo info{std::string(CodecName(entry.id)), entry.id, entry.summary, entry.parameters,
                     entry.wire_bytes, {}};
      CHECK(google::protobuf::TextFormat::ParseFromString(entry.example, &info.example))
          << "bad example spec of codec " << info.name;
      info.example.set_name(info.name);
      info.rounds = entry.rounds;
      const Recommendation& recommendation = RecommendationOf(entry.id);
      CHECK(google::protobuf::TextFormat::ParseFromString(recommendation.compression,
                                                          &info.recommended))
          << "bad recommended spec of codec " << info.name;
      info.recommended.mutable_pull()->set_name("none");
      CHECK(google::protobuf::TextFormat::ParseFromString(recommendation.optimizer,
                                                          &info.recommended_optimizer))
          << "bad recommended optimizer of codec " << info.name;
      if (const char* why = CannotPull(entry.id); why != nullptr) {
        info.can_pull = false;
        info.cannot_pull = why;
      } else if (entry.rounds != 1) {
        info.can_pull = false;
        info.cannot_pull = "it takes several rounds per step; the pull answers in one";
      }
      list->push_back(std::move(info));
    }
    return list;
  }();
  return *infos;
}

bool SparsifyingCodec(absl::string_view name) {
  const Entry* entry = Find(name);
  return entry != nullptr && Sparsifies(entry->id);
}

std::string SparsifyingCodecNames() {
  std::vector<std::string> names;
  for (const Entry& entry : Entries()) {
    if (Sparsifies(entry.id)) names.emplace_back(CodecName(entry.id));
  }
  return absl::StrJoin(names, ", ");
}

absl::Status ValidateCodecSpec(const config::Codec& spec, absl::string_view field_path) {
  if (spec.name().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".name: missing codec name (known: ", KnownNames(), ")"));
  }
  const Entry* entry = Find(spec.name());
  if (entry == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(field_path, ".name: unknown codec '",
                                                   spec.name(), "' (known: ", KnownNames(), ")"));
  }
  TAMP_RETURN_IF_ERROR(CheckParameters(spec, *entry, field_path));
  for (int e = 0; e < spec.ratio_warmup_size(); ++e) {
    const double ratio = spec.ratio_warmup(e);
    if (!(ratio > 0 && ratio <= 1)) {  // Written so that NaN fails too.
      return absl::InvalidArgumentError(absl::StrCat(field_path, ".ratio_warmup[", e,
                                                     "]: must be in (0, 1], got ", ratio));
    }
  }
  return entry->validate == nullptr ? absl::OkStatus() : entry->validate(spec, field_path);
}

absl::Status ValidatePullCodecSpec(const config::Codec& spec, absl::string_view field_path) {
  TAMP_RETURN_IF_ERROR(ValidateCodecSpec(spec, field_path));
  const Entry* entry = Find(spec.name());
  if (const char* why = CannotPull(entry->id); why != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".name: codec '", spec.name(),
                     "' cannot carry the pull (the servers' update, or in AGGREGATE mode the "
                     "mean gradient): ", why, "; use one whose decode keeps the values' scale, "
                     "e.g. topk with pull_feedback RESIDUAL (all: ",
                     PullCodecNames(), ")"));
  }
  if (entry->rounds != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        field_path, ".name: codec '", spec.name(), "' takes ", entry->rounds,
        " rounds per step and can only push; the pull side answers in one"));
  }
  if (spec.ratio_warmup_size() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field_path, ".ratio_warmup: sparsity warm-up applies to push codecs only"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Codec>> CreateCodec(const config::Codec& spec, size_t num_elements) {
  return CreateCodec(spec, ChunkShape{.elements = num_elements});
}

absl::StatusOr<std::unique_ptr<Codec>> CreateCodec(const config::Codec& spec,
                                                   const ChunkShape& shape) {
  // Callers validate with the real config path at load time; "codec" only labels a spec
  // that skipped that.
  TAMP_RETURN_IF_ERROR(ValidateCodecSpec(spec, "codec"));
  if (shape.elements == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("codec '", spec.name(), "': a chunk needs at least one element"));
  }
  const Entry* entry = Find(spec.name());
  if (entry->create_for_chunk != nullptr) return entry->create_for_chunk(spec, shape);
  return entry->create(spec, shape.elements);
}

}  // namespace tamp::compress
