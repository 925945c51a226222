#include "compress/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "compress/none.h"
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
};

// In wire-id order.
const std::vector<Entry>& Entries() {
  static const auto* const entries = new std::vector<Entry>{
      {CodecId::kNone, "all n values as raw fp32", {}, "12 + 4n", "", nullptr, &NoneCodec::Create},
      {CodecId::kTopK,
       "the k largest-magnitude values: bit-packed indices, then fp32 values",
       {"ratio", "count"},
       "12 + ceil(k*b/8) + 4k; b = max(1, ceil(log2 n)), "
       "k = clamp(round(ratio*n), 1, n) or min(count, n)",
       "ratio: 0.01",
       &TopKCodec::ValidateSpec,
       &TopKCodec::Create},
  };
  return *entries;
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

// Rejects any set field of `spec`, other than the name, that the codec does not document.
absl::Status CheckParameters(const config::Codec& spec, const Entry& entry,
                             absl::string_view field_path) {
  std::vector<const google::protobuf::FieldDescriptor*> set_fields;
  spec.GetReflection()->ListFields(spec, &set_fields);
  for (const google::protobuf::FieldDescriptor* field : set_fields) {
    if (field->number() == config::Codec::kNameFieldNumber) continue;
    const auto& accepted = entry.parameters;
    if (std::find(accepted.begin(), accepted.end(), field->name()) != accepted.end()) continue;
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
      list->push_back(std::move(info));
    }
    return list;
  }();
  return *infos;
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
  return entry->validate == nullptr ? absl::OkStatus() : entry->validate(spec, field_path);
}

absl::StatusOr<std::unique_ptr<Codec>> CreateCodec(const config::Codec& spec, size_t num_elements) {
  // Callers validate with the real config path at load time; "codec" only labels a spec
  // that skipped that.
  TAMP_RETURN_IF_ERROR(ValidateCodecSpec(spec, "codec"));
  if (num_elements == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("codec '", spec.name(), "': a chunk needs at least one element"));
  }
  return Find(spec.name())->create(spec, num_elements);
}

}  // namespace tamp::compress
