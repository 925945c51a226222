#include "compress/sampled_select.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "compress/select.h"
#include "compress/sparse.h"
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

// The sample's positions, one per stratum in order (see SamplePositions()),
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

void SamplePositions(const RandomKey& key, size_t num_elements, size_t sample_size,
                     std::vector<size_t>* positions) {
  CHECK(sample_size >= 1 && sample_size <= num_elements) << sample_size << " of " << num_elements;
  StratifiedPositions stratified(key, num_elements, sample_size);
  positions->resize(sample_size + StratifiedPositions::kBatch);
  for (size_t first = 0; first < sample_size;) first += stratified.NextBatch(&(*positions)[first]);
  positions->resize(sample_size);
}

size_t SampleSize(double sample_ratio, size_t num_elements) {
  const double s = std::round(sample_ratio * static_cast<double>(num_elements));
  if (s < 1) return 1;
  if (s >= static_cast<double>(num_elements)) return num_elements;
  return static_cast<size_t>(s);
}

void SelectLargestSampled(absl::Span<const float> input, size_t k, size_t sample_size,
                          const RandomKey& key, std::vector<size_t>* indices,
                          SampledSelectStats* stats) {
  const size_t n = input.size();
  const size_t s = sample_size;
  CHECK(k >= 1 && k <= n) << k << " of " << n;
  CHECK(s >= 1 && s <= n) << s << " of " << n;
  ++stats->selections;
  // r0 = ceil(k s / n), in 128 bits: k s may exceed 2^64 for huge chunks.
  const auto r0 = static_cast<size_t>((static_cast<unsigned __int128>(k) * s + n - 1) / n);
  const size_t rank =
      r0 + static_cast<size_t>(std::ceil(3 * std::sqrt(static_cast<double>(r0)))) + 1;
  if (k < n && rank <= s) {
    thread_local std::vector<uint32_t> sample;
    sample.resize(s);
    SampleKeys(input, key, absl::MakeSpan(sample));
    uint32_t floor = KthLargestKey(sample, rank);
    for (int attempt = 0; attempt <= kMaxFloorRetries && floor > 0; ++attempt) {
      const SelectOutcome outcome =
          SelectLargestAtLeast(input, k, floor, MaxCandidates(k), indices);
      if (outcome == SelectOutcome::kSelected) {
        ++stats->sampled;
        return;
      }
      if (outcome == SelectOutcome::kTooMany || attempt == kMaxFloorRetries) break;
      ++stats->retries;
      floor = HalfKey(floor);
    }
  }
  ++stats->exact_fallbacks;
  SelectLargestMagnitudes(input, k, indices);
}

}  // namespace tamp::compress
