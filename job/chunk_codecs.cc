#include "job/chunk_codecs.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/codec.h"
#include "compress/error_feedback.h"
#include "compress/ratio_warmup.h"
#include "compress/registry.h"

namespace tamp {
namespace {

// `status` prefixed with the chunk and the part of its compression that refused.
absl::Status InChunk(const JobLayout& layout, const ChunkPlan& plan, absl::string_view part,
                     const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("chunk ", plan.chunk.id, " (", layout.tensor_of(plan).name,
                                   "): ", part, ": ", status.message()));
}

}  // namespace

absl::Status CheckChunkCodecs(const JobLayout& layout) {
  for (const ChunkPlan& plan : layout.chunks) {
    TAMP_RETURN_IF_ERROR(CheckChunkCodec(layout, plan));
  }
  return absl::OkStatus();
}

absl::Status CheckChunkCodec(const JobLayout& layout, const ChunkPlan& plan) {
  // The view the servers' and workers' codecs take (server/chunk.cc, worker/client.cc).
  const compress::ChunkShape shape = compress::ChunkShapeInTensor(
      layout.tensor_of(plan).shape, plan.chunk.offset, plan.chunk.length);
  const config::ChunkCompression& compression = plan.compression;
  if (absl::Status made = compress::CreateCodec(compression.push(), shape).status(); !made.ok()) {
    return InChunk(layout, plan, "push", made);
  }
  if (absl::Status made = compress::RatioWarmup::Create(compression.push(), shape).status();
      !made.ok()) {
    return InChunk(layout, plan, "push", made);
  }
  if (absl::Status made = compress::CreateCodec(compression.pull(), shape).status(); !made.ok()) {
    return InChunk(layout, plan, "pull", made);
  }
  for (const auto& [part, feedback] :
       {std::pair{"push_feedback", &compression.push_feedback()},
        std::pair{"pull_feedback", &compression.pull_feedback()}}) {
    if (absl::Status made = compress::ErrorFeedback::Create(*feedback, plan.chunk.length).status();
        !made.ok()) {
      return InChunk(layout, plan, part, made);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckChunkCodecs(const config::RunConfig& config) {
  // Registered tensors not described ahead: the client checks them when it is created.
  if (config.model().kind() == config::Model::REGISTERED && config.model().layout_file().empty()) {
    return absl::OkStatus();
  }
  const absl::StatusOr<JobLayout> layout = BuildJobLayout(config);
  return layout.ok() ? CheckChunkCodecs(*layout) : absl::OkStatus();
}

}  // namespace tamp
