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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/philox.h"

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

// SparseEntries
//
// A decoded chunk that is zero except at `indices` (strictly ascending, each < the chunk's
// size), where it holds `values` (one per index; a value may itself be zero).
struct SparseEntries {
  std::vector<size_t> indices;
  std::vector<float> values;
};

// AddSparseEntries()
//
// Adds the chunk `entries` decodes to into `out` (the chunk's size): out[indices[j]] +=
// values[j], in O(k).
void AddSparseEntries(const SparseEntries& entries, absl::Span<float> out);

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

  // Codec::DecodeSparse()
  //
  // For codecs whose payload names the entries it carries (topk, dgc, threshold): decode(payload)
  // as those entries, in O(k) where Decode() writes all size() values; returns true. Error
  // feedback and the shard's checked aggregation use it to touch k entries instead of the chunk.
  // Returns false, reading nothing, for every other codec (the default): callers then Decode().
  // A bad payload is an error, as with Decode(); *entries is then unspecified.
  virtual absl::StatusOr<bool> DecodeSparse(absl::string_view payload, const RandomKey& key,
                                            SparseEntries* entries) const;

  // Codec::FinishAggregate()
  //
  // Turns the sum of `num_contributors` DecodeAdd()s into the aggregate the optimizer
  // applies. Default: the mean. Sign codecs: the majority vote. Element-wise (each aggregate
  // depends on its own sum, and a zero sum stays zero), so `accumulator` may also be the sums
  // a sparse aggregation gathered, compacted (at most size() of them; server/sync_chunk.h).
  virtual void FinishAggregate(int num_contributors, absl::Span<float> accumulator) const;

  // ---------------------------------------------------------------------------------------
  // Multi-round codecs
  //
  // Most codecs need one exchange per step: the server aggregates payloads as they arrive
  // (DecodeAdd, FinishAggregate). A codec whose workers need an aggregate before they can
  // encode the rest (powersgd: P = M Q, then Q = Mᵀ orth(Σ P)) declares rounds() > 1 and
  // implements the methods below instead of Encode/Decode/DecodeAdd/FinishAggregate.
  // Round k = 0 .. rounds() - 1 of one step:
  //   worker:  EncodeRound(k, ...) -> payload_k, pushed as (step, round k)
  //   server:  DecodeAddRound(k, payload_k, ...) of every worker into RoundValues(k) zeros,
  //            then FinishRound(k, ...) -> answer_k, the same bytes for every worker
  //   worker:  answer_k is the `previous_answer` of EncodeRound(k + 1, ...)
  // The last FinishRound() also writes the size() values the optimizer applies; its answer
  // reaches the workers beside the update, and each hands it to FinishRounds(). A codec
  // instance plays one side (a worker's push codec, or a server's) and may keep state
  // between rounds and steps. The defaults make a single-round codec the one-round case on
  // the server's side, so a shard runs every codec through the round methods: rounds() 1,
  // RoundValues() size(), DecodeRound(0) = Decode, DecodeAddRound(0) = DecodeAdd and
  // FinishRound(0) = FinishAggregate with an empty answer. The worker's side of a
  // single-round codec is Encode (error feedback needs the payload it decodes), so there
  // EncodeRound and FinishRounds refuse (FAILED_PRECONDITION).

  // Codec::rounds()
  //
  // Exchanges per step.
  virtual int rounds() const { return 1; }

  // Codec::RoundValues()
  //
  // fp32 values of the server's accumulator for round `round` (0 <= round < rounds()).
  virtual size_t RoundValues(int round) const { return size(); }

  // Codec::EncodeRound()
  //
  // Worker side. Round 0 takes the step's `input` (size() values; the codec keeps what the
  // later rounds need) and an empty `previous_answer`; round k >= 1 takes the server's
  // answer to round k - 1 (untrusted: checked, INVALID_ARGUMENT leaves the codec as it
  // was) and ignores `input`. Rounds run in order (FAILED_PRECONDITION otherwise); round 0
  // may start a step afresh at any time.
  virtual absl::Status EncodeRound(int round, absl::Span<const float> input,
                                   absl::string_view previous_answer, const RandomKey& key,
                                   std::string* payload);

  // Codec::FinishRounds()
  //
  // Worker side, after the last round: `final_answer` is the server's answer to it
  // (checked like any answer). Readies the codec for the next step and, unless `sent` is
  // empty, writes into it (size() values) what the step's aggregate carries on this
  // worker's behalf, the counterpart of Decode(own payload) for error feedback: the
  // aggregate is the mean of every worker's `sent` (in exact arithmetic).
  virtual absl::Status FinishRounds(absl::string_view final_answer, const RandomKey& key,
                                    absl::Span<float> sent);

  // Codec::DecodeRound()
  //
  // Server side: writes what a worker's round-`round` payload contributes into `out`
  // (RoundValues(round) values), as Decode does. A bad payload, or a round outside
  // 0 .. rounds() - 1, is INVALID_ARGUMENT.
  virtual absl::Status DecodeRound(int round, absl::string_view payload, const RandomKey& key,
                                   absl::Span<float> out) const;

  // Codec::DecodeAddRound()
  //
  // Server side: accumulator (RoundValues(round) values) += what a worker's round-`round`
  // payload contributes. As DecodeAdd: a bad payload (or round) is INVALID_ARGUMENT and
  // leaves the accumulator untouched.
  virtual absl::Status DecodeAddRound(int round, absl::string_view payload, const RandomKey& key,
                                      absl::Span<float> accumulator) const;

  // Codec::FinishRound()
  //
  // Server side: turns the sum of `num_contributors` DecodeAddRound()s of round `round`
  // (in `accumulator`, which it may overwrite) into *answer (replaced), the bytes every
  // worker gets. The last round also writes the aggregate the optimizer applies into
  // `aggregate` (size() values; empty for earlier rounds). A single-round codec aggregates
  // in `accumulator` and copies it to `aggregate` unless that is `accumulator` itself (which
  // only single-round codecs allow). Rounds of a step come in order, each once; does not
  // fail on data.
  virtual void FinishRound(int round, int num_contributors, absl::Span<float> accumulator,
                           const RandomKey& key, std::string* answer, absl::Span<float> aggregate);

 private:
  const size_t size_;
};

// ChunkShape
//
// A chunk as a slice of its tensor, for codecs that view it as a matrix (powersgd). A tensor
// of shape [d0, d1, ...] with two or more dimensions has d0 rows of row_length = d1*d2*...
// values; a vector has row_length 0. Other codecs use only `elements`.
struct ChunkShape {
  uint64_t elements = 0;    // The chunk's length n.
  uint64_t offset = 0;      // Of its first value within the tensor.
  uint64_t row_length = 0;  // Values per tensor row; 0 for a vector.
};

// ChunkShapeInTensor()
//
// The ChunkShape of values [offset, offset + length) of a tensor of shape `tensor_shape`.
ChunkShape ChunkShapeInTensor(absl::Span<const int64_t> tensor_shape, uint64_t offset,
                              uint64_t length);

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_CODEC_H_
