// Error feedback ("memory") around a codec, separate from the codec so any pair composes.
//
// NONE:      payload = encode(input). No state; takes no parameters.
// RESIDUAL:  c = input + residual;  payload = encode(c);  residual = s * (c - decode(payload)).
//   `scale` s in (0, 1], default 1. With s = 1, input + old residual == decode(payload) + new
//   residual, exactly up to the rounding of the one fp32 subtraction; s < 1 damps what is
//   carried over (the residual is s times what the receiver did not get).
// DGC_MOMENTUM (Lin et al., "Deep Gradient Compression", 2018): `momentum` m in [0, 1),
//   default 0.9. Momentum correction and momentum factor masking around the codec:
//     u = m * u + input;  v = v + u;  payload = encode(v);
//     where decode(payload) != 0:  u = 0 and v = 0  (what was sent, and its momentum);
//     elsewhere v keeps what was not sent, and u keeps accumulating.
//   Meant for sparse codecs (topk, dgc, ...): with a dense one every entry decodes non-zero,
//   so everything is masked every step and the memory does nothing. With codec none (a
//   chunk below compression.min_compress_bytes, which travels raw) it is momentum SGD's
//   velocity, sent whole without masking: u = m * u + input; payload = encode(u), as the
//   paper's optimizer treats the tensors it does not compress. A position sent with
//   the value 0 cannot be told from one not sent and is not masked (its v is 0 then); one
//   that decodes to NaN counts as sent.
//   The momentum is applied here, on the worker: pair it with plain SGD on the server, as
//   the paper does, not with a momentum optimizer.
//
// All arithmetic is fp32, in the order written (compress/cuda fuses RESIDUAL, and for its
// sparse codecs DGC_MOMENTUM, into the GPU encode bit for bit: compress/cuda/README.md).
// One instance per chunk and direction; not thread-safe. If the codec fails (a codec bug:
// encoding a well-sized buffer does not fail on data), Compress returns its error;
// RESIDUAL's residual is then unchanged, and DGC_MOMENTUM's u and v hold the input
// (nothing was sent, so v owes all of it).
//
// Example:
//   TAMP_RETURN_IF_ERROR(ValidateErrorFeedbackSpec(spec, "compression.push_feedback"));
//   TAMP_ASSIGN_OR_RETURN(auto memory, ErrorFeedback::Create(spec, chunk_length));
//   TAMP_RETURN_IF_ERROR(memory->Compress(*codec, gradient, key, &payload));
#ifndef TAMP_COMPRESS_ERROR_FEEDBACK_H_
#define TAMP_COMPRESS_ERROR_FEEDBACK_H_

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

inline constexpr float kDefaultResidualScale = 1.0f;
inline constexpr float kDefaultDgcMomentum = 0.9f;

// ValidateErrorFeedbackSpec()
//
// Checks `spec`: a kind this build knows, only the parameters of that kind (scale for
// RESIDUAL, momentum for DGC_MOMENTUM), each in range. `field_path` prefixes the messages
// (INVALID_ARGUMENT), e.g.
//   "compression.default_compression.push_feedback.scale: must be in (0, 1], got 2"
//   "compression.default_compression.push_feedback.momentum: error feedback kind RESIDUAL
//    takes no parameter 'momentum'"
absl::Status ValidateErrorFeedbackSpec(const config::ErrorFeedback& spec,
                                       absl::string_view field_path);

class ErrorFeedback {
 public:
  // ErrorFeedback::Create()
  //
  // Memory for chunks of `num_elements` values. Validates `spec` first (messages labelled
  // "error_feedback"; callers validate with the real config path at load time).
  static absl::StatusOr<std::unique_ptr<ErrorFeedback>> Create(const config::ErrorFeedback& spec,
                                                               size_t num_elements);

  // ErrorFeedback::Compress()
  //
  // Encodes `input` (num_elements values) through `codec`, updating the memory in place
  // (RESIDUAL forms c = input + residual in the residual itself). Should the codec fail,
  // nothing was sent: RESIDUAL's memory then holds c, DGC_MOMENTUM's the new u and v.
  absl::Status Compress(Codec& codec, absl::Span<const float> input, const RandomKey& key,
                        std::string* payload);

  // ErrorFeedback::AddTarget()
  // ErrorFeedback::CompressAdded()
  //
  // Compress() for a caller that adds its input into the memory itself, in a pass it makes
  // anyway (the shard's optimizer adds w_new - w_old while it updates the weights):
  // once AddTarget()[i] = input[i] + AddTarget()[i] for every i, CompressAdded() sends
  // Compress(codec, input)'s payload and leaves the same memory, without the pass that
  // forms c = input + residual. Only RESIDUAL keeps a memory that input adds to: for the
  // other kinds AddTarget() is empty and CompressAdded() is a programmer error. Should the
  // codec fail, the memory holds c (nothing was sent, so all of it is owed).
  //
  // Example (the shard's update):
  //   if (const absl::Span<float> target = memory->AddTarget(); !target.empty()) {
  //     optimizer->Apply(weights, gradient, step, lr, target, Optimizer::DeltaMode::kAdd);
  //     TAMP_RETURN_IF_ERROR(memory->CompressAdded(*codec, key, &payload));
  //   }
  absl::Span<float> AddTarget();
  absl::Status CompressAdded(Codec& codec, const RandomKey& key, std::string* payload);

