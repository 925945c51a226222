// Codec "dgc" (id 4): Deep Gradient Compression's sampled-threshold top-k (Lin et al., 2018),
// sending exactly k entries.
//
// Parameters: `ratio` in (0, 1] (required), k = clamp(round(ratio * n), 1, n);
// `sample_ratio` in (0, 1] (default 0.01), s = clamp(round(sample_ratio * n), 1, n) sampled
// entries; `fp16_values` as for topk.
//
// Body and size: exactly topk's (compress/topk.h): k packed indices, strictly ascending, in
// b = max(1, ceil(log2 n)) bits each, then k values in index order, fp32 or fp16.
// Payload bytes: 12 + ceil(k * b / 8) + v * k, v = 4 (fp32) or 2 (fp16_values).
//
// Encoding:
//   1. Sample s entries, one per stratum (SamplePositions(): positions drawn from
//      PhiloxStream(key), the worker's own stream), and take as floor t the r-th
//      largest sampled magnitude, r = r0 + ceil(3 sqrt(r0)) + 1 with r0 = ceil(k s / n): the
//      margin of about three standard deviations makes about (1 + 3 / sqrt(r0)) k entries
//      clear the floor (1.3k at the default ratios and 2^20 entries) and the chance that
//      fewer than k do about 0.1%.
//   2. Gather the entries with |x| >= t (one vectorised pass). If there are at least k of
//      them (and at most 4k + 65536), the exact k largest among them are selected.
//   3. If fewer than k clear the floor, halve t and repeat, at most 3 times; if t reaches 0,
//      too many entries clear it, or the sample cannot resolve rank r (r > s, e.g. small
//      chunks), fall back to exact top-k over the whole chunk (compress/select.h).
//
// Guarantee: whichever path runs, the k entries sent are exactly the ones topk sends for the
// same input: the k largest magnitudes, NaN counted as +inf, ties to the lowest indices. (The
// gathered set holds every entry with |x| >= t; when it has at least k entries, every entry
// left out is smaller than k gathered ones, so the k largest overall are the k largest of the
// gathered set.) So the payload equals topk's byte for byte apart from the codec id; the
// sample only decides how fast the selection is found, never what it is, and the random key
// does not affect the payload. NaN and +-inf: as topk (NaN selected first, sent bit-exact).
//
// Decoding ignores the key and checks length, index range, strict increase and zero padding.
#ifndef TAMP_COMPRESS_DGC_H_
#define TAMP_COMPRESS_DGC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "compress/sparse.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class DgcCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 1;
  static constexpr double kDefaultSampleRatio = 0.01;
  // Halvings of the floor before falling back to exact selection.
  static constexpr int kMaxRetries = 3;

  // How the selections of this instance were found (for monitoring and tests).
  struct Stats {
    uint64_t encodes = 0;
    uint64_t sampled = 0;          // Found from the sampled floor (after any retries).
    uint64_t retries = 0;          // Floor halvings, over all encodes.
    uint64_t exact_fallbacks = 0;  // Exact selection over the whole chunk.
  };

  // DgcCodec::ValidateSpec()
  //
  // Registry check: `ratio` set and in (0, 1]; `sample_ratio`, if set, in (0, 1].
  static absl::Status ValidateSpec(const config::Codec& spec, absl::string_view field_path);

  // DgcCodec::Create()
  //
  // Registry factory; `spec` has been validated and num_elements >= 1.
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // DgcCodec::SamplePositions()
  //
  // The s positions the sample of `key` reads, ascending: the chunk splits into s strata,
  // [floor(j n / s), floor((j + 1) n / s)), and sample j lies in stratum j at offset
  // floor(w_j * length_j / 2^32), w_j = PhiloxStream(key).Bits(j) (UniformDraws::Below(j,
  // length_j) when a stratum may reach 2^32 entries). Strata keep the estimate steady when
  // magnitudes vary along the chunk (rows of a layer), and memory is read in order.
  static void SamplePositions(const RandomKey& key, size_t num_elements, size_t sample_size,
                              std::vector<size_t>* positions);

  // DgcCodec::SampleSize()
  //
  // s = clamp(round(sample_ratio * n), 1, n).
  static size_t SampleSize(double sample_ratio, size_t num_elements);

  // 1 <= k <= num_elements, 0 < sample_ratio <= 1.
  DgcCodec(size_t num_elements, size_t k, double sample_ratio,
           ValueFormat values = ValueFormat::kFp32);

  size_t k() const { return k_; }
  size_t sample_size() const { return sample_size_; }
  const Stats& stats() const { return stats_; }

  CodecId id() const override { return CodecId::kDgc; }
  // 12 + ceil(k * b / 8) + v * k (TopKCodec::PayloadBytes()).
  size_t MaxPayloadBytes() const override;
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
  // Scatter-adds the k values; no dense scratch.
  absl::Status DecodeAdd(absl::string_view payload, const RandomKey& key,
                         absl::Span<float> accumulator) const override;
  absl::StatusOr<bool> DecodeSparse(absl::string_view payload, const RandomKey& key,
                                    SparseEntries* entries) const override;

 private:
  // Fills *indices with the selection (see the file comment).
  void Select(absl::Span<const float> input, const RandomKey& key, std::vector<size_t>* indices);
  absl::StatusOr<IndexedValues> Parse(absl::string_view payload) const;

  const size_t k_;
  const size_t sample_size_;
  const ValueFormat values_;
  Stats stats_;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_DGC_H_
