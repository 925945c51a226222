#include "common/placement.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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
                          "n[0-99999999]"}) {
    EXPECT_FALSE(ExpandSlurmHostList(bad).ok()) << bad;
  }
}

TEST(SlurmTasksPerNodeTest, ExpandsRepeats) {
  EXPECT_THAT(*ExpandSlurmTasksPerNode("2(x3),1"), ElementsAre(2, 2, 2, 1));
  EXPECT_THAT(*ExpandSlurmTasksPerNode("4"), ElementsAre(4));
  for (const char* bad : {"", "2(x0)", "2(x3", "x", "2(y3)"}) {
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
  EXPECT_EQ(server->listen_host, "n1");
  EXPECT_EQ(server->listen_port, 29501u);
  EXPECT_THAT(server->servers, ElementsAre("n1:29500", "n1:29501"));

  env["SLURM_PROCID"] = "4";
  absl::StatusOr<Placement> worker = ResolvePlacement(Request(Role::kWorker, 2, 3), FakeEnv(env));
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(worker->role, Role::kWorker);
  EXPECT_EQ(worker->rank, 2u);
  EXPECT_THAT(worker->servers, ElementsAre("n1:29500", "n1:29501"));
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
}

TEST(PlacementTest, ParsesSources) {
  EXPECT_EQ(*ParsePlacementSource("slurm"), PlacementSource::kSlurm);
  EXPECT_EQ(*ParsePlacementSource("kubernetes"), PlacementSource::kKubernetes);
  EXPECT_THAT(ParsePlacementSource("k8s").status().message(), HasSubstr("'k8s'"));
}

}  // namespace
}  // namespace tamp
