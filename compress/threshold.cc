#include "compress/threshold.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/select.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {

absl::Status ThresholdCodec::ValidateSpec(const config::Codec& spec, absl::string_view field_path) {
  if (!spec.has_threshold()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ": codec 'threshold' needs 'threshold'"));
  }
  // Written so that NaN fails too.
  if (!(spec.threshold() > 0 && std::isfinite(spec.threshold()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_path, ".threshold: must be finite and > 0, got ", spec.threshold()));
  }
  return absl::OkStatus();
}

std::unique_ptr<Codec> ThresholdCodec::Create(const config::Codec& spec, size_t num_elements) {
  return std::make_unique<ThresholdCodec>(num_elements, spec.threshold(), ValueFormatOf(spec));
}

size_t ThresholdCodec::PayloadBytes(size_t num_elements, size_t count, ValueFormat values) {
  return kHeaderBytes + kCountBytes + PackedIndexBytes(count, IndexBits(num_elements)) +
         ValueBytes(values) * count;
}

uint32_t ThresholdCodec::KeyFloor(double threshold) {
  CHECK(threshold > 0 && std::isfinite(threshold)) << threshold;
  float floor = threshold >= std::numeric_limits<float>::max() ? std::numeric_limits<float>::max()
                                                               : static_cast<float>(threshold);
  if (static_cast<double>(floor) > threshold) floor = std::nextafter(floor, 0.0f);
  return MagnitudeKey(floor);
}

ThresholdCodec::ThresholdCodec(size_t num_elements, double threshold, ValueFormat values)
    : Codec(num_elements),
      threshold_(threshold),
      key_floor_(KeyFloor(threshold)),
      index_bits_(IndexBits(num_elements)),
      values_(values) {}

size_t ThresholdCodec::MaxPayloadBytes() const { return PayloadBytes(size(), size(), values_); }

absl::Status ThresholdCodec::Encode(absl::Span<const float> input, const RandomKey& /*key*/,
                                    std::string* payload) {
  CHECK_EQ(input.size(), size());
  thread_local std::vector<size_t> indices;
  indices.clear();
  ForEachKeyAtLeast(input, key_floor_ + 1, [&](size_t i) {
    indices.push_back(i);
    return true;
  });
  const uint64_t count = indices.size();
  payload->clear();
  payload->reserve(PayloadBytes(size(), count, values_));
  AppendHeader(CodecId::kThreshold, kVersion, size(), payload);
  payload->append(reinterpret_cast<const char*>(&count), kCountBytes);
  AppendIndices(indices, index_bits_, payload);
  GatherValues(input, indices, values_, payload);
  DCHECK_EQ(payload->size(), PayloadBytes(size(), count, values_));
  return absl::OkStatus();
}

absl::StatusOr<IndexedValues> ThresholdCodec::Parse(absl::string_view payload) const {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kThreshold, kVersion, size()));
  if (body.size() < kCountBytes) {
    return absl::InvalidArgumentError(absl::StrCat("threshold payload body is ", body.size(),
                                                   " bytes, too short for the 8-byte count"));
  }
  uint64_t count;
  std::memcpy(&count, body.data(), kCountBytes);
  if (count > size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("threshold count ", count, " exceeds the chunk size ", size()));
  }
  const size_t expected = PayloadBytes(size(), count, values_) - kHeaderBytes;
  if (body.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("threshold payload body is ", body.size(),
                                                   " bytes, expected ", expected, " for count ",
                                                   count, " (", index_bits_, " bits per index)"));
  }
  return ParseIndexedValues(body.substr(kCountBytes), count, size(), values_, "threshold");
}

absl::Status ThresholdCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                                    absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const IndexedValues entries, Parse(payload));
  std::fill(out.begin(), out.end(), 0.0f);
  ScatterValues(entries.indices, entries.values, values_, out.data());
  return absl::OkStatus();
}

absl::StatusOr<bool> ThresholdCodec::DecodeSparse(absl::string_view payload, const RandomKey& /*key*/,
                                                  SparseEntries* entries) const {
  TAMP_ASSIGN_OR_RETURN(const IndexedValues parsed, Parse(payload));
  ToSparseEntries(parsed, values_, entries);
  return true;
}

absl::Status ThresholdCodec::DecodeAdd(absl::string_view payload, const RandomKey& /*key*/,
                                       absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const IndexedValues entries, Parse(payload));
  ScatterAddValues(entries.indices, entries.values, values_, accumulator.data());
  return absl::OkStatus();
}

}  // namespace tamp::compress