  // ErrorFeedback::BeginRounds()
  // ErrorFeedback::NextRound()
  // ErrorFeedback::FinishRounds()
  //
  // The same memory around a multi-round codec (codec.rounds() > 1, compress/codec.h), whose
  // step is several exchanges. BeginRounds() forms what is encoded (c = input + residual for
  // RESIDUAL, DGC_MOMENTUM's new v, the input itself for NONE) and returns round 0's payload;
  // NextRound() returns round `round`'s payload from the server's answer to the round before;
  // FinishRounds() hands the server's answer to the last round to the codec, which says what
  // this worker's contribution amounted to (`sent`, Codec::FinishRounds()), and updates the
  // memory with `sent` in place of decode(payload), e.g. RESIDUAL: residual = s * (c - sent).
  // The memory changes only in FinishRounds(), once the codec has accepted the answer.
  // Compress() refuses multi-round codecs and these refuse single-round ones
  // (FAILED_PRECONDITION).
  //
  // Example (powersgd, two rounds):
  //   TAMP_RETURN_IF_ERROR(memory->BeginRounds(*codec, gradient, key, &payload));
  //   ... push payload as round 0; answer0 = the server's answer
  //   TAMP_RETURN_IF_ERROR(memory->NextRound(*codec, 1, answer0, key, &payload));
  //   ... push payload as round 1; the server answers with the update and `aggregate`
  //   TAMP_RETURN_IF_ERROR(memory->FinishRounds(*codec, aggregate, key));
  absl::Status BeginRounds(Codec& codec, absl::Span<const float> input, const RandomKey& key,
                           std::string* payload);
  absl::Status NextRound(Codec& codec, int round, absl::string_view previous_answer,
                         const RandomKey& key, std::string* payload);
  absl::Status FinishRounds(Codec& codec, absl::string_view final_answer, const RandomKey& key);

  // ErrorFeedback::ReplayRounds()
  //
  // Round 0's payload again, from what the last BeginRounds() encoded, for a step that must
  // be pushed again from its first round (a restarted server lost it): the codec starts the
  // step afresh (Codec::EncodeRound(0) may), the memory is left as it is. After a
  // FinishRounds() of the step, a second one updates the memory the same way again (RESIDUAL:
  // residual = s * (c - sent), from the same c), not twice. FAILED_PRECONDITION before any
  // BeginRounds().
  absl::Status ReplayRounds(Codec& codec, const RandomKey& key, std::string* payload);

  config::ErrorFeedback::Kind kind() const { return kind_; }

  // What has not reached the receiver: the residual (RESIDUAL) or v (DGC_MOMENTUM).
  // Empty for NONE. Valid until the next Compress() (which may move the memory to another
  // buffer), like StateBuffers().
  absl::Span<const float> residual() const { return residual_; }

  // ErrorFeedback::Reset()
  //
  // Forgets the memory (residual; DGC's v and u), for when the receiver just got exact
  // values another way (a resync): what the memory still owed has been delivered.
  void Reset();

  // u, the local momentum of DGC_MOMENTUM; empty for the other kinds. Valid until the next
  // Compress().
  absl::Span<const float> velocity() const { return velocity_; }

  // ErrorFeedback::StateBuffers()
  //
  // The memory, writable, for checkpoints: {residual (or v), u}, each num_elements values or
  // empty when the kind keeps none. Valid until the next Compress() or FinishRounds().
  std::vector<absl::Span<float>> StateBuffers() {
    return {absl::MakeSpan(residual_), absl::MakeSpan(velocity_)};
  }

 private:
  ErrorFeedback(const config::ErrorFeedback& spec, size_t num_elements);

  absl::Status CompressResidual(Codec& codec, absl::Span<const float> input,
                                const RandomKey& key, std::string* payload);
  // RESIDUAL, with c in residual_: encodes it and sets residual_ = s * (c - decoded), in
  // place (no second chunk-sized buffer). Should the codec fail, nothing was sent, and the
  // residual owes all of c.
  absl::Status EncodeResidual(Codec& codec, const RandomKey& key, std::string* payload);
  absl::Status CompressDgcMomentum(Codec& codec, absl::Span<const float> input,
                                   const RandomKey& key, std::string* payload);
  // DGC_MOMENTUM: u <- m u + g, then v <- v + u (v is what is encoded). In place: should
  // the codec then fail, nothing was sent, and v still owes all of it.
  void CompensateDgcMomentum(absl::Span<const float> input);
  // DGC_MOMENTUM, once decoded_ holds decode(payload): u and v are zeroed where an entry was
  // sent (momentum factor masking).
  void MaskSentDgcMomentum();
  // decoded_, sized to the chunk on the first dense decode.
  absl::Span<float> Decoded();

  const config::ErrorFeedback::Kind kind_;
  const float scale_;     // RESIDUAL.
  const float momentum_;  // DGC_MOMENTUM.
  std::vector<float> residual_;     // RESIDUAL: the residual. DGC_MOMENTUM: v.
  std::vector<float> velocity_;     // DGC_MOMENTUM: u.
  std::vector<float> compensated_;  // Multi-round codecs, every kind: round 0's input,
                                    // kept for ReplayRounds(); sized by BeginRounds().
  std::vector<float> decoded_;      // Scratch: decode(payload); Decoded() sizes it.
  bool rounds_begun_ = false;       // BeginRounds() has filled compensated_.
  SparseEntries sent_;                // Scratch: DecodeSparse(payload), for sparse codecs.
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_ERROR_FEEDBACK_H_
