// Codec "randomblock" (id 7): random contiguous blocks (Eghlidi & Jaggi, "Sparse
// Communication for Training Deep Networks", 2020) at positions every worker agrees on, so
// only the values travel.
//
// Parameters: `ratio` in (0, 1] (required); `num_blocks` >= 1 (default 1); `fp16_values` as
// for topk.
//
// Layout, for a chunk of n entries:
//   k = clamp(round(ratio * n), 1, n)     (as topk)
//   B = min(num_blocks, k)                 blocks, so that each holds at least one entry
//   L = floor(k / B)                       entries per block
//   m = B * L                              entries sent: k - B < m <= k
// The chunk splits into B segments, segment s = [floor(s n / B), floor((s + 1) n / B)), each
// at least floor(n / B) >= L long; block s starts at
//   start_s = floor(s n / B) + UniformDraws::Below(s, len_s - L + 1)
// (compress/sparse.h) on the SHARED stream RandomKey{key.seed, key.step, key.chunk,
// kSharedStream}, whatever key.worker is. So blocks never overlap, lie in ascending order,
// are identical on every worker and the server for the same (seed, step, chunk), and move
// from step to step. Integer-only, so a CUDA twin reproduces it.
//
// Body: the m values, block after block (ascending positions), fp32 (bit-exact: +-inf
// and -0 travel as they are; every NaN as 0x7fc00000, compress/wire_format.h; version 2)
// or fp16 (compress/sparse.h FloatToHalf()).
// Payload bytes: 12 + v * B * L, v = 4 (fp32) or 2 (fp16_values). No scaling by n / m (see
// compress/randomk.h: this codec is meant for use with error feedback).
#ifndef TAMP_COMPRESS_RANDOMBLOCK_H_
#define TAMP_COMPRESS_RANDOMBLOCK_H_

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

class RandomBlockCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 2;

  // RandomBlockCodec::ValidateSpec()
  //
  // Registry check: `ratio` set and in (0, 1]; `num_blocks`, if set, >= 1.
  static absl::Status ValidateSpec(const config::Codec& spec, absl::string_view field_path);

  // RandomBlockCodec::Create()
  //
  // Registry factory; `spec` has been validated and num_elements >= 1.
  static std::unique_ptr<Codec> Create(const config::Codec& spec, size_t num_elements);

  // 1 <= k <= num_elements (k as topk's), num_blocks >= 1.
  RandomBlockCodec(size_t num_elements, size_t k, uint64_t num_blocks,
                   ValueFormat values = ValueFormat::kFp32);

  // B, L and m = B * L of the file comment.
  size_t blocks() const { return blocks_; }
  size_t block_length() const { return block_length_; }
  size_t entries_sent() const { return blocks_ * block_length_; }

  // RandomBlockCodec::BlockStarts()
  //
  // The B block starts for the shared stream of `key` (key.worker is ignored), ascending.
  void BlockStarts(const RandomKey& key, std::vector<size_t>* starts) const;

  CodecId id() const override { return CodecId::kRandomBlock; }
  // 12 + v * B * L.
  size_t MaxPayloadBytes() const override;
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;
  // Adds the blocks in place; no dense scratch.
  absl::Status DecodeAdd(absl::string_view payload, const RandomKey& key,
                         absl::Span<float> accumulator) const override;

 private:
  // The values of a checked payload.
  absl::StatusOr<const char*> Values(absl::string_view payload) const;

  const size_t blocks_;
  const size_t block_length_;
  const ValueFormat values_;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_RANDOMBLOCK_H_
