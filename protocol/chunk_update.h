// The update a shard applies to one chunk once every push is in, and the answer it sends:
// the optimizer's step on the weights, then w_new - w_old through the pull codec and its
// memory. The shard (server/shard.h) and the performance model's calibration
// (tools/tamp/perf_calibrate.h) both run it, so the model times what the shard does.
#ifndef TAMP_PROTOCOL_CHUNK_UPDATE_H_
#define TAMP_PROTOCOL_CHUNK_UPDATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/philox.h"
#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "optim/optimizer.h"

namespace tamp {

// UpdateChunk()
//
// optimizer.Apply(weights, gradient, step, learning_rate), then *payload = the pull memory's
// Compress(codec, w_new - w_old, key). A RESIDUAL memory has the update added straight into
// it by the optimizer's pass (compress::ErrorFeedback::AddTarget()), which spares a pass
// over the chunk; other memories get it through `update` (scratch, weights.size() values).
// The weights move even if encoding fails (a codec bug), as Compress() says.
absl::Status UpdateChunk(Optimizer& optimizer, absl::Span<float> weights,
                         absl::Span<const float> gradient, int64_t step, float learning_rate,
                         compress::ErrorFeedback& memory, compress::Codec& codec,
                         const RandomKey& key, absl::Span<float> update, std::string* payload);

// SparseUpdateApplies()
//
// Whether UpdateChunkSparse() serves `optimizer` (null: server.mode AGGREGATE, no
// optimizer) and `memory`: a RESIDUAL memory, and a rule that moves only where the gradient
// is not zero (Optimizer::KeepsZeroGradientWeights).
bool SparseUpdateApplies(const Optimizer* optimizer, const compress::ErrorFeedback& memory);

// GatherSparseAggregate()
//
// The aggregate of sums that sparse pushes gathered: `accumulator` holds the sum of
// `num_contributors` pushes of `push_codec`, zero outside `touched` (the entries they added
// to; repeats allowed). Takes each nonzero sum once into *aggregate, zeroing it in the
// accumulator (a repeat then finds 0; a zero sum aggregates to zero), and turns them into the
// aggregate (push_codec.FinishAggregate, element-wise): what FinishAggregate() of the whole
// accumulator holds at those entries, in O(touched). The accumulator comes out zero.
void GatherSparseAggregate(absl::Span<float> accumulator, absl::Span<const size_t> touched,
                           const compress::Codec& push_codec, int num_contributors,
                           compress::SparseEntries* aggregate);

// UpdateChunkSparse()
//
// The shard's answer to an aggregate gradient that is `aggregate` (distinct entries) and zero
// elsewhere, where SparseUpdateApplies() (CHECK). With an optimizer, it moves only those
// weights, adding each update into the residual (Optimizer::ApplySparse); without one
// (AGGREGATE), the aggregate itself is added into the residual; then the residual is
// compressed. Weights, residual and payload come out as UpdateChunk()'s, or the memory's
// Compress() of the aggregate, (bit for bit, but for the cases ApplySparse() names), in
// O(entries) before the codec where those make a pass over the chunk.
absl::Status UpdateChunkSparse(Optimizer* optimizer, absl::Span<float> weights,
                               const compress::SparseEntries& aggregate, float learning_rate,
                               compress::ErrorFeedback& memory, compress::Codec& codec,
                               const RandomKey& key, std::string* payload);

}  // namespace tamp

#endif  // TAMP_PROTOCOL_CHUNK_UPDATE_H_
