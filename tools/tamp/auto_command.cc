#include "tools/tamp/auto_command.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/cpu_time.h"
#include "base/status_macros.h"
#include "job/chunk_codecs.h"
#include "google/protobuf/text_format.h"
#include "tools/tamp/files.h"
#include "tools/tamp/perf_calibrate.h"
#include "tools/tamp/table.h"
#include "tools/tamp/transport_probe.h"

namespace tamp::launcher {
namespace {

constexpr int kComputeSteps = 10;      // As `tamp model`.
constexpr int kCodecRepetitions = 5;

std::string OneLine(const google::protobuf::Message& message) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string text;
  printer.PrintToString(message, &text);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace

absl::StatusOr<perf::Link> AutoLink(const config::AutoCompression& automatic) {
  absl::StatusOr<perf::Link> link = perf::ParseBandwidth(automatic.bandwidth());
  if (!link.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compression.automatic.bandwidth: ", link.status().message()));
  }
  return link;
}

absl::StatusOr<perf::Topology> AutoTopology(const config::AutoCompression& automatic) {
  if (automatic.topology().empty()) return perf::Topology::kShared;
  absl::StatusOr<perf::Topology> topology = perf::ParseTopology(automatic.topology());
  if (!topology.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compression.automatic.topology: ", topology.status().message()));
  }
  return topology;
}

absl::StatusOr<AutoResult> ResolveAutomatic(const config::RunConfig& config,
                                            const perf::Link& link, perf::Topology topology,
                                            int cores) {
  TAMP_RETURN_IF_ERROR(CheckCandidates(config.compression()));
  const config::AutoCompression& automatic = config.compression().automatic();
  AutoResult result;
  TAMP_ASSIGN_OR_RETURN(result.layout, BuildJobLayout(CandidateConfig(config, 0)));
  const int workers = static_cast<int>(config.cluster().num_workers());
  TAMP_ASSIGN_OR_RETURN(const perf::ComputeProfile compute,
                        perf::MeasureCompute(CandidateConfig(config, 0), result.layout,
                                             std::min(workers, 64), kComputeSteps));
  TAMP_ASSIGN_OR_RETURN(const perf::TransportCpu transport_cpu, perf::MeasureTransportCpu());
  perf::StepInputs base;
  base.num_workers = workers;
  base.num_shards = static_cast<int>(config.cluster().num_servers());
  base.fusion_bytes = config.cluster().fusion_bytes();
  base.compute_ms = compute.step_ms;
  base.compute_on_cpu = compute.on_cpu;
  base.tensor_ready_ms = compute.tensor_ready_ms;
  base.link = link;
  base.topology = topology;
  base.transport = perf::FittedTransport();
  base.cores = cores;
  base.transport_cpu = transport_cpu;
  std::vector<std::vector<perf::ChunkCost>> costs;
  std::vector<std::vector<bool>> unfit(automatic.candidates_size(),
                                       std::vector<bool>(result.layout.tensors.size(), false));
  for (int c = 0; c < automatic.candidates_size(); ++c) {
    config::RunConfig candidate = CandidateConfig(config, c);
    TAMP_ASSIGN_OR_RETURN(JobLayout layout, BuildJobLayout(candidate));
    // Where this candidate's codecs cannot take a tensor, candidate 0's do (then the tensor
    // costs the same on both, and the plan has no reason to move it).
    for (const ChunkPlan& plan : layout.chunks) {
      const absl::Status fits = CheckChunkCodec(layout, plan);
      if (fits.ok() || unfit[c][plan.chunk.tensor]) continue;
      if (c == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "compression.automatic.candidates[0]: ", fits.message(),
            "; candidate 0 must fit every tensor (where another candidate does not, the "
            "tensor stays on candidate 0)"));
      }
      unfit[c][plan.chunk.tensor] = true;
      OverrideTensor(layout.tensor_of(plan).name, automatic.candidates(0), &candidate);
      result.unfit.push_back(absl::StrCat(
          "candidate ", c, " does not fit tensor ", layout.tensor_of(plan).name, " (",
          fits.message(), "): the plan never gives it candidate ", c, ", whose ALL ON IT "
          "figure counts it on candidate 0"));
    }
    if (candidate.compression().tensor_overrides_size() != 0) {
      TAMP_ASSIGN_OR_RETURN(layout, BuildJobLayout(candidate));
    }
    absl::StatusOr<std::vector<perf::ChunkCost>> cost = perf::MeasureChunkCosts(
        candidate, layout, compute.gradient, kCodecRepetitions);
    if (!cost.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("compression.automatic.candidates[", c,
                                                     "]: ", cost.status().message()));
    }
    costs.push_back(*std::move(cost));
  }
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = ThreadCpuMs();
  TAMP_ASSIGN_OR_RETURN(result.plan, PlanCompression(base, costs, automatic.min_gain()));
  // A tensor planned on a candidate that does not fit it was costed as candidate 0: it is.
  for (size_t t = 0; t < result.plan.tensor_candidate.size(); ++t) {
    int& chosen = result.plan.tensor_candidate[t];
    if (unfit[chosen][t]) chosen = 0;
  }
  result.decision_cpu_ms = ThreadCpuMs() - cpu_start;
  result.decision_ms = std::chrono::duration<double, std::milli>(
                           std::chrono::steady_clock::now() - start)
                           .count();
  result.resolved = ApplyPlan(config, result.layout, result.plan);
  return result;
}

