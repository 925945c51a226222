#include "compress/topk.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
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
    : Codec(num_elements),
      k_(k),
      index_bits_(IndexBits(num_elements)),
      sample_size_(SampleSize(kSampleRatio, num_elements)),
      values_(values) {
  CHECK_GE(k, 1u);
  CHECK_LE(k, num_elements);
}

absl::Status TopKCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                               std::string* payload) {
  CHECK_EQ(input.size(), size());
  thread_local std::vector<size_t> indices;
  SelectLargestSampled(input, k_, sample_size_, key, &indices, &stats_);
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kTopK, kVersion, size(), payload);
  AppendIndices(indices, index_bits_, payload);
  GatherValues(input, indices, values_, payload);
  DCHECK_EQ(payload->size(), MaxPayloadBytes());
  return absl::OkStatus();
}

absl::StatusOr<IndexedValues> TopKCodec::Parse(absl::string_view payload) const {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kTopK, kVersion, size()));
  return ParseIndexedValues(body, k_, size(), values_, "topk");
}

absl::Status TopKCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                               absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const IndexedValues entries, Parse(payload));
  std::fill(out.begin(), out.end(), 0.0f);
  ScatterValues(entries.indices, entries.values, values_, out.data());
  return absl::OkStatus();
}

absl::StatusOr<bool> TopKCodec::DecodeSparse(absl::string_view payload, const RandomKey& /*key*/,
                                             SparseEntries* entries) const {
  TAMP_ASSIGN_OR_RETURN(const IndexedValues parsed, Parse(payload));
  ToSparseEntries(parsed, values_, entries);
  return true;
}

absl::Status TopKCodec::DecodeAdd(absl::string_view payload, const RandomKey& /*key*/,
                                  absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const IndexedValues entries, Parse(payload));
  ScatterAddValues(entries.indices, entries.values, values_, accumulator.data());
  return absl::OkStatus();
}

}  // namespace tamp::compress
