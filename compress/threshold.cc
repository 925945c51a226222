#include "compress/threshold.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
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
    : IndexedValuesCodec(num_elements, kVersion, values),
      threshold_(threshold),
      key_floor_(KeyFloor(threshold)) {}

size_t ThresholdCodec::MaxPayloadBytes() const {
  return PayloadBytes(size(), size(), value_format());
}

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
  StartPayload(PayloadBytes(size(), count, value_format()), payload);
  payload->append(reinterpret_cast<const char*>(&count), kCountBytes);
  AppendEntries(input, indices, payload);
  DCHECK_EQ(payload->size(), PayloadBytes(size(), count, value_format()));
  return absl::OkStatus();
}

absl::StatusOr<IndexedValues> ThresholdCodec::ParseBody(absl::string_view body) const {
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
  const size_t expected = PayloadBytes(size(), count, value_format()) - kHeaderBytes;
  if (body.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("threshold payload body is ", body.size(),
                                                   " bytes, expected ", expected, " for count ",
                                                   count, " (", index_bits(), " bits per index)"));
  }
  return ParseIndexedValues(body.substr(kCountBytes), count, size(), value_format(),
                            "threshold");
}

}  // namespace tamp::compress
