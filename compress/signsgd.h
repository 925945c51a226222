// Codec "signsgd" (id 10): one sign bit per value; the server takes the majority vote
// (Bernstein et al., "signSGD: Compressed Optimisation for Non-Convex Problems", 2018).
//
// Takes no parameters. Body: the sign plane of compress/internal/sign_bits.h, ceil(n / 8)
// bytes: bit i (bit i % 8 of byte i / 8) is 1 iff x[i] < 0, 64 values packed per
// little-endian word; padding bits after bit n - 1 are 0, and the decoder requires it.
// Payload bytes: 12 + ceil(n / 8).
//
// Decode: +1 or -1 per value. Special values: 0 and -0 count as + (sign(0) = +1, so every
// value moves); +-inf keep their sign; NaN, of either sign bit, counts as + — one bit cannot
// carry it, and Encode does not fail on data. Watch gradients for NaN before this codec if
// divergence must be caught: it does not reach the server.
//
// Aggregation: DecodeAdd adds +-1 per worker (exact in fp32 up to 2^24 workers);
// FinishAggregate replaces each sum by its sign — the majority vote, with no division by the
// number of workers: +1, -1, or 0 on a tie (an even split), so a tied coordinate does not
// move. The server's optimizer applies lr * vote.
#ifndef TAMP_COMPRESS_SIGNSGD_H_
#define TAMP_COMPRESS_SIGNSGD_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class SignSgdCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 1;

  // SignSgdCodec::Create()
  //
  // Registry factory; `spec` has been validated (and has no parameters).
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // SignSgdCodec::PayloadBytes()
  //
  // 12 + ceil(n / 8).
  static size_t PayloadBytes(size_t num_elements);

  explicit SignSgdCodec(size_t num_elements) : Codec(num_elements) {}

  CodecId id() const override { return CodecId::kSignSgd; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(size()); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
  // Adds +-1 straight from the bits; no dense scratch.
  absl::Status DecodeAdd(absl::string_view payload, const RandomKey& key,
                         absl::Span<float> accumulator) const override;
  // The majority vote: sign of each sum, 0 on a tie. `num_contributors` only has to be > 0.
  void FinishAggregate(int num_contributors, absl::Span<float> accumulator) const override;

 private:
  // The checked sign plane of `payload`.
  absl::StatusOr<absl::string_view> Plane(absl::string_view payload) const;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_SIGNSGD_H_
