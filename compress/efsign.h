// Codec "efsign" (id 11): scaled sign, the compressor of error-feedback signSGD
// (Karimireddy et al., "Error Feedback Fixes SignSGD and other Gradient Compression
// Schemes", 2019). Meant to run inside ErrorFeedback RESIDUAL (compress/error_feedback.h).
//
// Takes no parameters. Body: scale = mean |x| over the chunk as one little-endian fp32,
// then the sign plane of compress/internal/sign_bits.h (ceil(n / 8) bytes, bit i is 1 iff
// x[i] < 0, padding bits 0). Payload bytes: 12 + 4 + ceil(n / 8).
// Decode: scale * (+-1) per value. Aggregation: the mean (Codec's default).
//
// scale: sum |x| in a fixed order — per segment of 8192 values, in each 64-value block lane
// l of 16 adds values l, l + 16, l + 32 and l + 48 pairwise in fp32, each lane accumulates
// that in double, and the segment's total is its 16 lanes added in order; the segments'
// totals combine in a fixed pairwise tree (compress/internal/segments.h) — then divided by
// n and rounded once to fp32. Deterministic, within 3 ulp of the exact mean for n < 2^31 (2
// from the fp32 pairs, 0.5 from the final rounding; usually < 1), and computed by a GPU with
// all its threads. When that sum is not finite it is redone with the same lanes in double
// alone (each of the 4 values added in turn), so finite inputs always give a finite scale,
// even next to FLT_MAX where fp32 pairs overflow.
//
// Versions: 2 (this one); 1 summed the whole chunk in 16 chains (the same for chunks of at
// most 8192 values) and its fallback in one serial chain of doubles. Payloads of another
// version are refused.
//
// Special values: 0 and -0 count as + (decode to +scale). Any +-inf in the chunk makes
// scale +inf and any NaN makes it NaN (an inf and a NaN: NaN; always the quiet NaN
// 0x7fc00000, whatever the input's NaN bits), so the whole chunk decodes to
// +-inf or NaN on the receiver: divergence shows up there instead of vanishing. The sign bit
// of a NaN is ignored (NaN counts as +).
//
// The decoder requires scale to have its sign bit clear (so >= +0, +inf, or a NaN with sign
// bit 0, the only values Encode writes) and the padding bits to be 0.
#ifndef TAMP_COMPRESS_EFSIGN_H_
#define TAMP_COMPRESS_EFSIGN_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class EfSignCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 2;

  // EfSignCodec::Create()
  //
  // Registry factory; `spec` has been validated (and has no parameters).
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // EfSignCodec::PayloadBytes()
  //
  // 12 + 4 + ceil(n / 8).
  static size_t PayloadBytes(size_t num_elements);

  // EfSignCodec::MagnitudeSum()
  //
  // sum |x| as the scale computes it (the fast order, or the double-only one where that is
  // not finite); scale = float(MagnitudeSum / n). Exposed for tests (and the GPU twin's).
  static double MagnitudeSum(absl::Span<const float> input);

  explicit EfSignCodec(size_t num_elements) : Codec(num_elements) {}

  CodecId id() const override { return CodecId::kEfSign; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(size()); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
  // Adds scale * (+-1) straight from the bits; no dense scratch.
  absl::Status DecodeAdd(absl::string_view payload, const RandomKey& key,
                         absl::Span<float> accumulator) const override;

 private:
  struct Body {
    float scale;
    absl::string_view plane;
  };
  absl::StatusOr<Body> Parse(absl::string_view payload) const;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_EFSIGN_H_
