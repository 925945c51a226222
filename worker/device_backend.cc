#include "worker/device_backend.h"

#include "absl/strings/str_cat.h"
#include "compress/cuda/has_device_codec.h"

namespace tamp {

std::string TensorMemory::Name() const {
  return kind == Kind::kHost ? "cpu" : absl::StrCat("cuda:", device);
}

std::vector<DeviceChunkPlan> PlanDeviceChunks(const config::RunConfig& config,
                                              const JobLayout& layout) {
  std::vector<DeviceChunkPlan> plans(layout.chunks.size());
  for (const ChunkPlan& chunk : layout.chunks) {
    const config::ChunkCompression& compression = chunk.compression;
    DeviceChunkPlan& plan = plans[chunk.chunk.id];
    const config::ErrorFeedback::Kind feedback = compression.push_feedback().kind();
    if (!compress::cuda::HasDeviceCodec(compression.push().name())) {
      plan.push_on_host_because =
          absl::StrCat("push codec '", compression.push().name(), "' has no GPU version");
    } else if (feedback == config::ErrorFeedback::DGC_MOMENTUM &&
               !compress::cuda::HasDeviceDgcMomentum(compression.push().name())) {
      plan.push_on_host_because =
          absl::StrCat("push_feedback DGC_MOMENTUM has no GPU version with push codec '",
                       compression.push().name(), "' (topk, dgc and threshold have one)");
    } else if (feedback != config::ErrorFeedback::NONE &&
               feedback != config::ErrorFeedback::RESIDUAL &&
               feedback != config::ErrorFeedback::DGC_MOMENTUM) {
      plan.push_on_host_because = absl::StrCat(
          "push_feedback ", config::ErrorFeedback::Kind_Name(feedback), " has no GPU version");
    } else if (compression.push().ratio_warmup_size() != 0) {
      plan.push_on_host_because = "the push codec's ratio_warmup has no GPU version";
    } else if (config.compression().has_clip_norm()) {
      // The threshold applies to the whole tensor's norm, which the host takes.
      plan.push_on_host_because = "compression.clip_norm clips on the host";
    }
    if (!compress::cuda::HasDeviceCodec(compression.pull().name())) {
      plan.pull_on_host_because =
          absl::StrCat("pull codec '", compression.pull().name(), "' has no GPU version");
    }
  }
  return plans;
}

}  // namespace tamp
