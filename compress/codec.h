// Codec: one gradient/update compressor behind one interface.
//
// A Codec instance serves one chunk in one direction (it may keep state across steps, e.g.
// signum's momentum) and always encodes exactly size() fp32 values. Payloads are
// self-describing (compress/wire_format.h: codec id, version, element count, then a
// codec-defined little-endian bit-packed body) and decoders treat them as untrusted: every
// length and index is checked before memory is touched, and a bad payload is an
// INVALID_ARGUMENT error that leaves the output untouched.
//
// Randomness comes only from PhiloxStream(key). Encoder and decoder are given the same key,
// so codecs whose random choices are shared (key.worker == kSharedStream) send no indices.
//
// Thread safety: Decode/DecodeAdd/FinishAggregate are const and may run concurrently;
// Encode may mutate codec state and needs external synchronisation.
//
// Example (push side of a worker, through error feedback):
//   TAMP_ASSIGN_OR_RETURN(auto codec, CreateCodec(spec, chunk.length));
//   std::string payload;
//   TAMP_RETURN_IF_ERROR(codec->Encode(gradient, key, &payload));
//   ... server: codec->DecodeAdd(payload, key, accumulator) for each worker, then
//   codec->FinishAggregate(num_workers, accumulator).
#ifndef TAMP_COMPRESS_CODEC_H_
#define TAMP_COMPRESS_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/philox.h"

namespace tamp::compress {

// Wire ids. Never renumber or reuse one.
enum class CodecId : uint8_t {
  kNone = 0,
  kTopK = 1,
  kFp16 = 2,
  kBf16 = 3,
  kDgc = 4,
  kThreshold = 5,
  kRandomK = 6,
  kRandomBlock = 7,
  kQsgd = 8,
  kTernGrad = 9,
  kSignSgd = 10,
  kEfSign = 11,
  kSignum = 12,
  kNatural = 13,
  kMaxMin = 14,
  kPowerSgd = 15,
};

// CodecName()
//
// The registry name of a wire id ("none", "topk", ...), or "unknown" for a byte that is no
// CodecId (payloads are untrusted, so error messages may meet any value).
absl::string_view CodecName(CodecId id);

class Codec {
 public:
  explicit Codec(size_t size) : size_(size) {}
  virtual ~Codec() = default;
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;

  virtual CodecId id() const = 0;

  // Elements per payload.
  size_t size() const { return size_; }

  // Codec::MaxPayloadBytes()
  //
  // Exact payload size in bytes, header included, for fixed-size codecs; the largest
  // possible payload for variable-size ones (threshold).
  virtual size_t MaxPayloadBytes() const = 0;

  // Codec::Encode()
  //
  // Encodes `input` (size() values) into *payload, replacing its contents.
  virtual absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                              std::string* payload) = 0;

  // Codec::Decode()
  //
  // Writes the decoded values into `out` (size() values).
  virtual absl::Status Decode(absl::string_view payload, const RandomKey& key,
                              absl::Span<float> out) const = 0;

  // Codec::DecodeAdd()
  //
  // accumulator += decode(payload). The default decodes into a scratch buffer; sparse codecs
  // override it to scatter-add directly.
  virtual absl::Status DecodeAdd(absl::string_view payload, const RandomKey& key,
                                 absl::Span<float> accumulator) const;

  // Codec::FinishAggregate()
  //
  // Turns the sum of `num_contributors` DecodeAdd()s into the aggregate the optimizer
  // applies. Default: the mean. Sign codecs: the majority vote.
  virtual void FinishAggregate(int num_contributors, absl::Span<float> accumulator) const;

 private:
  const size_t size_;
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_CODEC_H_
