// Where one process sits in a job: its role, its rank, the address it listens on (servers)
// and the addresses of every shard, resolved from command-line flags or from the launcher or
// cluster engine that started it (tamp run, torchrun, Slurm or Kubernetes), so that every
// process can be started with the same command line and the same CONFIG file.
//
// tamp run (`tamp run CONFIG -- COMMAND`; workers only, and set by hand they work the same):
// TAMP_RANK; TAMP_NUM_WORKERS, which must equal cluster.num_workers when set;
// TAMP_LOCAL_RANK; TAMP_SERVERS, host:port per shard, comma-separated, in shard order.
//
// torchrun (workers only): RANK, WORLD_SIZE (must equal cluster.num_workers), LOCAL_RANK.
// Under both, the servers come from TAMP_SERVERS, else from the request's flag_servers
// (--servers, or the CONFIG's cluster.server_addresses).
//
// Slurm (one multi-task job step, `srun -n S+W`): task SLURM_PROCID < S is server
// SLURM_PROCID, the others are workers SLURM_PROCID - S. Server i listens on the node that
// runs task i (block distribution: SLURM_STEP_NODELIST + SLURM_STEP_TASKS_PER_NODE, or the
// job-level SLURM_JOB_NODELIST + SLURM_TASKS_PER_NODE) at port base_port + i. A worker's
// local rank counts the workers before it on its node.
//
// Kubernetes: servers are the pods of a StatefulSet behind a headless Service, so server i
// is "<statefulset>-<i>.<service>:<port>" and a server's rank is its pod ordinal (the
// numeric suffix of HOSTNAME, or TAMP_POD_INDEX); workers are an Indexed Job whose rank is
// JOB_COMPLETION_INDEX.
#ifndef TAMP_JOB_PLACEMENT_H_
#define TAMP_JOB_PLACEMENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/config.pb.h"

namespace tamp {

enum class Role { kServer, kWorker };

// The defaults of --base_port, --k8s_statefulset and --k8s_service, as deploy/ uses them.
inline constexpr uint32_t kDefaultBasePort = 29500;
inline constexpr char kDefaultK8sName[] = "tamp-server";

// Where placement comes from. kAuto picks, for a worker, tamp run's variables when TAMP_RANK
// is set, else torchrun's when RANK and WORLD_SIZE are; then, for any role, Slurm when
// SLURM_PROCID is set, else Kubernetes when KUBERNETES_SERVICE_HOST is set, else the flags.
enum class PlacementSource { kAuto, kFlags, kTampEnv, kTorchrun, kSlurm, kKubernetes };

// Parses "auto", "flags", "tamp", "torchrun", "slurm" or "kubernetes".
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
  // Used with kFlags; with another source, a --rank given (rank_flag_given) must agree with
  // the environment's rank (FAILED_PRECONDITION otherwise).
  uint32_t flag_rank = 0;
  bool rank_flag_given = false;
  // host:port per shard (a worker's --servers, else cluster.server_addresses); may be empty
  // for servers. tamp run and torchrun placements fall back to it without TAMP_SERVERS.
  std::vector<std::string> flag_servers;
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
  // Workers: the rank among the workers on this host, e.g. to pick a GPU (TAMP_LOCAL_RANK,
  // LOCAL_RANK, or counted from Slurm's task layout; 0 when nothing tells).
  uint32_t local_rank = 0;
  // host:port of every shard, in shard order (empty when the flags gave none).
  std::vector<std::string> servers;
  // "flags", "tamp", "torchrun", "slurm" or "kubernetes", for logs.
  std::string source;
};

// Resolves the placement; errors name the variable or flag that is missing or wrong, e.g.
// "SLURM_NTASKS is 3 but the config asks for 2 servers + 2 workers = 4 tasks".
absl::StatusOr<Placement> ResolvePlacement(const PlacementRequest& request, const EnvLookup& env);

// CheckTorchrunPair()
//
// FAILED_PRECONDITION "RANK is set but WORLD_SIZE is not: ..." (or the other way round):
// torchrun sets both, and one alone is a script's or a launcher's mistake, which otherwise
// reads as "no placement" (a worker's flags then place it, so this is only said where they
// do not).
absl::Status CheckTorchrunPair(const EnvLookup& env);

// WorkerConfigPathFromEnv()
//
// The CONFIG a worker program was started with: TAMP_CONFIG (tamp run sets it to an absolute
// path). FAILED_PRECONDITION naming TAMP_CONFIG when it is unset or empty; a program started
// by torchrun or by hand then passes its CONFIG itself.
absl::StatusOr<std::string> WorkerConfigPathFromEnv(const EnvLookup& env);

// WorkerRestartedFromEnv()
//
// Whether this worker process replaces a dead one of its rank (and so rejoins the run instead
// of starting it): TAMP_RESTART, set by `tamp run --restart_workers` and deploy/'s restart
// loops to the restart's number. Unset, empty or 0: a first start; N >= 1: restarted.
// INVALID_ARGUMENT naming TAMP_RESTART for anything else ("abc", "-1", "1.5"): read as "not
// restarted", such a value would start a fresh worker into a running job.
absl::StatusOr<bool> WorkerRestartedFromEnv(const EnvLookup& env);

// WorkerPlacementFromEnv()
//
// Where a worker program (one using the worker client, not tamp_worker) sits in the job whose
// CONFIG has `cluster`, from its environment alone: tamp run's TAMP_* variables, else
// torchrun's, else Slurm's, else Kubernetes' (the order of PlacementSource::kAuto). Slurm
// servers listen on TAMP_BASE_PORT + shard (default kDefaultBasePort, as
// deploy/slurm/tamp_task.sh); Kubernetes ones on kDefaultBasePort of the StatefulSet and
// Service kDefaultK8sName. Errors name the variable, e.g. "TAMP_RANK: 5 is not below
// cluster.num_workers (4)", "WORLD_SIZE=3 disagrees with cluster.num_workers=4";
// FAILED_PRECONDITION when the environment names no placement at all.
//
// Keeps no state and reads only through `env`: callable from any thread where `env` is
// (ProcessEnv() is, while nothing calls setenv()).
//
// Example:
//   const EnvLookup env = ProcessEnv();
//   TAMP_ASSIGN_OR_RETURN(std::string path, WorkerConfigPathFromEnv(env));
//   TAMP_ASSIGN_OR_RETURN(config::RunConfig config, LoadConfigFile(path));
//   TAMP_ASSIGN_OR_RETURN(Placement placement, WorkerPlacementFromEnv(config.cluster(), env));
//   // placement.rank, placement.local_rank, placement.servers (shard order)
absl::StatusOr<Placement> WorkerPlacementFromEnv(const config::Cluster& cluster,
                                                 const EnvLookup& env);

// Expands a Slurm host list such as "node[01-03,7],gpu-a" into its host names, in order.
absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(absl::string_view list);

// Expands a Slurm tasks-per-node list such as "2(x3),1" into one count per node.
absl::StatusOr<std::vector<uint32_t>> ExpandSlurmTasksPerNode(absl::string_view list);

}  // namespace tamp

#endif  // TAMP_JOB_PLACEMENT_H_
