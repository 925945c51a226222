#include "job/placement.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "job/address.h"
#include "job/security.h"

namespace tamp {
namespace {

// A host list longer than this is a typo or an attack, not a cluster.
constexpr size_t kMaxHosts = 1 << 16;

absl::Status Invalid(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
}

absl::StatusOr<std::string> Require(const EnvLookup& env, const std::string& name,
                                    absl::string_view engine) {
  std::optional<std::string> value = env(name);
  if (!value.has_value() || value->empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, " is not set: is this process running under ", engine, "?"));
  }
  return *value;
}

// A number written in decimal digits alone: SimpleAtoi would also take " 1", "+1" and "1 ",
// which no engine writes, so such a value is a script's mistake, said rather than taken.
template <typename T>
bool ParseDigits(absl::string_view text, T* value) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isdigit(c); }) &&
         absl::SimpleAtoi(text, value);
}

// `servers` (from `what`) valid and distinct (ValidateServerList), one per shard.
absl::Status CheckServers(const std::vector<std::string>& servers, uint32_t num_servers,
                          absl::string_view what) {
  TAMP_RETURN_IF_ERROR(ValidateServerList(servers, what));
  if (servers.size() == num_servers) return absl::OkStatus();
  return Invalid(what, absl::StrCat("names ", servers.size(),
                                    servers.size() == 1 ? " server" : " servers",
                                    " but cluster.num_servers is ", num_servers));
}

absl::StatusOr<uint32_t> ParseCount(absl::string_view name, absl::string_view text) {
  uint32_t value = 0;
  if (!ParseDigits(text, &value)) {
    return Invalid(name, absl::StrCat("'", text, "' is not a non-negative integer"));
  }
  return value;
}

// The value of `name` parsed as a count, or nullopt when it is unset or empty.
absl::StatusOr<std::optional<uint32_t>> OptionalCount(const EnvLookup& env,
                                                      const std::string& name) {
  std::optional<std::string> text = env(name);
  if (!text.has_value() || text->empty()) return std::nullopt;
  TAMP_ASSIGN_OR_RETURN(const uint32_t value, ParseCount(name, *text));
  return value;
}

bool IsSet(const EnvLookup& env, const std::string& name) {
  std::optional<std::string> value = env(name);
  return value.has_value() && !value->empty();
}

// "5 is not below cluster.num_workers (4)" under `name`.
absl::Status CheckRank(absl::string_view name, uint32_t rank, absl::string_view bound_name,
                       uint32_t bound) {
  if (rank < bound) return absl::OkStatus();
  return Invalid(name, absl::StrCat(rank, " is not below ", bound_name, " (", bound, ")"));
}

// Splits at commas that are not inside brackets.
std::vector<std::string> SplitTopLevel(absl::string_view list) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  items.push_back(current);
  return items;
}

// Expands one item, which may hold several bracket groups ("r[1-2]n[01-02]"), into `out`.
absl::Status ExpandItem(absl::string_view item, std::vector<std::string>& out) {
  const size_t open = item.find('[');
  if (open == absl::string_view::npos) {
    if (item.find(']') != absl::string_view::npos) return Invalid(item, "']' without '['");
    if (std::any_of(item.begin(), item.end(), [](char c) { return absl::ascii_isspace(c); })) {
      return Invalid(item, "a host name holds no white space");
    }
    out.emplace_back(item);
    return absl::OkStatus();
  }
  const size_t close = item.find(']', open);
  if (close == absl::string_view::npos) return Invalid(item, "'[' without ']'");
  const absl::string_view prefix = item.substr(0, open);
  const absl::string_view ranges = item.substr(open + 1, close - open - 1);
  const absl::string_view rest = item.substr(close + 1);
  for (absl::string_view range : absl::StrSplit(ranges, ',')) {
    std::pair<absl::string_view, absl::string_view> bounds = absl::StrSplit(range, '-');
    if (bounds.second.empty()) bounds.second = bounds.first;
    uint64_t first = 0, last = 0;
    if (!ParseDigits(bounds.first, &first) || !ParseDigits(bounds.second, &last) ||
        last < first) {
      return Invalid(item, absl::StrCat("bad range '", range, "'"));
    }
    if (last - first >= kMaxHosts) return Invalid(item, absl::StrCat("range '", range, "' too long"));
    // "node[01-10]" keeps the width of its first bound: node01 ... node10.
    const size_t width = bounds.first.size();
    for (uint64_t n = first; n <= last; ++n) {
      std::string number = absl::StrCat(n);
      if (number.size() < width) number.insert(0, width - number.size(), '0');
      TAMP_RETURN_IF_ERROR(ExpandItem(absl::StrCat(prefix, number, rest), out));
      if (out.size() > kMaxHosts) return Invalid(item, "more than 65536 hosts");
    }
  }
  return absl::OkStatus();
}

