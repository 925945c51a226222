// Codec "topk" (id 1): the k entries of largest magnitude, exactly; the rest decode as 0.
//
// Parameters: exactly one of `ratio` in (0, 1], k = clamp(round(ratio * n), 1, n), and
// `count` >= 1, k = min(count, n) (EntriesKept() in compress/sparse.h). Optional
// `fp16_values`: values travel as fp16 (compress/sparse.h FloatToHalf(): round to nearest
// even, finite values saturate at +-65504, inf kept, NaN as 0x7e00).
//
// Body: the k indices, strictly ascending, each in b = max(1, ceil(log2 n)) bits (BitWriter
// packing, zero-padded to a byte), then the k values in index order, fp32 or fp16, every NaN
// canonical (compress/wire_format.h; version 2, where version 1 kept NaN payloads).
// Payload bytes: 12 + ceil(k * b / 8) + v * k, v = 4 (fp32) or 2 (fp16_values). k and v
// follow from n and the spec, so they do not travel: one version for both value formats,
// and the decoder (built from the same spec) requires exactly this length.
//
// Selection: compress/select.h, exact. Entries compare by |x|, with NaN counted as +inf so
// that a NaN is always sent and shows up on the receiver instead of vanishing into the
// residual; +-inf are sent like any large value. Among equal magnitudes the lowest indices
// win, so the choice is deterministic. It is found from a floor estimated on a 1% sample
// of the entries (compress/sampled_select.h, the positions drawn from the encode's key):
// the sample decides only how fast, never what, so the payload does not depend on the key.
// Cost: 1% random reads, one vectorised gather pass and O(k) work; the exact radix select
// over the whole chunk (compress/select.h) when the sample misleads. Scratch is per thread.
#ifndef TAMP_COMPRESS_TOPK_H_
#define TAMP_COMPRESS_TOPK_H_

#include <memory>
#include <string>

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

class TopKCodec final : public IndexedValuesCodec {
 public:
  static constexpr uint8_t kVersion = 2;
  // Share of the entries sampled to estimate the selection's floor.
  static constexpr double kSampleRatio = 0.01;

  // TopKCodec::ValidateSpec()
  //
  // Registry check: exactly one of ratio and count is set, and it is in range
  // (fp16_values is free).
  static absl::Status ValidateSpec(const config::Codec& spec, absl::string_view field_path);

  // TopKCodec::Create()
  //
  // Registry factory; `spec` has been validated and num_elements >= 1.
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // TopKCodec::EntriesKept()
  //
  // k for a chunk of num_elements >= 1 values under a valid `spec`.
  static size_t EntriesKept(const config::Codec& spec, size_t num_elements);

  // TopKCodec::IndexBits()
  //
  // b = max(1, ceil(log2(num_elements))): the bits of one packed index.
  static int IndexBits(size_t num_elements);

  // TopKCodec::PayloadBytes()
  //
  // 12 + ceil(k * b / 8) + v * k; v = 4 for fp32 values, 2 for fp16.
  static size_t PayloadBytes(size_t num_elements, size_t k,
                             ValueFormat values = ValueFormat::kFp32);

  // 1 <= k <= num_elements.
  TopKCodec(size_t num_elements, size_t k, ValueFormat values = ValueFormat::kFp32);

  // Entries sent per payload.
  size_t k() const { return k_; }
  // How this instance's selections were found.
  const SampledSelectStats& stats() const { return stats_; }

  CodecId id() const override { return CodecId::kTopK; }
  size_t MaxPayloadBytes() const override {
    return PayloadBytes(size(), k_, value_format());
  }
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

#endif  // TAMP_COMPRESS_TOPK_H_
