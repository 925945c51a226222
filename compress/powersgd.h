// Codec "powersgd" (id 15): rank-r approximation by one step of warm-started subspace
// iteration (Vogels et al., "PowerSGD", NeurIPS 2019), in two exchanges per step.
//
// The matrix view. A chunk of n values is the matrix M [m, c] (row-major, zero-padded):
//   - a slice of a tensor with >= 2 dimensions (ChunkShape::row_length >= 1): c = row_length,
//     the tensor's own rows, as the paper reshapes [d0, d1*d2*...]. A chunk that starts or
//     ends mid-row is padded with zeros to whole rows: value t of the chunk sits at flat
//     position lead + t, lead = offset % c, and m = ceil((lead + n) / c). A chunk of whole
//     rows has no padding; a whole tensor is exactly the paper's view.
//   - a vector (row_length 0, e.g. a bias, or CreateCodec(spec, n)): near-square,
//     c = ceil(sqrt(n)), m = ceil(n / c), lead = 0, m*c - n < c zeros at the end.
// `rank` r (required, >= 1) must be <= min(m, c): a thinner matrix has no rank-r
// approximation worth sending, and the codec refuses the chunk (CreateCodec() error naming
// the view; raise partition_bytes, lower the rank, or send the tensor with another codec).
//
// One step (W workers, identical Q on every worker):
//   round 0  worker i:  P_i = M_i Q                                   [m, r]  -> server
//            server:    P̂ = orth(Σ P_i) (= orth(mean P_i))             [m, r]  -> every worker
//   round 1  worker i:  Q_i = M_iᵀ P̂                                  [c, r]  -> server
//            server:    Q̄ = (1/W) Σ Q_i;  G = P̂ Q̄ᵀ (cropped to the chunk's n values) is the
//                       aggregate the optimizer applies; Q̄ [c, r] travels to every worker
//                       beside the update (PushPullResponse.aggregate)
//            worker i:  Q ← Q̄ with each column scaled to unit norm (warm start)
// orth() is OrthonormalizeColumns() below, run once on the server, which answers round 0 with
// P̂ itself: workers never orthonormalise, so every process uses the same P̂ bits without
// relying on two builds rounding alike. Scaling Q's columns leaves span(M Q) and so P̂
// unchanged (in exact arithmetic) but keeps P = M Q near the gradient's own scale, step
// after step, instead of growing or shrinking with it.
// Q starts all-zero; at round 0 of step s every all-zero column j of Q (all of them at the
// first step; later only where Q̄ had a zero column, e.g. after a zero gradient) is drawn as
// Q[i][j] = 2 u - 1, u = PhiloxStream({seed, s, chunk, kSharedStream}).Uniform(j * c + i),
// so every worker draws the same Q and no Q ever travels to a worker twice.
//
// Error feedback (compress/error_feedback.h, BeginRounds/FinishRounds): what this worker's
// contribution amounts to is sent_i = P̂ Q_iᵀ (FinishRounds()), so with RESIDUAL memory
//   residual_i = M_i - P̂ Q_iᵀ   (M_i = gradient_i + old residual_i),
// the worker-local identity every other codec keeps (input + old residual = decode(own
// payload) + new residual, up to the rounding of one fp32 subtraction). Summed over
// workers it is the aggregate identity Σ_i M_i = W G + Σ_i residual_i (exact arithmetic),
// because G = P̂ Q̄ᵀ = (1/W) Σ_i P̂ Q_iᵀ. PyTorch's hook keeps M_i - P̂ Q̄ᵀ instead, which
// has the same sum but adds to each worker's memory its share of Σ_i P̂ P̂ᵀ (M_i - M̄), a
// term that was delivered and sums to zero: we keep only what was not delivered.
//
// Messages, little-endian: the 12-byte header (codec 15, version 1, element count n), the
// round as uint32, then an fp32 matrix, row-major:
//   round 0 push P_i and its answer P̂:  [m, r]  ->  16 + 4 m r bytes
//   round 1 push Q_i and the aggregate Q̄: [c, r]  ->  16 + 4 c r bytes
// m, c, r and lead follow from the spec and the chunk's shape, so they do not travel; every
// receiver checks header, round and exact length before reading a value.
//
// Arithmetic: the products M Q, Mᵀ P̂ and P̂ Qᵀ accumulate in fp64 in a fixed order and round
// to fp32 once; sums over workers are fp32 in arrival order (as for every codec).
// Encode/Decode (single-round API) return FAILED_PRECONDITION.
#ifndef TAMP_COMPRESS_POWERSGD_H_
#define TAMP_COMPRESS_POWERSGD_H_

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

// OrthonormalizeColumns()
//
// Modified Gram-Schmidt on the `cols` columns of `matrix` ([rows, cols], row-major), in
// place, in fp64 with a second orthogonalisation pass ("twice is enough"), left to right.
// A column that is exactly zero after projection (a zero or dependent input column) stays
// zero; every other column comes out of unit norm and orthogonal to the ones before it, so
// MᵀM = I up to fp32 rounding when the input has full column rank. NaN propagates.
// Deterministic: same input bits, same output bits.
void OrthonormalizeColumns(size_t rows, size_t cols, absl::Span<float> matrix);

class PowerSgdCodec final : public Codec {
 public:
  static constexpr uint8_t kVersion = 1;
  static constexpr int kRounds = 2;

