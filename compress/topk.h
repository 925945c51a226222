// Codec "topk" (id 1): the k entries of largest magnitude, exactly; the rest decode as 0.
//
// Parameters (exactly one): `ratio` in (0, 1], k = clamp(round(ratio * n), 1, n); or
// `count` >= 1, k = min(count, n). round, not ceil: ratio * n is a double product and is
// often an ulp off, e.g. 0.07 * 100 == 7.000000000000001, which ceil would make 8.
//
// Body: the k indices, strictly ascending, each in b = max(1, ceil(log2 n)) bits (BitWriter
// packing, zero-padded to a byte), then the k values as fp32 in index order.
// Payload bytes: 12 + ceil(k * b / 8) + 4k. k follows from n and the spec, so it does not
// travel; the decoder requires exactly this length.
//
// Selection: entries compare by |x|, with NaN counted as +inf so that a NaN is always sent
// and shows up on the receiver instead of vanishing into the residual. Among equal
// magnitudes the lowest indices win, so the choice is deterministic. Cost: one
// std::nth_element over n 32-bit keys and two linear passes; scratch is per thread.
#ifndef TAMP_COMPRESS_TOPK_H_
#define TAMP_COMPRESS_TOPK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class TopKCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 1;

  // TopKCodec::ValidateSpec()
  //
  // Registry check: exactly one of ratio and count is set, and it is in range.
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
  // 12 + ceil(k * b / 8) + 4k.
  static size_t PayloadBytes(size_t num_elements, size_t k);

  // 1 <= k <= num_elements.
  TopKCodec(size_t num_elements, size_t k);

  // Entries sent per payload.
  size_t k() const { return k_; }

  CodecId id() const override { return CodecId::kTopK; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(size(), k_); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
  // Scatter-adds the k values; no dense scratch.
  absl::Status DecodeAdd(absl::string_view payload, const RandomKey& key,
                         absl::Span<float> accumulator) const override;

 private:
  // A checked payload: indices in a thread-local buffer (valid until this thread's next
  // Parse), values as k unaligned fp32.
  struct Entries {
    absl::Span<const uint64_t> indices;
    const char* values;
  };
  absl::StatusOr<Entries> Parse(absl::string_view payload) const;

  size_t IndexBytes() const { return (k_ * index_bits_ + 7) / 8; }

  const size_t k_;
  const int index_bits_;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_TOPK_H_
