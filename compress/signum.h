// Codec "signum" (id 12): sign of momentum (Bernstein et al., "signSGD: Compressed
// Optimisation for Non-Convex Problems", 2018, Algorithm 3), with the majority vote.
//
// Parameter `momentum` (beta) in [0, 1), default 0.9. The encoder keeps a momentum buffer
// m (n fp32 values, zero before the first step) and on each Encode(x) computes, in fp32,
//   m = b * m + c * x,   b = float(beta), c = float(1 - beta) (1 - beta taken in double),
// then sends sign(m). Codec instances serve one chunk in one direction, so this state is per
// chunk; every Encode is one step. The buffer is allocated by the first Encode, so an
// instance that only decodes (the server's) holds none. beta = 0 is signsgd under another id.
//
// Body, decode and aggregation are those of signsgd (compress/signsgd.h): the sign plane
// of m, ceil(n / 8) bytes, bit i is 1 iff m[i] < 0, padding bits 0; decode +-1; DecodeAdd
// adds +-1 per worker and FinishAggregate takes the majority vote (sign of the sum, 0 on a
// tie). Payload bytes: 12 + ceil(n / 8).
//
// Special values: m = 0 or -0 counts as + (sign(0) = +1). A NaN input makes that entry of m
// NaN for good (NaN * b stays NaN), and a NaN entry of m counts as + on every later step; an
// inf input makes it +-inf (later finite inputs keep it there; an inf of the other sign
// makes it NaN). Encode does not fail on data: watch gradients for NaN upstream if
// divergence must be caught, since one bit cannot carry it to the server.
#ifndef TAMP_COMPRESS_SIGNUM_H_
#define TAMP_COMPRESS_SIGNUM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class SignumCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 1;
  static constexpr double kDefaultMomentum = 0.9;

  // SignumCodec::ValidateSpec()
  //
  // Registry check: `momentum`, when set, is in [0, 1).
  static absl::Status ValidateSpec(const config::Codec& spec, absl::string_view field_path);

  // SignumCodec::Create()
  //
  // Registry factory; `spec` has been validated and num_elements >= 1.
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // SignumCodec::PayloadBytes()
  //
  // 12 + ceil(n / 8).
  static size_t PayloadBytes(size_t num_elements);

  // 0 <= momentum < 1.
  SignumCodec(size_t num_elements, double momentum);

  double momentum() const { return momentum_; }

  // The momentum buffer m after the last Encode; empty before the first.
  absl::Span<const float> momentum_buffer() const { return m_; }

  CodecId id() const override { return CodecId::kSignum; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(size()); }
  // Advances m by one step with `input`, then sends sign(m).
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
  absl::StatusOr<absl::string_view> Plane(absl::string_view payload) const;

  const double momentum_;
  const float decay_;  // b = float(momentum)
  const float gain_;   // c = float(1 - momentum)
  std::vector<float> m_;  // Empty until the first Encode.
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_SIGNUM_H_
