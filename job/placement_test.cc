#include "job/placement.h"

#include <map>
#include <utility>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"

namespace tamp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

PlacementRequest Request(Role role, uint32_t servers, uint32_t workers) {
  PlacementRequest request;
  request.role = role;
  request.num_servers = servers;
  request.num_workers = workers;
  request.base_port = 29500;
  request.k8s_statefulset = "tamp-server";
  request.k8s_service = "tamp-servers";
  return request;
}

TEST(SlurmHostListTest, ExpandsRangesWithTheirWidthAndPlainNames) {
  EXPECT_THAT(*ExpandSlurmHostList("node[01-03,7],gpu-a"),
              ElementsAre("node01", "node02", "node03", "node7", "gpu-a"));
  EXPECT_THAT(*ExpandSlurmHostList("r[1-2]n[08-10]"),
              ElementsAre("r1n08", "r1n09", "r1n10", "r2n08", "r2n09", "r2n10"));
  EXPECT_THAT(*ExpandSlurmHostList("solo"), ElementsAre("solo"));
}

TEST(SlurmHostListTest, RefusesMalformedLists) {
  for (const char* bad : {"", "node[1-", "node[3-1]", "node]1[", "a,,b", "n[x-2]",
                          "n[0-99999999]", "n[1-2] ,w", "n[+1-2]", "a b"}) {
    EXPECT_FALSE(ExpandSlurmHostList(bad).ok()) << bad;
  }
}

