#include "server/chunk.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "compress/registry.h"
#include "job/model_layout.h"

namespace tamp {

absl::StatusOr<std::unique_ptr<ChunkCore>> ChunkCore::Create(const config::RunConfig& config,
                                                             const JobLayout& layout, uint32_t id,
                                                             const uint64_t* steps_per_epoch) {
  const ChunkPlan& plan = layout.chunks[id];
  const size_t n = plan.chunk.length;
  auto core = std::make_unique<ChunkCore>();
  core->id = id;
  core->num_workers = config.cluster().num_workers();
  core->pull_buffers = PullBuffers::Create(core->num_workers);
  if (config.server().mode() != config::Server::AGGREGATE) {  // Else the servers only average.
    TAMP_ASSIGN_OR_RETURN(core->optimizer, CreateOptimizer(config.optimizer(), n));
  }
  // Codecs that view a chunk as a matrix see its rows in the tensor, as the workers' do.
  const compress::ChunkShape shape =
      compress::ChunkShapeInTensor(layout.tensor_of(plan).shape, plan.chunk.offset, n);
  TAMP_ASSIGN_OR_RETURN(core->push_codec, compress::CreateCodec(plan.compression.push(), shape));
  TAMP_ASSIGN_OR_RETURN(core->push_warmup,
                        compress::RatioWarmup::Create(plan.compression.push(), shape));
  core->steps_per_epoch = steps_per_epoch;
  TAMP_ASSIGN_OR_RETURN(core->pull_codec, compress::CreateCodec(plan.compression.pull(), shape));
  if (core->pull_codec->rounds() != 1) {  // Config validation refuses these already.
    return absl::InvalidArgumentError(absl::StrCat("pull codec ", plan.compression.pull().name(),
                                                   " takes several rounds; it can only push"));
  }
  core->rounds = core->push_codec->rounds();
  TAMP_ASSIGN_OR_RETURN(core->pull_feedback,
                        compress::ErrorFeedback::Create(plan.compression.pull_feedback(), n));
  core->weights.resize(n);
  if (config.model().kind() != config::Model::REGISTERED) {  // Else worker 0 sets them.
    InitTensorSlice(layout.tensor_of(plan), config.model().init_seed(), plan.chunk.tensor,
                    plan.chunk.offset, absl::MakeSpan(core->weights));
  }
  core->accumulator.assign(core->push_codec->RoundValues(0), 0.0f);
  core->update.resize(n);
  return core;
}

std::shared_ptr<PullBuffers> PullBuffers::Create(size_t keep) {
  return std::shared_ptr<PullBuffers>(new PullBuffers(keep));
}

std::string PullBuffers::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (spare_.empty()) return {};
  std::string buffer = std::move(spare_.back());
  spare_.pop_back();
  return buffer;
}

std::shared_ptr<const std::string> PullBuffers::Share(std::string&& encoded) {
  std::weak_ptr<PullBuffers> pool = weak_from_this();
  return std::shared_ptr<const std::string>(
      new std::string(std::move(encoded)), [pool](const std::string* sent) {
        std::unique_ptr<std::string> owned(const_cast<std::string*>(sent));
        if (std::shared_ptr<PullBuffers> alive = pool.lock()) alive->Give(std::move(*owned));
      });
}

size_t PullBuffers::spare() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spare_.size();
}

void PullBuffers::Give(std::string&& buffer) {
  // An empty answer (a refusal, a round before the last) holds no memory worth keeping; its
  // capacity is the string's inline one.
  if (buffer.capacity() <= std::string().capacity()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (spare_.size() < keep_) spare_.push_back(std::move(buffer));
}

ChunkSnapshot ShardChunk::CoreSnapshot() const {
  ChunkSnapshot snapshot;
  snapshot.step = core_->step;
  snapshot.weights = core_->weights;
  snapshot.accumulator = core_->accumulator;
  const absl::Span<const float> residual = core_->pull_feedback->residual();
  snapshot.pull_residual.assign(residual.begin(), residual.end());
  snapshot.nonfinite_skipped = core_->nonfinite_skipped;
  return snapshot;
}

}  // namespace tamp