std::string JoinHostPort(absl::string_view host, uint32_t port) {
  return absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port)
                                      : absl::StrCat(host, ":", port);
}

absl::Status CheckPort(uint32_t base_port, uint32_t count, absl::string_view flag) {
  if (base_port == 0 || base_port + count - 1 > 65535) {
    return Invalid(flag, absl::StrCat("ports ", base_port, "..", base_port + count - 1,
                                      " must lie in [1, 65535]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Placement> FromSlurm(const PlacementRequest& request, const EnvLookup& env) {
  constexpr absl::string_view kEngine = "Slurm (srun)";
  TAMP_ASSIGN_OR_RETURN(const std::string procid_text, Require(env, "SLURM_PROCID", kEngine));
  TAMP_ASSIGN_OR_RETURN(const uint32_t procid, ParseCount("SLURM_PROCID", procid_text));

  // Inside a job step the step's variables describe the tasks; the job's are the fallback.
  auto first_set = [&](std::initializer_list<const char*> names) -> absl::StatusOr<std::pair<std::string, std::string>> {
    for (const char* name : names) {
      std::optional<std::string> value = env(name);
      if (value.has_value() && !value->empty()) return std::make_pair(std::string(name), *value);
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "none of ", absl::StrJoin(names, ", "), " is set: is this process running under ",
        kEngine, "?"));
  };
  TAMP_ASSIGN_OR_RETURN(const auto ntasks, first_set({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}));
  TAMP_ASSIGN_OR_RETURN(const uint32_t num_tasks, ParseCount(ntasks.first, ntasks.second));
  const uint32_t wanted = request.num_servers + request.num_workers;
  if (num_tasks != wanted) {
    return absl::InvalidArgumentError(
        absl::StrCat(ntasks.first, " is ", num_tasks, " but the config asks for ", request.num_servers,
                     " servers + ", request.num_workers, " workers = ", wanted,
                     " tasks (srun -n ", wanted, ")"));
  }
  if (procid >= num_tasks) {
    return Invalid("SLURM_PROCID", absl::StrCat(procid, " is not below ", ntasks.first, " ", num_tasks));
  }
  std::optional<std::string> distribution = env("SLURM_DISTRIBUTION");
  if (distribution.has_value() && !distribution->empty() &&
      !absl::StartsWith(*distribution, "block")) {
    return Invalid("SLURM_DISTRIBUTION",
                   absl::StrCat("'", *distribution,
                                "': Tamp maps tasks to nodes by block distribution; run srun "
                                "with --distribution=block"));
  }
  TAMP_ASSIGN_OR_RETURN(const auto nodelist,
                        first_set({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}));
  TAMP_ASSIGN_OR_RETURN(const auto per_node,
                        first_set({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}));
  absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostList(nodelist.second);
  if (!hosts.ok()) return Invalid(nodelist.first, hosts.status().message());
  absl::StatusOr<std::vector<uint32_t>> counts = ExpandSlurmTasksPerNode(per_node.second);
  if (!counts.ok()) return Invalid(per_node.first, counts.status().message());
  if (hosts->size() != counts->size()) {
    return Invalid(per_node.first,
                   absl::StrCat("names ", counts->size(), " nodes but ", nodelist.first,
                                " names ", hosts->size()));
  }
  // Block distribution: the first counts[0] tasks on hosts[0], the next counts[1] on hosts[1]...
  std::vector<std::string> host_of_task;
  for (size_t node = 0; node < hosts->size(); ++node) {
    host_of_task.insert(host_of_task.end(), (*counts)[node], (*hosts)[node]);
  }
  if (host_of_task.size() != num_tasks) {
    return Invalid(per_node.first, absl::StrCat("places ", host_of_task.size(), " tasks but ",
                                                 ntasks.first, " is ", num_tasks));
  }
  TAMP_RETURN_IF_ERROR(CheckPort(request.base_port, request.num_servers, "--base_port"));

  Placement placement;
  placement.source = "slurm";
  for (uint32_t shard = 0; shard < request.num_servers; ++shard) {
    placement.servers.push_back(JoinHostPort(host_of_task[shard], request.base_port + shard));
  }
  if (procid < request.num_servers) {
    placement.role = Role::kServer;
    placement.rank = procid;
    // Workers dial the node's name; a name that may resolve to a loopback alias on its own
    // node (Debian's 127.0.1.1) would leave the server unreachable from the others, so it
    // listens on every interface, as in Kubernetes. A loopback node (one-node tests) keeps
    // to loopback.
    placement.listen_host =
        IsLoopbackHost(host_of_task[procid]) ? host_of_task[procid] : std::string("0.0.0.0");
    placement.listen_port = request.base_port + procid;
  } else {
    placement.role = Role::kWorker;
    placement.rank = procid - request.num_servers;
    placement.local_rank = static_cast<uint32_t>(
        std::count(host_of_task.begin() + request.num_servers, host_of_task.begin() + procid,
                   host_of_task[procid]));
  }
  if (placement.role != request.role) {
    return Invalid("SLURM_PROCID",
                   absl::StrCat("task ", procid, " is a ",
                                placement.role == Role::kServer ? "server" : "worker",
                                " (tasks 0..", request.num_servers - 1,
                                " are servers) but this process is a ",
                                request.role == Role::kServer
                                    ? "server (tamp_server)"
                                    : "worker (tamp_worker or a training script)",
                                ": start deploy/slurm/tamp_task.sh, which picks the program"));
  }
  return placement;
}

// The servers of a placement that a launcher describes by rank only (tamp run, torchrun):
// TAMP_SERVERS, else the request's flag_servers.
absl::StatusOr<std::vector<std::string>> ServersFromEnv(const PlacementRequest& request,
                                                        const EnvLookup& env) {
  std::optional<std::string> list = env("TAMP_SERVERS");
  if (!list.has_value() || list->empty()) {
    if (request.flag_servers.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "TAMP_SERVERS is ", list.has_value() ? "empty" : "not set",
          " and no server addresses were given (cluster.server_addresses in the config, or "
          "tamp_worker's --servers)"));
    }
    return request.flag_servers;
  }
  std::vector<std::string> servers;
  for (absl::string_view address : absl::StrSplit(*list, ',')) {
    address = absl::StripAsciiWhitespace(address);
    if (address.empty()) {
      return Invalid("TAMP_SERVERS", absl::StrCat("empty address in '", *list, "'"));
    }
    servers.emplace_back(address);
  }
  TAMP_RETURN_IF_ERROR(CheckServers(servers, request.num_servers, "TAMP_SERVERS"));
  return servers;
}