TEST(SlurmTasksPerNodeTest, ExpandsRepeats) {
  EXPECT_THAT(*ExpandSlurmTasksPerNode("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(*ExpandSlurmTasksPerNode("4"), ElementsAre(4));
  for (const char* bad : {"", "2(x0)", "2(x3", "x", "2(y3)", "+1(x5)", "2(x 3)", "1 ,2"}) {
    EXPECT_FALSE(ExpandSlurmTasksPerNode(bad).ok()) << bad;
  }
}

TEST(PlacementTest, SlurmFirstTasksAreServersOnTheirBlockNodes) {
  // 2 servers + 3 workers over two nodes, 3 tasks on the first and 2 on the second.
  const std::map<std::string, std::string> base = {
      {"SLURM_STEP_NUM_TASKS", "5"},
      {"SLURM_STEP_NODELIST", "n[1-2]"},
      {"SLURM_STEP_TASKS_PER_NODE", "3,2"}};
  std::map<std::string, std::string> env = base;
  env["SLURM_PROCID"] = "1";
  absl::StatusOr<Placement> server = ResolvePlacement(Request(Role::kServer, 2, 3), FakeEnv(env));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(server->source, "slurm");
  EXPECT_EQ(server->rank, 1u);
  // Workers dial n1, whose name may resolve to a loopback alias on n1 itself: every
  // interface listens.
  EXPECT_EQ(server->listen_host, "0.0.0.0");
  EXPECT_EQ(server->listen_port, 29501u);
  EXPECT_THAT(server->servers, ElementsAre("n1:29500", "n1:29501"));
  // One node named as loopback (tests, a laptop): loopback only.
  std::map<std::string, std::string> local = env;
  local["SLURM_STEP_NODELIST"] = "localhost";
  local["SLURM_STEP_TASKS_PER_NODE"] = "5";
  absl::StatusOr<Placement> local_server =
      ResolvePlacement(Request(Role::kServer, 2, 3), FakeEnv(local));
  ASSERT_TRUE(local_server.ok()) << local_server.status();
  EXPECT_EQ(local_server->listen_host, "localhost");

  env["SLURM_PROCID"] = "4";
  absl::StatusOr<Placement> worker = ResolvePlacement(Request(Role::kWorker, 2, 3), FakeEnv(env));
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->role, Role::kWorker);
  EXPECT_EQ(worker->rank, 2u);
  EXPECT_EQ(worker->local_rank, 1u);  // Worker 1 (task 3) is before it on n2.
  EXPECT_THAT(worker->servers, ElementsAre("n1:29500", "n1:29501"));

  env["SLURM_PROCID"] = "2";  // Worker 0 shares n1 with the servers only.
  EXPECT_EQ(ResolvePlacement(Request(Role::kWorker, 2, 3), FakeEnv(env))->local_rank, 0u);
}

TEST(PlacementTest, SlurmServersSpreadOverNodesGetTheirNodesAddress) {
  std::map<std::string, std::string> env = {{"SLURM_PROCID", "0"},
                                            {"SLURM_NTASKS", "4"},
                                            {"SLURM_JOB_NODELIST", "a,b"},
                                            {"SLURM_TASKS_PER_NODE", "1,3"}};
  absl::StatusOr<Placement> worker = ResolvePlacement(Request(Role::kServer, 2, 2), FakeEnv(env));
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_THAT(worker->servers, ElementsAre("a:29500", "b:29501"));
}

TEST(PlacementTest, SlurmErrorsNameTheVariable) {
  std::map<std::string, std::string> env = {{"SLURM_PROCID", "0"},
                                            {"SLURM_NTASKS", "3"},
                                            {"SLURM_JOB_NODELIST", "a"},
                                            {"SLURM_TASKS_PER_NODE", "3"}};
  absl::StatusOr<Placement> placement =
      ResolvePlacement(Request(Role::kServer, 2, 2), FakeEnv(env));
  EXPECT_THAT(placement.status().message(), HasSubstr("SLURM_NTASKS is 3"));
  EXPECT_THAT(placement.status().message(), HasSubstr("= 4 tasks"));

  env["SLURM_NTASKS"] = "4";
  env["SLURM_PROCID"] = "3";
  placement = ResolvePlacement(Request(Role::kServer, 2, 2), FakeEnv(env));
  EXPECT_THAT(placement.status().message(), HasSubstr("places 3 tasks but SLURM_NTASKS is 4"));

  env["SLURM_TASKS_PER_NODE"] = "4";
  placement = ResolvePlacement(Request(Role::kServer, 2, 2), FakeEnv(env));
  EXPECT_THAT(placement.status().message(), HasSubstr("is a worker"));

  env["SLURM_DISTRIBUTION"] = "cyclic";
  placement = ResolvePlacement(Request(Role::kWorker, 2, 2), FakeEnv(env));
  EXPECT_THAT(placement.status().message(), HasSubstr("--distribution=block"));

  env.erase("SLURM_DISTRIBUTION");
  env.erase("SLURM_JOB_NODELIST");
  placement = ResolvePlacement(Request(Role::kWorker, 2, 2), FakeEnv(env));
  EXPECT_THAT(placement.status().message(), HasSubstr("SLURM_JOB_NODELIST"));
}

TEST(PlacementTest, KubernetesServersFromPodOrdinalWorkersFromCompletionIndex) {
  absl::StatusOr<Placement> server = ResolvePlacement(
      Request(Role::kServer, 3, 2),
      FakeEnv({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"HOSTNAME", "tamp-server-2"}}));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(server->source, "kubernetes");
  EXPECT_EQ(server->rank, 2u);
  EXPECT_EQ(server->listen_host, "0.0.0.0");
  EXPECT_EQ(server->listen_port, 29500u);
  EXPECT_THAT(server->servers,
              ElementsAre("tamp-server-0.tamp-servers:29500", "tamp-server-1.tamp-servers:29500",
                          "tamp-server-2.tamp-servers:29500"));

  absl::StatusOr<Placement> worker = ResolvePlacement(
      Request(Role::kWorker, 3, 2),
      FakeEnv({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"JOB_COMPLETION_INDEX", "1"}}));
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->rank, 1u);
}

TEST(PlacementTest, KubernetesErrorsNameWhatIsWrong) {
  const std::map<std::string, std::string> k8s = {{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}};
  std::map<std::string, std::string> env = k8s;
  env["HOSTNAME"] = "other-0";
  EXPECT_THAT(ResolvePlacement(Request(Role::kServer, 2, 2), FakeEnv(env)).status().message(),
              HasSubstr("not a pod of StatefulSet 'tamp-server'"));
  env["HOSTNAME"] = "tamp-server-5";
  EXPECT_THAT(ResolvePlacement(Request(Role::kServer, 2, 2), FakeEnv(env)).status().message(),
              HasSubstr("cluster.num_servers 2"));
  EXPECT_THAT(ResolvePlacement(Request(Role::kWorker, 2, 2), FakeEnv(k8s)).status().message(),
              HasSubstr("completionMode: Indexed"));
  env = k8s;
  env["JOB_COMPLETION_INDEX"] = "-1";
  EXPECT_THAT(ResolvePlacement(Request(Role::kWorker, 2, 2), FakeEnv(env)).status().message(),
              HasSubstr("JOB_COMPLETION_INDEX"));
}

