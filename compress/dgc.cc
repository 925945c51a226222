#include "compress/dgc.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compress/select.h"
#include "compress/topk.h"
#include "compress/wire_format.h"
#include "glog/logging.h"

namespace tamp::compress {
namespace {

// More gathered entries than this means the floor was far too low: exact selection over the
// whole chunk is then about as cheap, and scratch stays O(k).
size_t MaxCandidates(size_t k) { return 4 * k + 65536; }

// The key of half the magnitude with key `key`, and always below `key` (so +inf, whose half
// is +inf, and the smallest subnormal, whose half rounds to 0, still make progress).
uint32_t HalfKey(uint32_t key) {
  float magnitude;
  std::memcpy(&magnitude, &key, sizeof(magnitude));
  return std::min(MagnitudeKey(magnitude * 0.5f), key - 1);
}

// The sample's positions, one per stratum in order (see DgcCodec::SamplePositions()),
// produced a batch at a time.
class StratifiedPositions {
 public:
  static constexpr size_t kBatch = 64;  // A multiple of 4: batches start on Philox blocks.
  static_assert(kBatch % 4 == 0);

  StratifiedPositions(const RandomKey& key, size_t n, size_t s)
      : stream_(key),
        wide_(key),
        s_(s),
        base_(n / s),
        extra_(n % s),
        narrow_(base_ < 0xffffffffu) {}

  // Writes the next min(kBatch, s - produced) positions into out[] and returns how many.
  size_t NextBatch(size_t* out) {
    const size_t count = std::min(kBatch, s_ - j_);
    uint32_t words[kBatch];
    if (narrow_) {
      // Words j_ .. j_ + count of the stream; j_ is a multiple of 4 (kBatch is).
      for (size_t t = 0; t < count; t += 4) {
        const r123::Philox4x32::ctr_type block = stream_.Block(static_cast<uint32_t>((j_ + t) / 4));
        std::copy(block.v, block.v + 4, words + t);
      }
    }
    for (size_t t = 0; t < count; ++t, ++j_) {
      carry_ += extra_;
      const size_t length = base_ + (carry_ >= s_);
      if (carry_ >= s_) carry_ -= s_;
      const size_t offset = narrow_ ? static_cast<size_t>((uint64_t{words[t]} * length) >> 32)
                                    : static_cast<size_t>(wide_.Below(j_, length));
      out[t] = begin_ + offset;
      begin_ += length;
    }
    return count;
  }

 private:
  const PhiloxStream stream_;
  UniformDraws wide_;
  const size_t s_, base_, extra_;  // Strata are base_ or base_ + 1 long.
  const bool narrow_;              // Every stratum is shorter than 2^32.
  size_t j_ = 0, begin_ = 0, carry_ = 0;
};

// Sample keys: each batch's positions first, then its loads, which can then overlap.
void SampleKeys(absl::Span<const float> input, const RandomKey& key, absl::Span<uint32_t> out) {
  StratifiedPositions positions(key, input.size(), out.size());
  size_t batch[StratifiedPositions::kBatch];
  for (size_t first = 0; first < out.size();) {
    const size_t count = positions.NextBatch(batch);
    for (size_t t = 0; t < count; ++t) out[first + t] = MagnitudeKey(input[batch[t]]);
    first += count;
  }
}

}  // namespace

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

void DgcCodec::SamplePositions(const RandomKey& key, size_t num_elements, size_t sample_size,
                               std::vector<size_t>* positions) {
  CHECK(sample_size >= 1 && sample_size <= num_elements) << sample_size << " of " << num_elements;
  StratifiedPositions stratified(key, num_elements, sample_size);
  positions->resize(sample_size + StratifiedPositions::kBatch);
  for (size_t first = 0; first < sample_size;) first += stratified.NextBatch(&(*positions)[first]);
  positions->resize(sample_size);
}

size_t DgcCodec::SampleSize(double sample_ratio, size_t num_elements) {
  const double s = std::round(sample_ratio * static_cast<double>(num_elements));
  if (s < 1) return 1;
  if (s >= static_cast<double>(num_elements)) return num_elements;
  return static_cast<size_t>(s);
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

void DgcCodec::Select(absl::Span<const float> input, const RandomKey& key,
                      std::vector<size_t>* indices) {
  const size_t n = size();
  const size_t s = sample_size_;
  // r0 = ceil(k s / n), in 128 bits: k s may exceed 2^64 for huge chunks.
  const auto r0 = static_cast<size_t>((static_cast<unsigned __int128>(k_) * s + n - 1) / n);
  const size_t rank =
      r0 + static_cast<size_t>(std::ceil(3 * std::sqrt(static_cast<double>(r0)))) + 1;
  if (k_ < n && rank <= s) {
    thread_local std::vector<uint32_t> sample;
    sample.resize(s);
    SampleKeys(input, key, absl::MakeSpan(sample));
    uint32_t floor = KthLargestKey(sample, rank);
    for (int attempt = 0; attempt <= kMaxRetries && floor > 0; ++attempt) {
      const SelectOutcome outcome =
          SelectLargestAtLeast(input, k_, floor, MaxCandidates(k_), indices);
      if (outcome == SelectOutcome::kSelected) {
        ++stats_.sampled;
        return;
      }
      if (outcome == SelectOutcome::kTooMany || attempt == kMaxRetries) break;
      ++stats_.retries;
      floor = HalfKey(floor);
    }
  }
  ++stats_.exact_fallbacks;
  SelectLargestMagnitudes(input, k_, indices);
}

absl::Status DgcCodec::Encode(absl::Span<const float> input, const RandomKey& key,
                              std::string* payload) {
  CHECK_EQ(input.size(), size());
  ++stats_.encodes;
  thread_local std::vector<size_t> indices;
  Select(input, key, &indices);
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