  // The chunk as a zero-padded matrix (see the file comment).
  struct View {
    size_t rows = 0;  // m
    size_t cols = 0;  // c
    size_t lead = 0;  // Zeros before the chunk's first value.
  };

  // PowerSgdCodec::ViewOf()
  //
  // The matrix view of a chunk of shape.elements >= 1 values.
  static View ViewOf(const ChunkShape& shape);

  // PowerSgdCodec::ValidateSpec()
  //
  // Registry check: `rank` is set and >= 1.
  static absl::Status ValidateSpec(const config::Codec& spec, absl::string_view field_path);

  // PowerSgdCodec::Create()
  //
  // Registry factory; `spec` has been validated. INVALID_ARGUMENT when the chunk's view is
  // thinner than the rank.
  static absl::StatusOr<std::unique_ptr<Codec>> Create(const config::Codec& spec,
                                                       const ChunkShape& shape);

  // PowerSgdCodec::MessageBytes()
  //
  // 16 + 4 * factor_rows * rank: a round-0 message has factor_rows = m, a round-1 one c.
  static size_t MessageBytes(size_t factor_rows, size_t rank);

  // 1 <= rank <= min(view.rows, view.cols), and the view holds the chunk.
  PowerSgdCodec(const ChunkShape& shape, size_t rank);

  const View& view() const { return view_; }
  size_t rank() const { return rank_; }
  // Exact bytes of a round-`round` push payload (and of the server's answer to it).
  size_t RoundPayloadBytes(int round) const { return MessageBytes(FactorRows(round), rank_); }
  // The worker's warm start Q [c, r] for its next step (all zero before the first).
  absl::Span<const float> warm_start() const { return q_; }

  // Pieces of the worker's side, public for its GPU version (compress/cuda/powersgd_rounds.h),
  // which runs the products on the device and these on the host, so both share their bits.
  //
  // PowerSgdCodec::DrawZeroColumns(): every all-zero column j of q ([c, r]) becomes the
  // shared stream's draw for `key` (the file comment); the others stay.
  // PowerSgdCodec::UnitColumns(): q ([c, r]) with each column scaled to unit norm in fp64
  // (an all-zero column stays zero): the next warm start from the aggregate Q̄.
  // PowerSgdCodec::AppendMessage(), ParseMessage(): a round-`round` message (header, round,
  // RoundValues(round) fp32 values), and its checked parse (header, round, exact length; an
  // error names `what`, e.g. "answer").
  void DrawZeroColumns(const RandomKey& key, absl::Span<float> q) const;
  void UnitColumns(absl::Span<float> q) const;
  void AppendMessage(int round, absl::Span<const float> values, std::string* out) const;
  absl::Status ParseMessage(absl::string_view message, int round, absl::string_view what,
                            std::vector<float>* values) const;

  CodecId id() const override { return CodecId::kPowerSgd; }
  // The larger of the two rounds.
  size_t MaxPayloadBytes() const override;
  absl::Status Encode(absl::Span<const float> input, const RandomKey& key,
                      std::string* payload) override;
  absl::Status Decode(absl::string_view payload, const RandomKey& key,
                      absl::Span<float> out) const override;

  int rounds() const override { return kRounds; }
  // m * r for round 0, c * r for round 1.
  size_t RoundValues(int round) const override;
  absl::Status EncodeRound(int round, absl::Span<const float> input,
                           absl::string_view previous_answer, const RandomKey& key,
                           std::string* payload) override;
  absl::Status FinishRounds(absl::string_view final_answer, const RandomKey& key,
                            absl::Span<float> sent) override;
  absl::Status DecodeRound(int round, absl::string_view payload, const RandomKey& key,
                           absl::Span<float> out) const override;
  absl::Status DecodeAddRound(int round, absl::string_view payload, const RandomKey& key,
                              absl::Span<float> accumulator) const override;
  void FinishRound(int round, int num_contributors, absl::Span<float> accumulator,
                   const RandomKey& key, std::string* answer,
                   absl::Span<float> aggregate) override;

 private:
  size_t FactorRows(int round) const { return round == 0 ? view_.rows : view_.cols; }
  // A worker's round-`round` payload (checked: the round, then as ParseMessage()), in a
  // thread-local buffer valid until the thread's next call; `out_size` is the caller's
  // RoundValues(round) buffer (CHECKed).
  absl::StatusOr<const std::vector<float>*> ParsePush(int round, absl::string_view payload,
                                                      size_t out_size) const;
  // out[t] = Σ_j p[i][j] q[k][j] for the chunk's values t (at (i, k) of the view).
  void LowRankProduct(absl::Span<const float> p, absl::Span<const float> q,
                      absl::Span<float> out) const;

  const View view_;
  const size_t rank_;

  // Worker side.
  int next_round_ = 0;          // What EncodeRound() accepts next; kRounds: FinishRounds().
  std::vector<float> matrix_;   // This step's M [m, c], zero-padded.
  std::vector<float> q_;        // Warm start Q [c, r].
  std::vector<float> p_hat_;    // This step's P̂ [m, r] (the answer to round 0).
  std::vector<float> q_local_;  // This worker's Q_i [c, r].

  // Server side.
  bool have_p_hat_ = false;         // Round 0 finished, round 1 not yet.
  std::vector<float> server_p_hat_;  // P̂ [m, r] of the step in progress.
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_POWERSGD_H_