TEST(PlacementTest, FlagsWhenNoEngineIsFound) {
  PlacementRequest request = Request(Role::kWorker, 2, 2);
  request.flag_rank = 1;
  request.flag_servers = {"h:1", "h:2"};
  absl::StatusOr<Placement> placement = ResolvePlacement(request, FakeEnv({}));
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->source, "flags");
  EXPECT_EQ(placement->rank, 1u);
  EXPECT_THAT(placement->servers, ElementsAre("h:1", "h:2"));
  request.flag_rank = 2;
  EXPECT_THAT(ResolvePlacement(request, FakeEnv({})).status().message(),
              HasSubstr("cluster.num_workers 2"));
  // An explicit source wins over what the environment suggests.
  request.flag_rank = 0;
  request.source = PlacementSource::kFlags;
  EXPECT_EQ(ResolvePlacement(request, FakeEnv({{"SLURM_PROCID", "3"}}))->source, "flags");
  // --servers is checked as TAMP_SERVERS is (it waited 10 s on '127.0.0.1' for a server).
  for (const auto& [servers, refusal] :
       std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"127.0.0.1", "h:2"}, "--servers: '127.0.0.1' is not host:port"},
           {{"h:1", "h:70000"}, "--servers: 'h:70000' is not host:port"},
           {{"h:1", "h:1"}, "--servers: 'h:1' is given twice (servers 0 and 1)"},
           {{"h:1"}, "--servers: names 1 server but cluster.num_servers is 2"}}) {
    request.flag_servers = servers;
    const absl::Status refused = ResolvePlacement(request, FakeEnv({})).status();
    EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
    EXPECT_THAT(refused.message(), HasSubstr(refusal));
  }
}

// An operator's --rank inside a shell that torchrun or srun placed: refused when the
// environment's rank differs (both workers took rank 1 and waited on each other, silently).
TEST(PlacementTest, AGivenRankThatTheEnvironmentOverrulesIsRefused) {
  PlacementRequest request = Request(Role::kWorker, 2, 2);
  request.flag_rank = 0;
  request.flag_servers = {"h:1", "h:2"};
  request.rank_flag_given = true;
  const EnvLookup torchrun = FakeEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  const absl::Status refused = ResolvePlacement(request, torchrun).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(),
            "--rank=0 disagrees with rank 1 from the torchrun placement in the environment, "
            "which --placement=auto takes: pass --placement=flags to place by the flags, or "
            "leave --rank out");
  request.flag_rank = 1;  // The same rank: nothing to refuse.
  EXPECT_EQ(ResolvePlacement(request, torchrun)->rank, 1u);
  request.flag_rank = 0;
  request.rank_flag_given = false;  // The flag's default: the environment decides.
  EXPECT_EQ(ResolvePlacement(request, torchrun)->rank, 1u);
  request.rank_flag_given = true;
  request.source = PlacementSource::kFlags;
  EXPECT_EQ(ResolvePlacement(request, torchrun)->rank, 0u);
}

config::Cluster Cluster(uint32_t servers, uint32_t workers,
                        std::vector<std::string> addresses = {}) {
  config::Cluster cluster;
  cluster.set_num_servers(servers);
  cluster.set_num_workers(workers);
  for (std::string& address : addresses) cluster.add_server_addresses(std::move(address));
  return cluster;
}

TEST(WorkerPlacementTest, TampRunVariablesComeFirst) {
  // SLURM_PROCID and RANK too: `tamp run` inside an allocation still places its own workers.
  const std::map<std::string, std::string> env = {
      {"TAMP_RANK", "1"},        {"TAMP_NUM_WORKERS", "2"}, {"TAMP_LOCAL_RANK", "1"},
      {"TAMP_SERVERS", "h:1, h:2"}, {"SLURM_PROCID", "0"},  {"RANK", "0"},
      {"WORLD_SIZE", "2"}};
  absl::StatusOr<Placement> placement = WorkerPlacementFromEnv(Cluster(2, 2), FakeEnv(env));
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->source, "tamp");
  EXPECT_EQ(placement->role, Role::kWorker);
  EXPECT_EQ(placement->rank, 1u);
  EXPECT_EQ(placement->local_rank, 1u);
  EXPECT_THAT(placement->servers, ElementsAre("h:1", "h:2"));

  // Set by hand, TAMP_RANK alone is enough when the config names the servers.
  placement = WorkerPlacementFromEnv(Cluster(2, 2, {"c:1", "c:2"}), FakeEnv({{"TAMP_RANK", "0"}}));
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->rank, 0u);
  EXPECT_EQ(placement->local_rank, 0u);
  EXPECT_THAT(placement->servers, ElementsAre("c:1", "c:2"));
}

