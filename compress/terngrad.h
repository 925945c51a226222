// Codec "terngrad" (id 9): TernGrad (Wen et al., 2017). The chunk travels as one fp32 scale
// and a ternary value t in {-1, 0, +1} per element; x' = t * scale.
//
// Encoding, per chunk:
//   1. sigma = the standard deviation of the chunk (population: mean-subtracted, divided by
//      n), and the values are clipped to [-2.5 sigma, 2.5 sigma]. When sigma is 0 (all values
//      equal, e.g. n = 1) nothing is clipped, so a constant chunk is sent exactly instead of
//      as zeros.
//   2. scale = max |clipped value| (= min(max |x|, 2.5 sigma), rounded to fp32).
//   3. t = sign(x) if u * scale < |x|, else 0 (so with probability |clipped x| / scale, no
//      division needed), for the uniform u = PhiloxStream(key).Bits16(i) / 2^16 of element i
//      (16 bits: one Philox block serves 8 elements).
// So E[x'] = clipped x (unbiased for the clipped values, up to fp32 rounding and the 2^-16
// grain of the uniforms: P(t != 0) is |clipped x| / scale rounded up to a multiple of 2^-16)
// and Var[x'] = scale * |clipped x| - (clipped x)^2.
// The statistics are sums in double over the values minus the first value (the "shifted
// data" variance, robust to a large common offset): per segment of 8192 values, 8
// interleaved partial sums added pairwise, and the segments' sums combined in a fixed
// pairwise tree (compress/internal/segments.h). A fixed order, so the encoding is
// deterministic on every platform, and one a GPU computes with all its threads.
//
// Body: scale (fp32), then n codes of 2 bits (BitWriter order, 4 per byte, zero-padded):
// 0 -> 0, 1 -> +1, 2 -> -1; 3 is invalid.
// Payload bytes: 12 + 4 + ceil(2n / 8). Takes no parameters.
//
// Versions: 3 (this one); 2 summed the whole chunk in 8 interleaved chains (the same for
// chunks of at most 8192 values); 1 drew 24-bit uniforms from PhiloxStream::Uniform(i) and
// compared them with |clipped x| / scale. Payloads of another version are refused.
//
// NaN/Inf: a chunk holding a NaN or ±Inf is sent with a NaN scale and all-zero codes, and
// decodes to NaN everywhere (the problem shows instead of vanishing into a finite scale).
//
// The decoder checks before writing: exact body length; scale is NaN or a finite fp32 >= +0;
// no code 3; all codes zero when the scale is NaN or 0; zero padding.
//
// Cost: encode = one statistics pass, then per 1024-value tile Philox words, a branch-free
// ternarize loop and packing (Philox and the loops have AVX-512/AVX2 versions, picked at run
// time). Decode = a word-wise check for code 3, then one pass.
//
// Example:
//   TernGradCodec codec(n);   // 1000 values -> 12 + 4 + 250 bytes.
#ifndef TAMP_COMPRESS_TERNGRAD_H_
#define TAMP_COMPRESS_TERNGRAD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

class TernGradCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 3;
  static constexpr double kClipSigmas = 2.5;

  // TernGradCodec::Create()
  //
  // Registry factory; `spec` has been validated (and has no parameters).
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // TernGradCodec::PayloadBytes()
  //
  // 12 + 4 + ceil(2n / 8).
  static size_t PayloadBytes(size_t num_elements);

  // TernGradCodec::Scale()
  //
  // The scale Encode() sends for `input`: min(max |x|, 2.5 sigma) (no clip when sigma is 0),
  // or NaN when `input` holds a NaN or ±Inf. Exposed for tests.
  static float Scale(absl::Span<const float> input);

  // TernGradCodec::Moments, ShiftedMoments()
  //
  // What Scale() is computed from: with d = x - x[0], the sums of d and d^2 in double and the
  // largest |x|, in the summation order above. Exposed for tests (and the GPU twin's).
  struct Moments {
    double sum;
    double squares;
    float max_abs;
  };
  static Moments ShiftedMoments(absl::Span<const float> input);

  // 1 <= num_elements <= 2^34.
  explicit TernGradCodec(size_t num_elements);

  CodecId id() const override { return CodecId::kTernGrad; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(size()); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_TERNGRAD_H_
