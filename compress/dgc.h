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
// Encoding: compress/sampled_select.h with s samples drawn from PhiloxStream(key), the
// worker's own stream: a floor from the sample, one vectorised gathering pass, the exact k
// largest among the gathered entries, and an exact fallback when the sample misleads.
//
// Guarantee: whichever path runs, the k entries sent are exactly the ones topk sends for the
// same input: the k largest magnitudes, NaN counted as +inf, ties to the lowest indices. So
// the payload equals topk's byte for byte apart from the codec id; the sample only decides
// how fast the selection is found, never what it is, and the random key does not affect the
// payload. NaN and +-inf: as topk (NaN selected first, sent as the canonical
// NaN; body version 2 like topk's). topk itself finds its
// selection the same way at a 1% sample; dgc's `sample_ratio` sets the sample's size.
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
#include "compress/indexed_values_codec.h"
#include "compress/sampled_select.h"
#include "compress/sparse.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class DgcCodec final : public IndexedValuesCodec {
 public:
  static constexpr uint8_t kVersion = 2;
  static constexpr double kDefaultSampleRatio = 0.01;

  // DgcCodec::ValidateSpec()
  //
  // Registry check: `ratio` set and in (0, 1]; `sample_ratio`, if set, in (0, 1].
  static absl::Status ValidateSpec(const config::Codec& spec, absl::string_view field_path);

  // DgcCodec::Create()
  //
  // Registry factory; `spec` has been validated and num_elements >= 1.
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // 1 <= k <= num_elements, 0 < sample_ratio <= 1.
  DgcCodec(size_t num_elements, size_t k, double sample_ratio,
           ValueFormat values = ValueFormat::kFp32);

  size_t k() const { return k_; }
  size_t sample_size() const { return sample_size_; }
  // How this instance's selections were found.
  const SampledSelectStats& stats() const { return stats_; }

  CodecId id() const override { return CodecId::kDgc; }
  // 12 + ceil(k * b / 8) + v * k (TopKCodec::PayloadBytes()).
  size_t MaxPayloadBytes() const override;
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;

 private:
  // Exactly k entries.
  absl::StatusOr<IndexedValues> ParseBody(absl::string_view body) const override;

  const size_t k_;
  const size_t sample_size_;
  SampledSelectStats stats_;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_DGC_H_
