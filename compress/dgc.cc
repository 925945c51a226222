#include "compress/dgc.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/sampled_select.h"
#include "compress/topk.h"
#include "compress/wire_format.h"
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
    : Codec(num_elements),
      k_(k),
      sample_size_(SampleSize(sample_ratio, num_elements)),
      values_(values) {
  CHECK_GE(k, 1u);
  CHECK_LE(k, num_elements);
  CHECK(sample_ratio > 0 && sample_ratio <= 1) << sample_ratio;
}

size_t DgcCodec::MaxPayloadBytes() const { return TopKCodec::PayloadBytes(size(), k_, values_); }

absl::Status DgcCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                              std::string* payload) {
  CHECK_EQ(input.size(), size());
  thread_local std::vector<size_t> indices;
  SelectLargestSampled(input, k_, sample_size_, key, &indices, &stats_);
  DCHECK_EQ(indices.size(), k_);
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kDgc, kVersion, size(), payload);
  AppendIndices(indices, IndexBits(size()), payload);
  GatherValues(input, indices, values_, payload);
  DCHECK_EQ(payload->size(), MaxPayloadBytes());
  return absl::OkStatus();
}

absl::StatusOr<IndexedValues> DgcCodec::Parse(absl::string_view payload) const {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kDgc, kVersion, size()));
  return ParseIndexedValues(body, k_, size(), values_, "dgc");
}

absl::Status DgcCodec::Decode(absl::string_view payload, const RandomKey& /*key*/,
                              absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const IndexedValues entries, Parse(payload));
  std::fill(out.begin(), out.end(), 0.0f);
  ScatterValues(entries.indices, entries.values, values_, out.data());
  return absl::OkStatus();
}

absl::StatusOr<bool> DgcCodec::DecodeSparse(absl::string_view payload, const RandomKey& /*key*/,
                                            SparseEntries* entries) const {
  TAMP_ASSIGN_OR_RETURN(const IndexedValues parsed, Parse(payload));
  ToSparseEntries(parsed, values_, entries);
  return true;
}

absl::Status DgcCodec::DecodeAdd(absl::string_view payload, const RandomKey& /*key*/,
                                 absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const IndexedValues entries, Parse(payload));
  ScatterAddValues(entries.indices, entries.values, values_, accumulator.data());
  return absl::OkStatus();
}

}  // namespace tamp::compress