absl::Status RequireWorker(const PlacementRequest& request, absl::string_view launcher) {
  if (request.role == Role::kWorker) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      launcher, " places workers only; a server takes its place from the flags, Slurm or "
      "Kubernetes"));
}

absl::StatusOr<Placement> FromTampEnv(const PlacementRequest& request, const EnvLookup& env) {
  TAMP_RETURN_IF_ERROR(RequireWorker(request, "tamp run (TAMP_RANK)"));
  TAMP_ASSIGN_OR_RETURN(const std::string rank_text,
                        Require(env, "TAMP_RANK", "`tamp run CONFIG -- COMMAND`"));
  Placement placement;
  placement.source = "tamp";
  placement.role = Role::kWorker;
  TAMP_ASSIGN_OR_RETURN(placement.rank, ParseCount("TAMP_RANK", rank_text));
  TAMP_ASSIGN_OR_RETURN(const std::optional<uint32_t> num_workers,
                        OptionalCount(env, "TAMP_NUM_WORKERS"));
  if (num_workers.has_value() && *num_workers != request.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("TAMP_NUM_WORKERS=", *num_workers,
                                                   " disagrees with cluster.num_workers=",
                                                   request.num_workers));
  }
  TAMP_RETURN_IF_ERROR(
      CheckRank("TAMP_RANK", placement.rank, "cluster.num_workers", request.num_workers));
  TAMP_ASSIGN_OR_RETURN(const std::optional<uint32_t> local_rank,
                        OptionalCount(env, "TAMP_LOCAL_RANK"));
  placement.local_rank = local_rank.value_or(0);
  TAMP_ASSIGN_OR_RETURN(placement.servers, ServersFromEnv(request, env));
  return placement;
}

