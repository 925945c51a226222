#include "job/placement_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "base/status_macros.h"

ABSL_FLAG(std::string, placement, "auto",
          "Where rank and addresses come from: flags (--rank; servers --host and --port, "
          "workers --servers), tamp (workers: TAMP_RANK etc., as `tamp run CONFIG -- COMMAND` "
          "sets them), torchrun (workers: RANK, WORLD_SIZE), slurm (SLURM_PROCID etc.), "
          "kubernetes (servers: the StatefulSet pod ordinal; workers: JOB_COMPLETION_INDEX), or "
          "auto (for workers tamp when TAMP_RANK is set, torchrun when RANK and WORLD_SIZE "
          "are; then slurm under srun, kubernetes in a pod, else flags). See job/placement.h.");
ABSL_FLAG(uint32_t, base_port, tamp::kDefaultBasePort,
          "Slurm: shard i listens on base_port + i. Kubernetes: every shard listens on it.");
ABSL_FLAG(std::string, k8s_statefulset, tamp::kDefaultK8sName,
          "Kubernetes: the servers' StatefulSet.");
ABSL_FLAG(std::string, k8s_service, tamp::kDefaultK8sName,
          "Kubernetes: the headless Service in front of that StatefulSet.");

namespace tamp {

absl::StatusOr<PlacementRequest> PlacementRequestFromFlags(Role role,
                                                           const config::Cluster& cluster,
                                                           std::optional<uint32_t> flag_rank,
                                                           std::vector<std::string> flag_servers) {
  PlacementRequest request;
  request.role = role;
  TAMP_ASSIGN_OR_RETURN(request.source, ParsePlacementSource(absl::GetFlag(FLAGS_placement)));
  request.num_servers = cluster.num_servers();
  request.num_workers = cluster.num_workers();
  request.flag_rank = flag_rank.value_or(0);
  request.rank_flag_given = flag_rank.has_value();
  request.flag_servers = std::move(flag_servers);
  request.base_port = absl::GetFlag(FLAGS_base_port);
  request.k8s_statefulset = absl::GetFlag(FLAGS_k8s_statefulset);
  request.k8s_service = absl::GetFlag(FLAGS_k8s_service);
  return request;
}

}  // namespace tamp
