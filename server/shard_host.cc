#include "server/shard_host.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/machine_memory.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "job/job_layout.h"
#include "protocol/handshake.h"

namespace tamp {

namespace {

// A shard holds at least its weights and the sum of the pushes, 8 bytes a value (more with
// optimizer state, residuals and multi-round codecs). Refusing a layout whose shard cannot
// fit even that keeps the server up: allocating it ends in std::bad_alloc (an abort) or the
// OOM killer. `whose`: where the layout came from, for the message.
absl::Status CheckShardFitsMemory(const JobLayout& layout, uint32_t rank,
                                  absl::string_view whose) {
  const std::optional<uint64_t> memory = MachineMemoryBytes();
  const uint64_t needed = 2 * layout.shard_bytes[rank];
  if (!memory.has_value() || needed <= *memory) return absl::OkStatus();
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s put %d values on shard %d, which needs at least %.1f GiB (the weights and the sum of "
      "the pushes, 8 bytes a value); this machine has %.1f GiB: spread the tensors over more "
      "servers (cluster.num_servers) or run shard %d on a machine with more memory",
      whose, layout.shard_bytes[rank] / sizeof(float), rank, needed / kGiB, *memory / kGiB,
      rank));
}

}  // namespace

ShardHost::ShardHost(Shard* shard)
    : config_(shard->config()),
      rank_(shard->rank()),
      layout_source_("the shard it was made with"),
      shard_(shard) {}

ShardHost::ShardHost(const config::RunConfig& config, uint32_t rank, OnCreated on_created)
    : config_(config), rank_(rank), on_created_(std::move(on_created)) {}

ShardHost::~ShardHost() = default;

absl::StatusOr<std::unique_ptr<ShardHost>> ShardHost::Create(const config::RunConfig& config,
                                                             uint32_t rank,
                                                             OnCreated on_created) {
  std::unique_ptr<ShardHost> host(new ShardHost(config, rank, std::move(on_created)));
  if (config.model().kind() == config::Model::REGISTERED) return host;
  TAMP_ASSIGN_OR_RETURN(const JobLayout layout, BuildJobLayout(config));
  host->layout_source_ = absl::StrCat("the config's model.kind ",
                                      config::Model::Kind_Name(config.model().kind()));
  TAMP_RETURN_IF_ERROR(CheckShardFitsMemory(layout, rank, host->layout_source_));
  TAMP_ASSIGN_OR_RETURN(host->owned_, Shard::Create(config, layout, rank));
  if (host->on_created_) TAMP_RETURN_IF_ERROR(host->on_created_(*host->owned_));
  host->shard_.store(host->owned_.get(), std::memory_order_release);
  return host;
}

absl::StatusOr<Shard*> ShardHost::Ready() const {
  if (Shard* shard = this->shard(); shard != nullptr) return shard;
  return absl::FailedPreconditionError(absl::StrCat(
      "server ", rank_, " does not know the job's tensors yet: a worker handshakes first "
      "(model.kind REGISTERED)"));
}

namespace {

absl::Status JoinShard(Shard& shard, const rpc::HandshakeRequest& request) {
  return shard.Join(request.worker_rank(), request.steps_per_epoch(), request.total_steps(),
                    request.rejoin_at_step());
}

}  // namespace

absl::StatusOr<Shard*> ShardHost::Join(const rpc::HandshakeRequest& request) {
  std::lock_guard<std::mutex> lock(create_mu_);
  if (Shard* shard = this->shard(); shard != nullptr) {
    if (absl::Status same = CheckHandshake(shard->layout(), shard->config(), rank_, request);
        !same.ok()) {
      // Past the header, two workers' tensors disagree: say which one set the layout.
      if (!CheckHandshakeHeader(shard->config(), rank_, request).ok()) return same;
      return absl::Status(same.code(), absl::StrCat(same.message(), " (server ", rank_,
                                                    " took the job's tensors from ",
                                                    layout_source_, ")"));
    }
    TAMP_RETURN_IF_ERROR(JoinShard(*shard, request));
    return shard;
  }
  TAMP_RETURN_IF_ERROR(CheckHandshakeHeader(config_, rank_, request));
  if (request.steps_per_epoch() == 0 || request.total_steps() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the run's length must be at least one step: steps_per_epoch ",
        request.steps_per_epoch(), ", total_steps ", request.total_steps()));
  }
  if (request.rejoin_at_step() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", request.worker_rank(), " rejoins at step ", request.rejoin_at_step(),
        " but server ", rank_, " has no run under way (no worker has handshaken)"));
  }
  TAMP_ASSIGN_OR_RETURN(std::vector<TensorSpec> tensors, HandshakeTensors(request));
  absl::StatusOr<JobLayout> layout = BuildJobLayout(config_, std::move(tensors));
  if (!layout.ok()) {
    return absl::Status(layout.status().code(),
                        absl::StrCat("worker ", request.worker_rank(), "'s tensors: ",
                                     layout.status().message()));
  }
  TAMP_RETURN_IF_ERROR(CheckHandshake(*layout, config_, rank_, request));
  TAMP_RETURN_IF_ERROR(CheckShardFitsMemory(
      *layout, rank_, absl::StrCat("worker ", request.worker_rank(), "'s tensors")));
  TAMP_ASSIGN_OR_RETURN(std::unique_ptr<Shard> made, Shard::Create(config_, *layout, rank_));
  TAMP_RETURN_IF_ERROR(JoinShard(*made, request));
  // Last: what the hook starts on the shard (a checkpointer's thread, a watchdog) must not
  // outlive a shard that is then discarded.
  if (on_created_) {
    if (absl::Status prepared = on_created_(*made); !prepared.ok()) {
      LOG(ERROR) << "shard " << rank_ << ": " << prepared.message();
      return prepared;
    }
  }
  owned_ = std::move(made);
  layout_source_ = absl::StrCat("worker ", request.worker_rank(), "'s handshake, the first");
  LOG(INFO) << "shard " << rank_ << ": learned " << layout->tensors.size() << " tensors ("
            << layout->total_elements << " values, " << layout->ChunksOfShard(rank_).size()
            << " of " << layout->chunks.size() << " chunks here) from worker "
            << request.worker_rank() << "'s handshake";
  shard_.store(owned_.get(), std::memory_order_release);
  return owned_.get();
}

}  // namespace tamp