absl::StatusOr<Placement> FromTorchrun(const PlacementRequest& request, const EnvLookup& env) {
  constexpr absl::string_view kEngine = "torchrun";
  TAMP_RETURN_IF_ERROR(RequireWorker(request, kEngine));
  TAMP_ASSIGN_OR_RETURN(const std::string rank_text, Require(env, "RANK", kEngine));
  TAMP_ASSIGN_OR_RETURN(const std::string world_text, Require(env, "WORLD_SIZE", kEngine));
  Placement placement;
  placement.source = "torchrun";
  placement.role = Role::kWorker;
  TAMP_ASSIGN_OR_RETURN(placement.rank, ParseCount("RANK", rank_text));
  TAMP_ASSIGN_OR_RETURN(const uint32_t world_size, ParseCount("WORLD_SIZE", world_text));
  if (world_size != request.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("WORLD_SIZE=", world_size,
                                                   " disagrees with cluster.num_workers=",
                                                   request.num_workers));
  }
  TAMP_RETURN_IF_ERROR(CheckRank("RANK", placement.rank, "WORLD_SIZE", world_size));
  TAMP_ASSIGN_OR_RETURN(const std::optional<uint32_t> local_rank,
                        OptionalCount(env, "LOCAL_RANK"));
  placement.local_rank = local_rank.value_or(0);
  TAMP_ASSIGN_OR_RETURN(placement.servers, ServersFromEnv(request, env));
  return placement;
}

absl::StatusOr<Placement> FromKubernetes(const PlacementRequest& request, const EnvLookup& env) {
  constexpr absl::string_view kEngine = "Kubernetes";
  if (request.k8s_statefulset.empty() || request.k8s_service.empty()) {
    return Invalid("--k8s_statefulset/--k8s_service", "both are needed under Kubernetes");
  }
  TAMP_RETURN_IF_ERROR(CheckPort(request.base_port, 1, "--base_port"));
  Placement placement;
  placement.source = "kubernetes";
  placement.role = request.role;
  for (uint32_t shard = 0; shard < request.num_servers; ++shard) {
    placement.servers.push_back(JoinHostPort(
        absl::StrCat(request.k8s_statefulset, "-", shard, ".", request.k8s_service),
        request.base_port));
  }
  uint32_t rank = 0;
  uint32_t ranks = 0;
  if (request.role == Role::kWorker) {
    absl::StatusOr<std::string> index = Require(env, "JOB_COMPLETION_INDEX", kEngine);
    if (!index.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          index.status().message(), " (workers run as an Indexed Job: completionMode: Indexed)"));
    }
    TAMP_ASSIGN_OR_RETURN(rank, ParseCount("JOB_COMPLETION_INDEX", *index));
    ranks = request.num_workers;
  } else {
    // The pod-index label reaches the pod through the downward API as TAMP_POD_INDEX; without
    // it, a StatefulSet pod's host name is "<statefulset>-<ordinal>".
    std::optional<std::string> index = env("TAMP_POD_INDEX");
    if (index.has_value() && !index->empty()) {
      TAMP_ASSIGN_OR_RETURN(rank, ParseCount("TAMP_POD_INDEX", *index));
    } else {
      TAMP_ASSIGN_OR_RETURN(const std::string hostname, Require(env, "HOSTNAME", kEngine));
      const std::string prefix = absl::StrCat(request.k8s_statefulset, "-");
      if (!absl::StartsWith(hostname, prefix) ||
          !ParseDigits(absl::string_view(hostname).substr(prefix.size()), &rank)) {
        return Invalid("HOSTNAME", absl::StrCat("'", hostname, "' is not a pod of StatefulSet '",
                                                request.k8s_statefulset,
                                                "' (expected ", prefix, "<ordinal>)"));
      }
    }
    ranks = request.num_servers;
    placement.listen_host = "0.0.0.0";
    placement.listen_port = request.base_port;
  }
  if (rank >= ranks) {
    return Invalid(request.role == Role::kWorker ? "JOB_COMPLETION_INDEX" : "pod ordinal",
                   absl::StrCat(rank, " is not below the config's ",
                                request.role == Role::kWorker ? "cluster.num_workers "
                                                              : "cluster.num_servers ",
                                ranks, ": do the replicas/completions match the config?"));
  }
  placement.rank = rank;
  return placement;
}