TEST(WorkerPlacementTest, TampRunErrorsNameTheVariable) {
  auto error = [](std::map<std::string, std::string> env) {
    env.emplace("TAMP_SERVERS", "h:1,h:2");
    return std::string(WorkerPlacementFromEnv(Cluster(2, 4), FakeEnv(env)).status().message());
  };
  EXPECT_EQ(error({{"TAMP_RANK", "5"}}), "TAMP_RANK: 5 is not below cluster.num_workers (4)");
  EXPECT_EQ(error({{"TAMP_RANK", "4"}}), "TAMP_RANK: 4 is not below cluster.num_workers (4)");
  EXPECT_EQ(error({{"TAMP_RANK", "1"}, {"TAMP_NUM_WORKERS", "3"}}),
            "TAMP_NUM_WORKERS=3 disagrees with cluster.num_workers=4");
  EXPECT_THAT(error({{"TAMP_RANK", "one"}}), HasSubstr("TAMP_RANK: 'one' is not a"));
  EXPECT_THAT(error({{"TAMP_RANK", "1"}, {"TAMP_LOCAL_RANK", "-1"}}),
              HasSubstr("TAMP_LOCAL_RANK: '-1'"));
  EXPECT_EQ(error({{"TAMP_RANK", "1"}, {"TAMP_SERVERS", "h:1"}}),
            "TAMP_SERVERS: names 1 server but cluster.num_servers is 2");
}

TEST(WorkerPlacementTest, TorchrunVariablesWithServersFromTheConfigOrTampServers) {
  std::map<std::string, std::string> env = {
      {"RANK", "2"}, {"WORLD_SIZE", "3"}, {"LOCAL_RANK", "0"}, {"SLURM_PROCID", "7"}};
  absl::StatusOr<Placement> placement =
      WorkerPlacementFromEnv(Cluster(1, 3, {"ps:7000"}), FakeEnv(env));
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->source, "torchrun");
  EXPECT_EQ(placement->rank, 2u);
  EXPECT_EQ(placement->local_rank, 0u);
  EXPECT_THAT(placement->servers, ElementsAre("ps:7000"));

  env["TAMP_SERVERS"] = "other:7001";
  env["LOCAL_RANK"] = "2";
  placement = WorkerPlacementFromEnv(Cluster(1, 3, {"ps:7000"}), FakeEnv(env));
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->local_rank, 2u);
  EXPECT_THAT(placement->servers, ElementsAre("other:7001"));
}

TEST(WorkerPlacementTest, TorchrunErrorsNameTheVariable) {
  auto error = [](std::map<std::string, std::string> env, config::Cluster cluster) {
    return std::string(WorkerPlacementFromEnv(cluster, FakeEnv(env)).status().message());
  };
  EXPECT_EQ(error({{"RANK", "0"}, {"WORLD_SIZE", "3"}}, Cluster(1, 4, {"ps:1"})),
            "WORLD_SIZE=3 disagrees with cluster.num_workers=4");
  EXPECT_EQ(error({{"RANK", "4"}, {"WORLD_SIZE", "4"}}, Cluster(1, 4, {"ps:1"})),
            "RANK: 4 is not below WORLD_SIZE (4)");
  EXPECT_THAT(error({{"RANK", "0"}, {"WORLD_SIZE", "4"}}, Cluster(1, 4)),
              HasSubstr("TAMP_SERVERS is not set"));
  EXPECT_THAT(error({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"TAMP_SERVERS", "a:1,,b:2"}},
                    Cluster(2, 4)),
              HasSubstr("TAMP_SERVERS: empty address in 'a:1,,b:2'"));
  EXPECT_THAT(error({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"TAMP_SERVERS", "a:1,b"}},
                    Cluster(2, 4)),
              HasSubstr("TAMP_SERVERS: 'b' is not host:port"));
  EXPECT_THAT(error({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"TAMP_SERVERS", ""}}, Cluster(1, 4)),
              HasSubstr("TAMP_SERVERS is empty"));
  EXPECT_EQ(error({{"RANK", "0"}}, Cluster(1, 4, {"ps:1"})),
            "RANK is set but WORLD_SIZE is not: torchrun's placement needs both");
  EXPECT_EQ(error({{"WORLD_SIZE", "4"}}, Cluster(1, 4, {"ps:1"})),
            "WORLD_SIZE is set but RANK is not: torchrun's placement needs both");
}

