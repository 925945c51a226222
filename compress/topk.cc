#include "compress/topk.h"

#include <vector>

#include "compress/sampled_select.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {

absl::Status TopKCodec::ValidateSpec(const config::Codec& spec, absl::string_view field_path) {
  return ValidateRatioOrCount(spec, field_path, "topk");
}

std::unique_ptr<Codec> TopKCodec::Create(const config::Codec& spec, size_t num_elements) {
  return std::make_unique<TopKCodec>(num_elements, EntriesKept(spec, num_elements),
                                     ValueFormatOf(spec));
}

size_t TopKCodec::EntriesKept(const config::Codec& spec, size_t num_elements) {
  return compress::EntriesKept(spec, num_elements);
}

int TopKCodec::IndexBits(size_t num_elements) { return compress::IndexBits(num_elements); }

size_t TopKCodec::PayloadBytes(size_t num_elements, size_t k, ValueFormat values) {
  return kHeaderBytes + PackedIndexBytes(k, IndexBits(num_elements)) + ValueBytes(values) * k;
}

TopKCodec::TopKCodec(size_t num_elements, size_t k, ValueFormat values)
    : IndexedValuesCodec(num_elements, kVersion, values),
      k_(k),
      sample_size_(SampleSize(kSampleRatio, num_elements)) {
  CHECK_GE(k, 1u);
  CHECK_LE(k, num_elements);
}

absl::Status TopKCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                               std::string* payload) {
  CHECK_EQ(input.size(), size());
  thread_local std::vector<size_t> indices;
  SelectLargestSampled(input, k_, sample_size_, key, &indices, &stats_);
  StartPayload(MaxPayloadBytes(), payload);
  AppendEntries(input, indices, payload);
  DCHECK_EQ(payload->size(), MaxPayloadBytes());
  return absl::OkStatus();
}

absl::StatusOr<IndexedValues> TopKCodec::ParseBody(absl::string_view body) const {
  return ParseIndexedValues(body, k_, size(), value_format(), "topk");
}

}  // namespace tamp::compress