absl::StatusOr<Placement> FromFlags(const PlacementRequest& request) {
  const uint32_t ranks = request.role == Role::kServer ? request.num_servers : request.num_workers;
  if (request.flag_rank >= ranks) {
    return Invalid("--rank", absl::StrCat(request.flag_rank, " out of range: the config has ",
                                          request.role == Role::kServer ? "cluster.num_servers "
                                                                        : "cluster.num_workers ",
                                          ranks));
  }
  // A worker's --servers (or the config's cluster.server_addresses, checked on load).
  if (!request.flag_servers.empty()) {
    TAMP_RETURN_IF_ERROR(CheckServers(request.flag_servers, request.num_servers, "--servers"));
  }
  Placement placement;
  placement.source = "flags";
  placement.role = request.role;
  placement.rank = request.flag_rank;
  placement.servers = request.flag_servers;
  return placement;
}

// What PlacementSource::kAuto stands for in `env`.
PlacementSource AutoSource(Role role, const EnvLookup& env) {
  if (role == Role::kWorker && IsSet(env, "TAMP_RANK")) return PlacementSource::kTampEnv;
  if (role == Role::kWorker && IsSet(env, "RANK") && IsSet(env, "WORLD_SIZE")) {
    return PlacementSource::kTorchrun;
  }
  if (IsSet(env, "SLURM_PROCID")) return PlacementSource::kSlurm;
  if (IsSet(env, "KUBERNETES_SERVICE_HOST")) return PlacementSource::kKubernetes;
  return PlacementSource::kFlags;
}

}  // namespace