TEST(WorkerPlacementTest, ClusterEnginesAfterTheLaunchers) {
  absl::StatusOr<Placement> slurm = WorkerPlacementFromEnv(
      Cluster(1, 2), FakeEnv({{"SLURM_PROCID", "2"},
                              {"SLURM_NTASKS", "3"},
                              {"SLURM_JOB_NODELIST", "a,b"},
                              {"SLURM_TASKS_PER_NODE", "1,2"},
                              {"TAMP_BASE_PORT", "31000"}}));
  ASSERT_TRUE(slurm.ok()) << slurm.status();
  EXPECT_EQ(slurm->source, "slurm");
  EXPECT_EQ(slurm->rank, 1u);
  EXPECT_EQ(slurm->local_rank, 1u);
  EXPECT_THAT(slurm->servers, ElementsAre("a:31000"));

  absl::StatusOr<Placement> k8s = WorkerPlacementFromEnv(
      Cluster(2, 2),
      FakeEnv({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"JOB_COMPLETION_INDEX", "1"}}));
  ASSERT_TRUE(k8s.ok()) << k8s.status();
  EXPECT_EQ(k8s->source, "kubernetes");
  EXPECT_EQ(k8s->rank, 1u);
  EXPECT_THAT(k8s->servers,
              ElementsAre("tamp-server-0.tamp-server:29500", "tamp-server-1.tamp-server:29500"));

  absl::StatusOr<Placement> none = WorkerPlacementFromEnv(Cluster(1, 2, {"ps:1"}), FakeEnv({}));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("no placement in the environment"));
}

TEST(WorkerPlacementTest, ConfigPathFromTampConfig) {
  EXPECT_EQ(*WorkerConfigPathFromEnv(FakeEnv({{"TAMP_CONFIG", "/jobs/a.pbtxt"}})),
            "/jobs/a.pbtxt");
  absl::StatusOr<std::string> missing = WorkerConfigPathFromEnv(FakeEnv({{"TAMP_CONFIG", ""}}));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr("TAMP_CONFIG is not set"));
}

TEST(WorkerPlacementTest, RestartedFromTampRestart) {
  EXPECT_FALSE(*WorkerRestartedFromEnv(FakeEnv({})));
  EXPECT_FALSE(*WorkerRestartedFromEnv(FakeEnv({{"TAMP_RESTART", ""}})));
  EXPECT_FALSE(*WorkerRestartedFromEnv(FakeEnv({{"TAMP_RESTART", "0"}})));
  EXPECT_TRUE(*WorkerRestartedFromEnv(FakeEnv({{"TAMP_RESTART", "1"}})));
  EXPECT_TRUE(*WorkerRestartedFromEnv(FakeEnv({{"TAMP_RESTART", "12"}})));
  for (const char* wrong : {"abc", "-1", "1.5", " 1", "+1", "1 ", "99999999999"}) {
    absl::StatusOr<bool> restarted = WorkerRestartedFromEnv(FakeEnv({{"TAMP_RESTART", wrong}}));
    EXPECT_EQ(restarted.status().code(), absl::StatusCode::kInvalidArgument) << wrong;
    EXPECT_THAT(restarted.status().message(),
                HasSubstr(std::string("TAMP_RESTART=") + wrong + ": must be a whole number"));
  }
}

