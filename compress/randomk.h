// Codec "randomk" (id 6): k entries at random positions that every worker agrees on, so only
// the values travel.
//
// Parameters: exactly one of `ratio` in (0, 1], k = clamp(round(ratio * n), 1, n), and
// `count` >= 1, k = min(count, n); `fp16_values` as for topk.
//
// Positions: k distinct positions drawn with Floyd's algorithm from the SHARED stream
// RandomKey{key.seed, key.step, key.chunk, kSharedStream}, whatever key.worker is: every
// worker (and the server decoding) picks the same positions for the same (seed, step, chunk)
// and different ones at other steps. Draw d (d = 0..k-1) is UniformDraws::Below(d, j + 1)
// with j = n - k + d (compress/sparse.h: integer-only, so a CUDA twin reproduces it); Floyd
// adds the drawn value, or j itself if the drawn value is already in. O(k) draws; the set is
// kept in a bitmap when n <= 1024 k (n / 8 bytes, scanned in order: O(n / 64) = O(k) words)
// and in a hash set plus a sort otherwise. Positions are used in ascending order.
//
// Body: the k values at those positions, in ascending position order, fp32 (bit-exact: +-inf
// and -0 travel as they are; every NaN as 0x7fc00000, compress/wire_format.h; version 2)
// or fp16 (compress/sparse.h FloatToHalf()).
// Payload bytes: 12 + v * k, v = 4 (fp32) or 2 (fp16_values).
//
// No scaling: values are sent as they are, not multiplied by n / k. Scaling would make a
// single step's estimate unbiased, but with error feedback (what this codec is meant for)
// the residual already carries what was not sent, and scaled values would inject n / k
// times the error into it; GRACE does not scale either.
//
// Decoding regenerates the positions (a thread-local cache of the last (seed, step, chunk,
// n, k) makes a server's W decodes of one chunk draw them once) and checks the length.
#ifndef TAMP_COMPRESS_RANDOMK_H_
#define TAMP_COMPRESS_RANDOMK_H_

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

class RandomKCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 2;

  // How DrawPositions() keeps the set of positions drawn so far. Both give the same result.
  enum class Membership { kBitmap, kHashSet };

  // RandomKCodec::ValidateSpec()
  //
  // Registry check: exactly one of ratio and count is set, and it is in range.
  static absl::Status ValidateSpec(const config::Codec& spec, absl::string_view field_path);

  // RandomKCodec::Create()
  //
  // Registry factory; `spec` has been validated and num_elements >= 1.
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // RandomKCodec::PayloadBytes()
  //
  // 12 + v * k.
  static size_t PayloadBytes(size_t k, ValueFormat values);

  // RandomKCodec::Positions()
  //
  // The k (1 <= k <= n) positions for the shared stream of `key` (key.worker is ignored),
  // ascending. The span is a thread-local cache: valid until this thread's next call.
  static absl::Span<const size_t> Positions(const RandomKey& key, size_t n, size_t k);

  // RandomKCodec::DrawPositions()
  //
  // Positions() without the cache, with a chosen membership structure (for tests).
  static void DrawPositions(const RandomKey& key, size_t n, size_t k, Membership membership,
                            std::vector<size_t>* out);

  // 1 <= k <= num_elements.
  RandomKCodec(size_t num_elements, size_t k, ValueFormat values = ValueFormat::kFp32);

  size_t k() const { return k_; }

  CodecId id() const override { return CodecId::kRandomK; }
  size_t MaxPayloadBytes() const override { return PayloadBytes(k_, values_); }
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
  // Scatter-adds the k values by position; no dense scratch.
  absl::Status DecodeAdd(absl::string_view payload, const RandomKey& key,
                         absl::Span<float> accumulator) const override;

 private:
  // The values of a checked payload.
  absl::StatusOr<const char*> Values(absl::string_view payload) const;

  const size_t k_;
  const ValueFormat values_;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_RANDOMK_H_