std::string FormatPlan(const config::RunConfig& config, const AutoResult& result,
                       const perf::Link& link) {
  const config::AutoCompression& automatic = config.compression().automatic();
  const perf::StepPrediction& p = result.plan.prediction;
  std::string out = absl::StrFormat(
      "auto on %s: predicted step %.2f ms (%s-bound; compute %.2f, encode %.2f, wire %.2f, "
      "decode %.2f, apply %.2f), %.3f MB/step; decided in %.1f ms (%.1f ms CPU, %d "
      "predictions)\n",
      link.name, p.step_ms, perf::BoundName(p.bound), p.compute_ms, p.encode_ms, p.wire_ms,
      p.decode_ms, p.apply_ms, (p.push_bytes + p.pull_bytes) / 1e6, result.decision_ms,
      result.decision_cpu_ms, result.plan.predictions);
  for (const std::string& line : result.unfit) absl::StrAppend(&out, line, "\n");
  if (result.plan.below_min_gain) {
    absl::StrAppendFormat(
        &out,
        "every tensor stays on candidate 0: the best plan found (%.2f ms) saves %.1f%% of its "
        "step, less than compression.automatic.min_gain (%.0f%%)\n",
        result.plan.searched_ms, 100 * (1 - result.plan.searched_ms / p.step_ms),
        100 * automatic.min_gain());
  }
  std::vector<std::vector<std::string>> candidates;
  for (int c = 0; c < automatic.candidates_size(); ++c) {
    const int tensors = static_cast<int>(std::count(result.plan.tensor_candidate.begin(),
                                                    result.plan.tensor_candidate.end(), c));
    candidates.push_back({absl::StrCat(c), absl::StrFormat("%.2f", result.plan.uniform_ms[c]),
                          absl::StrCat(tensors), OneLine(automatic.candidates(c))});
  }
  absl::StrAppend(&out, "\n",
                  FormatTable({"#", "ALL ON IT MS", "TENSORS", "CANDIDATE"}, candidates,
                              {0, 0, 0, 80}));
  std::vector<std::vector<std::string>> tensors;
  for (size_t t = 0; t < result.layout.tensors.size(); ++t) {
    const TensorSpec& tensor = result.layout.tensors[t];
    tensors.push_back({tensor.name, absl::StrCat("[", absl::StrJoin(tensor.shape, ", "), "]"),
                       absl::StrFormat("%.3f", tensor.elements() * 4 / 1e6),
                       absl::StrCat(result.plan.tensor_candidate[t])});
  }
  absl::StrAppend(&out, "\n",
                  FormatTable({"TENSOR", "SHAPE", "RAW MB", "CANDIDATE"}, tensors, {0, 0, 0, 0}),
                  "\nALL ON IT MS: the predicted step with every tensor on that candidate (one "
                  "it does not fit: on candidate 0). "
                  "Chunks below compression.min_compress_bytes go raw whatever the plan.\n");
  return out;
}

absl::Status WriteResolvedConfig(const AutoResult& result, const std::string& path,
                                 absl::string_view writer) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(result.resolved, &text);
  return WriteFileAtomically(
      path, absl::StrCat("# compression.automatic resolved by ", writer, " (docs/auto.md)\n",
                         text));
}

}  // namespace tamp::launcher