TEST(PlacementTest, NumbersAreDigitsAlone) {
  // What no engine writes is a script's mistake: said, not read as the number.
  const std::map<std::string, std::string> slurm = {{"SLURM_STEP_NUM_TASKS", "4"},
                                                    {"SLURM_STEP_NODELIST", "localhost"},
                                                    {"SLURM_STEP_TASKS_PER_NODE", "4"}};
  for (const char* procid : {" 1", "+1", "1 ", "one"}) {
    std::map<std::string, std::string> env = slurm;
    env["SLURM_PROCID"] = procid;
    absl::StatusOr<Placement> placement =
        ResolvePlacement(Request(Role::kServer, 2, 2), FakeEnv(env));
    EXPECT_EQ(placement.status().code(), absl::StatusCode::kInvalidArgument) << procid;
    EXPECT_THAT(placement.status().message(), HasSubstr("SLURM_PROCID")) << procid;
  }
}

TEST(PlacementTest, HalfOfTorchrunsPairIsRefusedWhereTheFlagsWouldPlace) {
  PlacementRequest worker = Request(Role::kWorker, 1, 2);
  worker.flag_servers = {"f:1"};
  absl::StatusOr<Placement> placement = ResolvePlacement(worker, FakeEnv({{"RANK", "1"}}));
  EXPECT_EQ(placement.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(placement.status().message(),
              HasSubstr("RANK is set but WORLD_SIZE is not: torchrun's placement needs both "
                        "(--placement=flags places by the flags alone)"));
  worker.source = PlacementSource::kFlags;  // Asked for: the flags alone.
  EXPECT_TRUE(ResolvePlacement(worker, FakeEnv({{"RANK", "1"}})).ok());
}

TEST(PlacementTest, LaunchersPlaceWorkersOnly) {
  // tamp_worker under `tamp run -- ...` or torchrun picks them in auto; --servers is the
  // fallback for the addresses.
  PlacementRequest worker = Request(Role::kWorker, 1, 2);
  worker.flag_servers = {"f:1"};
  absl::StatusOr<Placement> placement = ResolvePlacement(worker, FakeEnv({{"TAMP_RANK", "1"}}));
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->source, "tamp");
  EXPECT_THAT(placement->servers, ElementsAre("f:1"));
  EXPECT_EQ(ResolvePlacement(worker, FakeEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}}))->source,
            "torchrun");
  // RANK without WORLD_SIZE is not torchrun's, and refused (HalfOfTorchrunsPair...).
  EXPECT_FALSE(ResolvePlacement(worker, FakeEnv({{"RANK", "1"}})).ok());

  // A server ignores them in auto and refuses them when asked.
  PlacementRequest server = Request(Role::kServer, 1, 2);
  EXPECT_EQ(ResolvePlacement(server, FakeEnv({{"TAMP_RANK", "0"}, {"RANK", "0"},
                                              {"WORLD_SIZE", "2"}}))
                ->source,
            "flags");
  server.source = PlacementSource::kTorchrun;
  EXPECT_THAT(ResolvePlacement(server, FakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}}))
                  .status()
                  .message(),
              HasSubstr("torchrun places workers only"));
}

TEST(PlacementTest, HalfOfTorchrunsPairIsNamed) {
  EXPECT_TRUE(CheckTorchrunPair(FakeEnv({})).ok());
  EXPECT_TRUE(CheckTorchrunPair(FakeEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}})).ok());
  EXPECT_EQ(CheckTorchrunPair(FakeEnv({{"RANK", "0"}})).message(),
            "RANK is set but WORLD_SIZE is not: torchrun's placement needs both");
  EXPECT_EQ(CheckTorchrunPair(FakeEnv({{"WORLD_SIZE", "2"}})).message(),
            "WORLD_SIZE is set but RANK is not: torchrun's placement needs both");
}

TEST(PlacementTest, ParsesSources) {
  EXPECT_EQ(*ParsePlacementSource("tamp"), PlacementSource::kTampEnv);
  EXPECT_EQ(*ParsePlacementSource("torchrun"), PlacementSource::kTorchrun);
  EXPECT_EQ(*ParsePlacementSource("slurm"), PlacementSource::kSlurm);
  EXPECT_EQ(*ParsePlacementSource("kubernetes"), PlacementSource::kKubernetes);
  EXPECT_THAT(ParsePlacementSource("k8s").status().message(), HasSubstr("'k8s'"));
}

}  // namespace
}  // namespace tamp
