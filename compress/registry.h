// The codec registry: names, parameters and factories of every codec.
//
// A config::Codec names a codec and sets only the parameters that codec documents.
// ValidateCodecSpec() reports the first problem with the config path of the field, e.g.
//   "compression.default_compression.push.ratio: must be in (0, 1], got 0"
//   "compression.default_compression.push.name: unknown codec 'topkk' (known: none, topk, ...)"
#ifndef TAMP_COMPRESS_REGISTRY_H_
#define TAMP_COMPRESS_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compress/codec.h"
#include "proto/config.pb.h"

namespace tamp::compress {

struct CodecInfo {
  std::string name;
  CodecId id;
  std::string summary;                   // One line: what travels.
  std::vector<std::string> parameters;   // config::Codec field names it accepts.
  std::string wire_bytes;                // Payload size formula in n (elements), e.g. "12 + 4n".
  config::Codec example;                 // A typical spec, for benchmarks, fuzzing and docs.
  int rounds = 1;                        // Exchanges per step (Codec::rounds()).
  // Whether it can carry the pull (the servers' weight update, applied as decoded); when
  // not, `cannot_pull` says why (ValidatePullCodecSpec()'s reason).
  bool can_pull = true;
  std::string cannot_pull;
  // Settings with which it trains, as the push codec, the example MLP
  // (examples/mlp_fashion.pbtxt: 2 workers, 3 epochs) to 0.85 test accuracy: the push codec
  // and its memory (pull raw), and the servers' optimizer. Measured by bench/convergence.py
  // (docs/convergence.md, "Recommended settings per codec"), which writes each as
  // bench/configs/recommended/NAME.pbtxt.
  config::ChunkCompression recommended;
  config::Optimizer recommended_optimizer;
};

// Every registered codec, in wire-id order.
const std::vector<CodecInfo>& ListCodecs();

// Whether codec `name` sends a subset of the entries each step, the others decoding to zero
// (what DGC's momentum factor masking needs); false for unknown names.
bool SparsifyingCodec(absl::string_view name);
// Their names, comma-separated, for messages.
std::string SparsifyingCodecNames();

// Checks the name and parameters of `spec`. `field_path` prefixes error messages.
// `ratio_warmup` (compress/ratio_warmup.h) is accepted by every codec that takes `ratio`,
// without being listed in CodecInfo::parameters; each value must be in (0, 1].
absl::Status ValidateCodecSpec(const config::Codec& spec, absl::string_view field_path);

// ValidatePullCodecSpec()
//
// ValidateCodecSpec(), and the codec must be able to carry the servers' update u = w_new -
// w_old, which workers add to their weights as decoded. So its decode must approximate u's
// values (unbiased or close): a sign codec whose decode is +-1 per element (signsgd, signum)
// would move every weight by +-1 a step, e.g.
//   "compression.default_compression.pull.name: codec 'signsgd' cannot carry the pull (the
//    servers' update, or in AGGREGATE mode the mean gradient): its decode is +-1 per
//    element, ..."
// It must answer in one round: a multi-round codec (powersgd) can only push, e.g.
//   "compression.default_compression.pull.name: codec 'powersgd' takes 2 rounds per step and
//    can only push; the pull side answers in one"
// and sparsity warm-up is push-only ("...pull.ratio_warmup: ...").
absl::Status ValidatePullCodecSpec(const config::Codec& spec, absl::string_view field_path);

// Creates a codec for chunks of `num_elements` values. Validates `spec` first.
absl::StatusOr<std::unique_ptr<Codec>> CreateCodec(const config::Codec& spec,
                                                   size_t num_elements);

// CreateCodec()
//
// The same for a chunk whose place in its tensor is known (compress::ChunkShapeInTensor()):
// codecs that view a chunk as a matrix use it (powersgd; the overload above gives them a
// vector), and may refuse the chunk (INVALID_ARGUMENT saying why). Servers and workers call
// this one, so both build the same view.
absl::StatusOr<std::unique_ptr<Codec>> CreateCodec(const config::Codec& spec,
                                                   const ChunkShape& shape);

}  // namespace tamp::compress

#endif  // TAMP_COMPRESS_REGISTRY_H_
