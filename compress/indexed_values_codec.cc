#include "compress/indexed_values_codec.h"

#include <algorithm>

#include "base/status_macros.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {

IndexedValuesCodec::IndexedValuesCodec(size_t num_elements, uint8_t version, ValueFormat values)
    : Codec(num_elements),
      version_(version),
      values_(values),
      index_bits_(IndexBits(num_elements)) {}

void IndexedValuesCodec::StartPayload(size_t bytes, std::string* payload) const {
  payload->clear();
  payload->reserve(bytes);
  AppendHeader(id(), version_, size(), payload);
}

void IndexedValuesCodec::AppendEntries(absl::Span<const float> input,
                                       absl::Span<const size_t> indices,
                                       std::string* payload) const {
  AppendIndices(indices, index_bits_, payload);
  GatherValues(input, indices, values_, payload);
}

absl::StatusOr<IndexedValues> IndexedValuesCodec::Parse(absl::string_view payload) const {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, id(), version_, size()));
  return ParseBody(body);
}

absl::Status IndexedValuesCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                                        absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const IndexedValues entries, Parse(payload));
  std::fill(out.begin(), out.end(), 0.0f);
  ScatterValues(entries.indices, entries.values, values_, out.data());
  return absl::OkStatus();
}

absl::Status IndexedValuesCodec::DecodeAdd(absl::string_view payload, const RandomKey& /*key*/,
                                           absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const IndexedValues entries, Parse(payload));
  ScatterAddValues(entries.indices, entries.values, values_, accumulator.data());
  return absl::OkStatus();
}

absl::StatusOr<bool> IndexedValuesCodec::DecodeSparse(absl::string_view payload,
                                                      const RandomKey& /*key*/,
                                                      SparseEntries* entries) const {
  TAMP_ASSIGN_OR_RETURN(const IndexedValues parsed, Parse(payload));
  const size_t count = parsed.indices.size();
  entries->indices.assign(parsed.indices.begin(), parsed.indices.end());
  entries->values.resize(count);
  LoadValues(parsed.values, count, values_, entries->values.data());
  return true;
}

}  // namespace tamp::compress