absl::Status CheckTorchrunPair(const EnvLookup& env) {
  for (const auto& [set, missing] : {std::pair{"RANK", "WORLD_SIZE"}, {"WORLD_SIZE", "RANK"}}) {
    if (IsSet(env, set) && !IsSet(env, missing)) {
      return absl::FailedPreconditionError(
          absl::StrCat(set, " is set but ", missing, " is not: torchrun's placement needs both"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PlacementSource> ParsePlacementSource(absl::string_view text) {
  if (text == "auto") return PlacementSource::kAuto;
  if (text == "flags") return PlacementSource::kFlags;
  if (text == "tamp") return PlacementSource::kTampEnv;
  if (text == "torchrun") return PlacementSource::kTorchrun;
  if (text == "slurm") return PlacementSource::kSlurm;
  if (text == "kubernetes") return PlacementSource::kKubernetes;
  return Invalid("--placement",
                 absl::StrCat("'", text,
                              "' is not one of auto, flags, tamp, torchrun, slurm, kubernetes"));
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

absl::StatusOr<Placement> ResolvePlacement(const PlacementRequest& request, const EnvLookup& env) {
  PlacementSource source = request.source;
  if (source == PlacementSource::kAuto) source = AutoSource(request.role, env);
  absl::StatusOr<Placement> placement;
  switch (source) {
    case PlacementSource::kTampEnv:
      placement = FromTampEnv(request, env);
      break;
    case PlacementSource::kTorchrun:
      placement = FromTorchrun(request, env);
      break;
    case PlacementSource::kSlurm:
      placement = FromSlurm(request, env);
      break;
    case PlacementSource::kKubernetes:
      placement = FromKubernetes(request, env);
      break;
    case PlacementSource::kFlags:
    case PlacementSource::kAuto:
      // Auto found no placement: half of torchrun's pair is a launcher's or a script's
      // mistake, which by the flags alone would start a second worker 0.
      if (request.source == PlacementSource::kAuto && request.role == Role::kWorker) {
        if (absl::Status pair = CheckTorchrunPair(env); !pair.ok()) {
          return absl::FailedPreconditionError(
              absl::StrCat(pair.message(), " (--placement=flags places by the flags alone)"));
        }
      }
      return FromFlags(request);
  }
  // An operator's --rank that the environment overrules (a shell inside torchrun or srun):
  // two processes could take one rank and wait on each other without a word.
  if (placement.ok() && request.rank_flag_given && placement->rank != request.flag_rank) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--rank=", request.flag_rank, " disagrees with rank ", placement->rank, " from the ",
        placement->source, " placement in the environment, which --placement=",
        request.source == PlacementSource::kAuto ? "auto" : placement->source,
        " takes: pass --placement=flags to place by the flags, or leave --rank out"));
  }
  return placement;
}

absl::StatusOr<std::string> WorkerConfigPathFromEnv(const EnvLookup& env) {
  std::optional<std::string> path = env("TAMP_CONFIG");
  if (!path.has_value() || path->empty()) {
    return absl::FailedPreconditionError(
        "TAMP_CONFIG is not set: start the program with `tamp run CONFIG -- COMMAND`, or give "
        "it the CONFIG yourself");
  }
  return *path;
}

absl::StatusOr<bool> WorkerRestartedFromEnv(const EnvLookup& env) {
  const std::optional<std::string> restart = env("TAMP_RESTART");
  if (!restart.has_value() || restart->empty()) return false;
  uint32_t count = 0;
  if (!ParseDigits(*restart, &count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TAMP_RESTART=", *restart,
        ": must be a whole number (unset or 0: a first start; N >= 1: the N-th restart of a "
        "dead worker, which rejoins the run)"));
  }
  return count >= 1;
}

absl::StatusOr<Placement> WorkerPlacementFromEnv(const config::Cluster& cluster,
                                                 const EnvLookup& env) {
  PlacementRequest request;
  request.role = Role::kWorker;
  request.source = AutoSource(Role::kWorker, env);
  if (request.source == PlacementSource::kFlags) {
    TAMP_RETURN_IF_ERROR(CheckTorchrunPair(env));
    return absl::FailedPreconditionError(
        "no placement in the environment: none of TAMP_RANK (`tamp run CONFIG -- COMMAND` sets "
        "it), RANK and WORLD_SIZE (torchrun), SLURM_PROCID (srun) or KUBERNETES_SERVICE_HOST is "
        "set");
  }
  request.num_servers = cluster.num_servers();
  request.num_workers = cluster.num_workers();
  request.flag_servers.assign(cluster.server_addresses().begin(),
                              cluster.server_addresses().end());
  TAMP_ASSIGN_OR_RETURN(const std::optional<uint32_t> base_port,
                        OptionalCount(env, "TAMP_BASE_PORT"));
  request.base_port = base_port.value_or(kDefaultBasePort);
  request.k8s_statefulset = kDefaultK8sName;
  request.k8s_service = kDefaultK8sName;
  return ResolvePlacement(request, env);
}

absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(absl::string_view list) {
  list = absl::StripAsciiWhitespace(list);
  if (list.empty()) return Invalid("host list", "empty");
  std::vector<std::string> hosts;
  for (const std::string& item : SplitTopLevel(list)) {
    if (item.empty()) return Invalid(list, "empty host name");
    TAMP_RETURN_IF_ERROR(ExpandItem(item, hosts));
  }
  return hosts;
}

absl::StatusOr<std::vector<uint32_t>> ExpandSlurmTasksPerNode(absl::string_view list) {
  std::vector<uint32_t> counts;
  for (absl::string_view item : absl::StrSplit(absl::StripAsciiWhitespace(list), ',')) {
    uint32_t count = 0, repeat = 1;
    const size_t paren = item.find("(x");
    const absl::string_view count_text = item.substr(0, paren);
    if (!ParseDigits(count_text, &count)) {
      return Invalid(list, absl::StrCat("bad task count '", item, "'"));
    }
    if (paren != absl::string_view::npos) {
      if (!absl::EndsWith(item, ")") ||
          !ParseDigits(item.substr(paren + 2, item.size() - paren - 3), &repeat) ||
          repeat == 0) {
        return Invalid(list, absl::StrCat("bad repeat in '", item, "'"));
      }
    }
    if (counts.size() + repeat > kMaxHosts) return Invalid(list, "more than 65536 nodes");
    counts.insert(counts.end(), repeat, count);
  }
  return counts;
}

}  // namespace tamp
