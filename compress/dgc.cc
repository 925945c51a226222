#include "compress/dgc.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/sampled_select.h"
#include "compress/topk.h"
#include "glog/logging.h"

namespace tamp::compress {

absl::Status DgcCodec::ValidateSpec(const config::Codec& spec, absl::string_view field_path) {
  TAMP_RETURN_IF_ERROR(ValidateRatio(spec, field_path, "dgc"));
  // Written so that NaN fails too.
  if (spec.has_sample_ratio() && !(spec.sample_ratio() > 0 && spec.sample_ratio() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".sample_ratio: must be in (0, 1], got ", spec.sample_ratio()));
  }
  return absl::OkStatus();
}

std::unique_ptr<Codec> DgcCodec::Create(const config::Codec& spec, size_t num_elements) {
  return std::make_unique<DgcCodec>(
      num_elements, EntriesKept(spec, num_elements),
      spec.has_sample_ratio() ? spec.sample_ratio() : kDefaultSampleRatio, ValueFormatOf(spec));
}

DgcCodec::DgcCodec(size_t num_elements, size_t k, double sample_ratio, ValueFormat values)
    : IndexedValuesCodec(num_elements, kVersion, values),
      k_(k),
      sample_size_(SampleSize(sample_ratio, num_elements)) {
  CHECK_GE(k, 1u);
  CHECK_LE(k, num_elements);
  CHECK(sample_ratio > 0 && sample_ratio <= 1) << sample_ratio;
}

size_t DgcCodec::MaxPayloadBytes() const {
  return TopKCodec::PayloadBytes(size(), k_, value_format());
}

absl::Status DgcCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                              std::string* payload) {
  CHECK_EQ(input.size(), size());
  thread_local std::vector<size_t> indices;
  SelectLargestSampled(input, k_, sample_size_, key, &indices, &stats_);
  DCHECK_EQ(indices.size(), k_);
  StartPayload(MaxPayloadBytes(), payload);
  AppendEntries(input, indices, payload);
  DCHECK_EQ(payload->size(), MaxPayloadBytes());
  return absl::OkStatus();
}

absl::StatusOr<IndexedValues> DgcCodec::ParseBody(absl::string_view body) const {
  return ParseIndexedValues(body, k_, size(), value_format(), "dgc");
}

}  // namespace tamp::compress
