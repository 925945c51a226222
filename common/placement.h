// Where one process sits in a job: its role, its rank, the address it listens on (servers)
// and the addresses of every shard, resolved from command-line flags or from the cluster
// engine that started it (Slurm or Kubernetes), so that every process can be started with
// the same command line and the same CONFIG file.
//
// Slurm (one multi-task job step, `srun -n S+W`): task SLURM_PROCID < S is server
// SLURM_PROCID, the others are workers SLURM_PROCID - S. Server i listens on the node that
// runs task i (block distribution: SLURM_STEP_NODELIST + SLURM_STEP_TASKS_PER_NODE, or the
// job-level SLURM_JOB_NODELIST + SLURM_TASKS_PER_NODE) at port base_port + i.
//
// Kubernetes: servers are the pods of a StatefulSet behind a headless Service, so server i
// is "<statefulset>-<i>.<service>:<port>" and a server's rank is its pod ordinal (the
// numeric suffix of HOSTNAME, or TAMP_POD_INDEX); workers are an Indexed Job whose rank is
// JOB_COMPLETION_INDEX.
#ifndef TAMP_COMMON_PLACEMENT_H_
#define TAMP_COMMON_PLACEMENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tamp {

enum class Role { kServer, kWorker };

// Where placement comes from. kAuto picks Slurm when SLURM_PROCID is set, else Kubernetes
// when KUBERNETES_SERVICE_HOST is set, else the flags.
enum class PlacementSource { kAuto, kFlags, kSlurm, kKubernetes };

// Parses "auto", "flags", "slurm" or "kubernetes".
absl::StatusOr<PlacementSource> ParsePlacementSource(absl::string_view text);

// Reads one environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment.
EnvLookup ProcessEnv();

struct PlacementRequest {
  // The binary asking: a tamp_server cannot become a worker, nor the other way round.
  Role role = Role::kServer;
  PlacementSource source = PlacementSource::kAuto;
  uint32_t num_servers = 0;  // cluster.num_servers of the CONFIG
  uint32_t num_workers = 0;  // cluster.num_workers of the CONFIG
  // Used with kFlags only.
  uint32_t flag_rank = 0;
  std::vector<std::string> flag_servers;  // host:port per shard; may be empty for servers
  // Slurm: server i listens on port base_port + i. Kubernetes: every server pod listens on
  // base_port.
  uint32_t base_port = 0;
  // Kubernetes: the servers' StatefulSet and headless Service names.
  std::string k8s_statefulset;
  std::string k8s_service;
};

struct Placement {
  Role role = Role::kServer;
  uint32_t rank = 0;
  // Servers: the host and port to listen on ("" and 0 when the flags decide). Workers: unused.
  std::string listen_host;
  uint32_t listen_port = 0;
  // host:port of every shard, in shard order (empty when the flags gave none).
  std::vector<std::string> servers;
  // "flags", "slurm" or "kubernetes", for logs.
  std::string source;
};

// Resolves the placement; errors name the variable or flag that is missing or wrong, e.g.
// "SLURM_NTASKS is 3 but the config asks for 2 servers + 2 workers = 4 tasks".
absl::StatusOr<Placement> ResolvePlacement(const PlacementRequest& request, const EnvLookup& env);

// Expands a Slurm host list such as "node[01-03,7],gpu-a" into its host names, in order.
absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(absl::string_view list);

// Expands a Slurm tasks-per-node list such as "2(x3),1" into one count per node.
absl::StatusOr<std::vector<uint32_t>> ExpandSlurmTasksPerNode(absl::string_view list);

}  // namespace tamp

#endif  // TAMP_COMMON_PLACEMENT_H_
