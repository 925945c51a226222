// Sparsity warm-up (Lin et al., "Deep Gradient Compression", 2018): a push codec that keeps
// k = ratio * n entries keeps more of them in the first epochs, so training does not start
// from a near-empty gradient.
//
// Config: config::Codec.ratio_warmup, one ratio per epoch for the first epochs. During epoch
// e < ratio_warmup_size() the chunk's push codec is the configured one with `ratio` replaced
// by ratio_warmup[e] (and `count` cleared); from epoch ratio_warmup_size() on, the configured
// codec itself. Only codecs whose k comes from `ratio` accept it (topk, dgc, randomk,
// randomblock: compress/registry.h checks), and only on the push side.
//
// Both ends must decode what was encoded, so the worker and the shard derive the epoch from
// the same numbers: epoch = step / steps_per_epoch, the worker from its batcher and the shard
// from the handshake (Shard::Join). A payload of another k is rejected by the
// decoder (its length is fixed by k), never misread.
//
// RatioWarmup holds one codec per distinct warm-up ratio, built once from the spec with the
// ratio replaced (codec state such as scratch is per instance; the error-feedback memory is
// not in the codec and carries over from one ratio to the next). Not thread-safe: one per
// chunk, used under the chunk's lock (shard) or by the training thread (worker).
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(std::unique_ptr<RatioWarmup> warmup,
//                         RatioWarmup::Create(plan.compression.push(), shape));  // null if none
//   Codec& codec = warmup ? warmup->CodecFor(epoch, *configured) : *configured;
#ifndef TAMP_COMPRESS_RATIO_WARMUP_H_
#define TAMP_COMPRESS_RATIO_WARMUP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

// WarmupSpec()
//
// The codec spec of epoch `epoch`: `spec` without ratio_warmup, and with ratio =
// ratio_warmup[epoch] (count cleared) while epoch < spec.ratio_warmup_size().
config::Codec WarmupSpec(const config::Codec& spec, uint64_t epoch);

class RatioWarmup {
 public:
  // RatioWarmup::Create()
  //
  // The warm-up codecs of a chunk of shape `shape` whose push codec is `spec`; null (OK)
  // when spec has no ratio_warmup. Errors are CreateCodec()'s.
  static absl::StatusOr<std::unique_ptr<RatioWarmup>> Create(const config::Codec& spec,
                                                              const ChunkShape& shape);

  // RatioWarmup::CodecFor()
  //
  // The codec of epoch `epoch`: a warm-up codec while epoch < epochs(), else `configured`
  // (the chunk's codec built from the spec, which ignores ratio_warmup).
  Codec& CodecFor(uint64_t epoch, Codec& configured);

  // Epochs of warm-up (ratio_warmup_size()).
  uint64_t epochs() const { return by_epoch_.size(); }

 private:
  RatioWarmup() = default;

  std::vector<std::unique_ptr<Codec>> codecs_;  // One per distinct ratio.
  std::vector<Codec*> by_epoch_;                // Into codecs_.
};

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_RATIO_WARMUP_H_
