// Codec "threshold" (id 5): every entry whose magnitude exceeds a fixed threshold; a variable
// number of entries, possibly none.
//
// Parameters: `threshold` (required), finite and > 0; `fp16_values` as for topk.
//
// Selection: entry i is sent iff |x_i| > threshold, compared exactly (the double threshold
// is first rounded down to the largest float T <= threshold, and |x| > threshold iff |x| > T
// for every float x). NaN counts as +inf magnitude, so every NaN is sent (and surfaces at the
// receiver); +-inf are always sent; +-0 never are. Deterministic: the key is not used.
//
// Body: count c (uint64, little-endian, c <= n), then the c indices, strictly ascending, in
// b = max(1, ceil(log2 n)) bits each (BitWriter packing, zero-padded to a byte), then the c
// values in index order, fp32 (bit-exact, NaN as 0x7fc00000: compress/wire_format.h; version 2)
// or fp16 (compress/sparse.h FloatToHalf()).
// Payload bytes: 12 + 8 + ceil(c * b / 8) + v * c, v = 4 (fp32) or 2 (fp16_values);
// MaxPayloadBytes() is that at c = n. An empty selection is a valid 20-byte payload.
//
// The decoder checks c <= n, the exact length for c, index range, strict increase and zero
// padding before touching the output.
#ifndef TAMP_COMPRESS_THRESHOLD_H_
#define TAMP_COMPRESS_THRESHOLD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "compress/indexed_values_codec.h"
#include "compress/sparse.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class ThresholdCodec final : public IndexedValuesCodec {
 public:
  static constexpr uint8_t kVersion = 2;
  static constexpr size_t kCountBytes = 8;

  // ThresholdCodec::ValidateSpec()
  //
  // Registry check: `threshold` is set, finite and > 0.
  static absl::Status ValidateSpec(const config::Codec& spec, absl::string_view field_path);

  // ThresholdCodec::Create()
  //
  // Registry factory; `spec` has been validated and num_elements >= 1.
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // ThresholdCodec::PayloadBytes()
  //
  // 12 + 8 + ceil(c * b / 8) + v * c for c entries sent.
  static size_t PayloadBytes(size_t num_elements, size_t count, ValueFormat values);

  // ThresholdCodec::KeyFloor()
  //
  // The MagnitudeKey (compress/select.h) of the largest float <= threshold: entries with a
  // larger key are sent.
  static uint32_t KeyFloor(double threshold);

  // threshold finite and > 0.
  ThresholdCodec(size_t num_elements, double threshold, ValueFormat values = ValueFormat::kFp32);

  double threshold() const { return threshold_; }

  CodecId id() const override { return CodecId::kThreshold; }
  // The payload size when all n entries are sent.
  size_t MaxPayloadBytes() const override;
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;

 private:
  // The count c in front, then c entries.
  absl::StatusOr<IndexedValues> ParseBody(absl::string_view body) const override;

  const double threshold_;
  const uint32_t key_floor_;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_THRESHOLD_H_
