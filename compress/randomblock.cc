#include "compress/randomblock.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

// floor(s * n / b) without overflow.
size_t SegmentBegin(size_t s, size_t n, size_t b) {
  return static_cast<size_t>(static_cast<unsigned __int128>(s) * n / b);
}

}  // namespace

absl::Status RandomBlockCodec::ValidateSpec(const config::Codec& spec,
                                            absl::string_view field_path) {
  TAMP_RETURN_IF_ERROR(ValidateRatio(spec, field_path, "randomblock"));
  if (spec.has_num_blocks() && spec.num_blocks() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(field_path, ".num_blocks: must be >= 1, got 0"));
  }
  return absl::OkStatus();
}

std::unique_ptr<Codec> RandomBlockCodec::Create(const config::Codec& spec, size_t num_elements) {
  return std::make_unique<RandomBlockCodec>(num_elements, EntriesKept(spec, num_elements),
                                            spec.has_num_blocks() ? spec.num_blocks() : 1,
                                            ValueFormatOf(spec));
}

RandomBlockCodec::RandomBlockCodec(size_t num_elements, size_t k, uint64_t num_blocks,
                                   ValueFormat values)
    : Codec(num_elements),
      blocks_(static_cast<size_t>(std::min<uint64_t>(num_blocks, k))),
      block_length_(k / std::max<size_t>(blocks_, 1)),
      values_(values) {
  CHECK_GE(k, 1u);
  CHECK_LE(k, num_elements);
  CHECK_GE(num_blocks, 1u);
}

size_t RandomBlockCodec::MaxPayloadBytes() const {
  return kHeaderBytes + ValueBytes(values_) * entries_sent();
}

void RandomBlockCodec::BlockStarts(const RandomKey& key, std::vector<size_t>* starts) const {
  const size_t n = size();
  UniformDraws draws(RandomKey{key.seed, key.step, key.chunk, kSharedStream});
  starts->resize(blocks_);
  for (size_t s = 0; s < blocks_; ++s) {
    const size_t begin = SegmentBegin(s, n, blocks_);
    const size_t length = SegmentBegin(s + 1, n, blocks_) - begin;
    DCHECK_GE(length, block_length_);
    (*starts)[s] = begin + draws.Below(s, length - block_length_ + 1);
  }
}

absl::Status RandomBlockCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                                      std::string* payload) {
  CHECK_EQ(input.size(), size());
  thread_local std::vector<size_t> starts;
  BlockStarts(key, &starts);
  payload->clear();
  payload->reserve(MaxPayloadBytes());
  AppendHeader(CodecId::kRandomBlock, kVersion, size(), payload);
  for (size_t start : starts) {
    AppendValues(input.subspan(start, block_length_), values_, payload);
  }
  DCHECK_EQ(payload->size(), MaxPayloadBytes());
  return absl::OkStatus();
}

absl::StatusOr<const char*> RandomBlockCodec::Values(absl::string_view payload) const {
  TAMP_ASSIGN_OR_RETURN(const absl::string_view body,
                        ParseHeader(payload, CodecId::kRandomBlock, kVersion, size()));
  const size_t expected = ValueBytes(values_) * entries_sent();
  if (body.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("randomblock payload body is ", body.size(),
                                                   " bytes, expected ", expected, " (", blocks_,
                                                   " blocks of ", block_length_, " values)"));
  }
  return body.data();
}

absl::Status RandomBlockCodec::Decode(absl::string_view payload, const RandomKey& key,
                                      absl::Span<float> out) const {
  CHECK_EQ(out.size(), size());
  TAMP_ASSIGN_OR_RETURN(const char* values, Values(payload));
  thread_local std::vector<size_t> starts;
  BlockStarts(key, &starts);
  std::fill(out.begin(), out.end(), 0.0f);
  const size_t block_bytes = ValueBytes(values_) * block_length_;
  for (size_t s = 0; s < starts.size(); ++s) {
    LoadValues(values + s * block_bytes, block_length_, values_, out.data() + starts[s]);
  }
  return absl::OkStatus();
}

absl::Status RandomBlockCodec::DecodeAdd(absl::string_view payload, const RandomKey& key,
                                         absl::Span<float> accumulator) const {
  CHECK_EQ(accumulator.size(), size());
  TAMP_ASSIGN_OR_RETURN(const char* values, Values(payload));
  thread_local std::vector<size_t> starts;
  BlockStarts(key, &starts);
  const size_t block_bytes = ValueBytes(values_) * block_length_;
  for (size_t s = 0; s < starts.size(); ++s) {
    AddValues(values + s * block_bytes, block_length_, values_, accumulator.data() + starts[s]);
  }
  return absl::OkStatus();
}

}  // namespace tamp::compress
