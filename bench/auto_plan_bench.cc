// Plans compression.automatic for a config on each of several links and prints one JSON
// object per link: the decision's own time (measurements excluded), the predictions it made,
// the plan's predicted step against every candidate on every tensor, and how many tensors
// each candidate got. bench/auto_plan.py runs it and writes bench/results/auto_plan.json.
//
//   auto_plan_bench CONFIG LINK...   (LINK as `tamp model --bandwidth`: 1gbit, unshaped)
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "job/config.h"
#include "tools/tamp/auto_command.h"
#include "tools/tamp/cpu_time.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: auto_plan_bench CONFIG LINK...\n";
    return 2;
  }
  absl::StatusOr<tamp::config::RunConfig> config = tamp::LoadConfigFile(argv[1]);
  if (!config.ok()) {
    std::cerr << config.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<tamp::perf::Topology> topology =
      tamp::launcher::AutoTopology(config->compression().automatic());
  for (int i = 2; i < argc; ++i) {
    absl::StatusOr<tamp::perf::Link> link = tamp::perf::ParseBandwidth(argv[i]);
    if (!link.ok() || !topology.ok()) {
      std::cerr << (link.ok() ? topology.status() : link.status()).message() << "\n";
      return 2;
    }
    absl::StatusOr<tamp::launcher::AutoResult> result =
        tamp::launcher::ResolveAutomatic(*config, *link, *topology, tamp::AvailableCores());
    if (!result.ok()) {
      std::cerr << result.status().message() << "\n";
      return 1;
    }
    const tamp::launcher::CompressionPlan& plan = result->plan;
    std::vector<int> tensors(plan.uniform_ms.size(), 0);
    for (int c : plan.tensor_candidate) ++tensors[c];
    std::cout << "{\"config\": \"" << argv[1] << "\", \"link\": \"" << argv[i]
              << "\", \"tensors\": " << plan.tensor_candidate.size()
              << ", \"decision_ms\": " << result->decision_ms
              << ", \"decision_cpu_ms\": " << result->decision_cpu_ms
              << ", \"predictions\": " << plan.predictions
              << ", \"auto_ms\": " << plan.prediction.step_ms << ", \"bound\": \""
              << tamp::perf::BoundName(plan.prediction.bound) << "\", \"uniform_ms\": ["
              << absl::StrJoin(plan.uniform_ms, ", ") << "], \"tensors_per_candidate\": ["
              << absl::StrJoin(tensors, ", ") << "]}" << std::endl;
  }
  return 0;
}
