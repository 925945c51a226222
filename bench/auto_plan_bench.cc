// Plans compression.automatic for a config on each of several links and prints one JSON
// object per link: the decision's own time (measurements excluded), the predictions it made,
// the plan's predicted step against every candidate on every tensor, and how many tensors
// each candidate got, an events::AutoPlanPrediction. bench/auto_plan.py runs it and writes
// bench/results/auto_plan.json.
//
//   auto_plan_bench CONFIG LINK...   (LINK as `tamp model --bandwidth`: 1gbit, unshaped)
#include <iostream>
#include <string>

#include "base/cpu_time.h"
#include "base/proto_json.h"
#include "job/config.h"
#include "proto/events.pb.h"
#include "tools/tamp/auto_command.h"
#include "tools/tamp/summary.h"

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
    tamp::events::AutoPlanPrediction line;
    line.set_format_version(tamp::launcher::kJsonFormatVersion);
    line.set_config(argv[1]);
    line.set_link(argv[i]);
    line.set_tensors(plan.tensor_candidate.size());
    line.set_decision_ms(result->decision_ms);
    line.set_decision_cpu_ms(result->decision_cpu_ms);
    line.set_predictions(plan.predictions);
    line.set_auto_ms(plan.prediction.step_ms);
    line.set_bound(std::string(tamp::perf::BoundName(plan.prediction.bound)));
    for (double ms : plan.uniform_ms) line.add_uniform_ms(ms);
    line.mutable_tensors_per_candidate()->Resize(plan.uniform_ms.size(), 0);
    for (int c : plan.tensor_candidate) ++*line.mutable_tensors_per_candidate()->Mutable(c);
    if (plan.below_min_gain) line.set_searched_ms(plan.searched_ms);
    std::cout << tamp::ProtoToJson(line) << std::endl;
  }
  return 0;
}
