// CheckChunkCodecs: whether every chunk of a job layout can have the codecs its compression
// names, as the servers and workers will make them.
//
// Config validation checks each codec's parameters alone; some codecs also depend on the
// chunk they compress (powersgd's rank needs a matrix at least that large, and a bias viewed
// as a matrix is too small). Front ends (tamp run, --check, the processes at start-up) call
// this before anything starts, so that such a config is refused as a config, naming the chunk,
// instead of by a server that has already been launched.
//
// Threading: a pure function of its argument. Makes each chunk's codecs in turn and frees
// them (memory of one chunk's codecs at a time).
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(JobLayout layout, BuildJobLayout(config));
//   TAMP_RETURN_IF_ERROR(CheckChunkCodecs(layout));
#ifndef TAMP_JOB_CHUNK_CODECS_H_
#define TAMP_JOB_CHUNK_CODECS_H_

#include "absl/status/status.h"
#include "job/job_layout.h"
#include "proto/config.pb.h"

namespace tamp {

// OK, or the first chunk's refusal: "chunk 8 (fc3.bias): push: codec 'powersgd': rank 4
// needs a matrix of at least 4 x 4, ..." (INVALID_ARGUMENT, as the codec's).
absl::Status CheckChunkCodecs(const JobLayout& layout);

// The same for one chunk of `layout`.
absl::Status CheckChunkCodec(const JobLayout& layout, const ChunkPlan& plan);

// The same for the layout of the config's model where the config alone gives one (MLP, CNN,
// LAYOUT, REGISTERED with model.layout_file); OK where it does not: model.kind REGISTERED
// without a layout_file, whose layout the workers' tensors make (the client checks its
// chunks when it is created), or a layout the config cannot build (whoever builds it
// reports why). `config` must be validated.
absl::Status CheckChunkCodecs(const config::RunConfig& config);

}  // namespace tamp

#endif  // TAMP_JOB_CHUNK_CODECS_H_
