#include "tools/tamp/auto_plan.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "tools/tamp/convergence_table.h"

namespace tamp::launcher {
namespace {

// Codec names and memories as config loading fills them in, so equal settings compare equal.
config::ChunkCompression Normalized(config::ChunkCompression compression) {
  for (config::Codec* codec : {compression.mutable_push(), compression.mutable_pull()}) {
    if (codec->name().empty()) codec->set_name("none");
  }
  return compression;
}

bool IsNone(const config::ChunkCompression& compression) {
  return compression.push().name() == "none" && compression.pull().name() == "none" &&
         compression.push_feedback().kind() == config::ErrorFeedback::NONE &&
         compression.pull_feedback().kind() == config::ErrorFeedback::NONE;
}

std::string OneLine(const google::protobuf::Message& message) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string text;
  printer.PrintToString(message, &text);
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace

absl::Status CheckCandidates(const config::Compression& compression) {
  if (compression.shard_overrides_size() != 0 || compression.tensor_overrides_size() != 0) {
    return absl::InvalidArgumentError(
        "compression.automatic: writes the tensor overrides itself; remove shard_overrides "
        "and tensor_overrides");
  }
  const config::AutoCompression& automatic = compression.automatic();
  if (automatic.candidates_size() == 0) {
    return absl::InvalidArgumentError("compression.automatic.candidates: is empty");
  }
  for (int i = 0; i < automatic.candidates_size(); ++i) {
    const config::ChunkCompression candidate = Normalized(automatic.candidates(i));
    const std::string field = absl::StrCat("compression.automatic.candidates[", i, "] {",
                                           OneLine(candidate), "}");
    if (IsNone(candidate)) continue;
    int measured = 0;
    std::vector<std::string> other_optimizer;  // Rows of these settings auto cannot judge by.
    for (const ConvergenceRow& row : ConvergenceRows()) {
      config::ChunkCompression parsed;
      if (!google::protobuf::TextFormat::ParseFromString(row.compression, &parsed)) continue;
      if (!google::protobuf::util::MessageDifferencer::Equivalent(Normalized(parsed),
                                                                  candidate)) {
        continue;
      }
      if (!row.reference_optimizer) {
        other_optimizer.push_back(absl::StrCat(row.model, "_", row.row));
        continue;
      }
      ++measured;
      const double loss = row.none_accuracy - row.final_accuracy;
      if (loss > kMaxAccuracyLoss) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: loses %.2f points of test accuracy in bench/results/convergence.json (row "
            "%s_%s: %.4f against %.4f without compression); auto allows at most %.0f",
            field, 100 * loss, row.model, row.row, row.final_accuracy, row.none_accuracy,
            100 * kMaxAccuracyLoss));
      }
    }
    if (measured == 0 && !other_optimizer.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": measured in bench/results/convergence.json only under another optimizer "
                 "than its model's uncompressed run (",
          absl::StrJoin(other_optimizer, ", "),
          "; DGC's rows run the servers without momentum, which DGC keeps on the workers), "
          "so auto cannot tell what it costs at the reference settings (docs/auto.md)"));
    }
    if (measured == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": not measured in bench/results/convergence.json, so auto cannot tell what "
                 "it costs in accuracy; use a measured row's settings (docs/convergence.md)"));
    }
  }
  return absl::OkStatus();
}

config::RunConfig CandidateConfig(const config::RunConfig& config, int index) {
  config::RunConfig candidate = config;
  config::Compression& compression = *candidate.mutable_compression();
  *compression.mutable_default_compression() = compression.automatic().candidates(index);
  compression.clear_automatic();
  return candidate;
}

absl::StatusOr<CompressionPlan> PlanCompression(
    const perf::StepInputs& base, const std::vector<std::vector<perf::ChunkCost>>& costs,
    double min_gain) {
  if (costs.empty()) return absl::InvalidArgumentError("no candidates to plan with");
  if (!(min_gain >= 0 && min_gain < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_gain is ", min_gain, "; a share of the step in [0, 1)"));
  }
  const size_t num_chunks = costs[0].size();
  for (const auto& candidate : costs) {
    if (candidate.size() != num_chunks) {
      return absl::InvalidArgumentError("the candidates' chunk lists differ in length");
    }
    for (size_t i = 0; i < num_chunks; ++i) {
      if (candidate[i].tensor != costs[0][i].tensor) {
        return absl::InvalidArgumentError("the candidates' chunk lists differ in tensors");
      }
    }
  }
  const size_t num_tensors = base.tensor_ready_ms.size();
  std::vector<std::vector<size_t>> chunks_of(num_tensors);
  for (size_t i = 0; i < num_chunks; ++i) {
    if (costs[0][i].tensor >= num_tensors) {
      return absl::InvalidArgumentError("a chunk names a tensor that does not exist");
    }
    chunks_of[costs[0][i].tensor].push_back(i);
  }

  CompressionPlan plan;
  perf::StepInputs inputs = base;
  inputs.chunks = costs[0];
  auto predict = [&]() -> absl::StatusOr<perf::StepPrediction> {
    ++plan.predictions;
    return perf::PredictStep(inputs);
  };
  auto assign = [&](size_t tensor, int c) {
    for (size_t i : chunks_of[tensor]) inputs.chunks[i] = costs[c][i];
  };

  // The best uniform plan.
  int best = 0;
  perf::StepPrediction best_prediction, first_prediction;
  for (size_t c = 0; c < costs.size(); ++c) {
    inputs.chunks = costs[c];
    absl::StatusOr<perf::StepPrediction> predicted = predict();
    if (!predicted.ok()) return predicted.status();
    if (c == 0) first_prediction = *predicted;
    plan.uniform_ms.push_back(predicted->step_ms);
    if (c == 0 || predicted->step_ms < best_prediction.step_ms - kTieMs) {
      best = static_cast<int>(c);
      best_prediction = *predicted;
    }
  }
  plan.tensor_candidate.assign(num_tensors, best);
  inputs.chunks = costs[best];

  // One pass over the tensors, largest first; the small ones (below kSmallTensorBytes raw)
  // move together, as one group after the others.
  std::vector<uint64_t> bytes(num_tensors, 0);
  for (size_t i = 0; i < num_chunks; ++i) {
    bytes[costs[0][i].tensor] += costs[0][i].rounds[0].push_bytes + costs[0][i].pull_bytes;
  }
  auto same_everywhere = [&](size_t tensor) {
    for (size_t i : chunks_of[tensor]) {
      for (const auto& candidate : costs) {
        const perf::ChunkCost& a = candidate[i];
        const perf::ChunkCost& b = costs[0][i];
        if (a.rounds.size() != b.rounds.size() || a.pull_bytes != b.pull_bytes ||
            a.rounds[0].push_bytes != b.rounds[0].push_bytes ||
            a.rounds[0].encode_ms != b.rounds[0].encode_ms) {
          return false;
        }
      }
    }
    return true;
  };
  std::vector<std::vector<size_t>> groups;
  std::vector<size_t> small;
  for (size_t tensor = 0; tensor < num_tensors; ++tensor) {
    if (costs.size() == 1 || same_everywhere(tensor)) continue;
    if (bytes[tensor] < 2 * kSmallTensorBytes) {  // Push and pull, raw.
      small.push_back(tensor);
    } else {
      groups.push_back({tensor});
    }
  }
  std::stable_sort(groups.begin(), groups.end(), [&](const auto& a, const auto& b) {
    return bytes[a[0]] > bytes[b[0]];
  });
  if (!small.empty()) groups.push_back(small);
  for (const std::vector<size_t>& group : groups) {
    const int current = plan.tensor_candidate[group[0]];
    int chosen = current;
    for (size_t c = 0; c < costs.size(); ++c) {
      if (static_cast<int>(c) == current) continue;
      for (size_t tensor : group) assign(tensor, static_cast<int>(c));
      absl::StatusOr<perf::StepPrediction> predicted = predict();
      if (!predicted.ok()) return predicted.status();
      const bool earlier = static_cast<int>(c) < chosen;
      if (predicted->step_ms < best_prediction.step_ms - kTieMs ||
          (earlier && predicted->step_ms <= best_prediction.step_ms + kTieMs)) {
        chosen = static_cast<int>(c);
        best_prediction = *predicted;
      }
    }
    for (size_t tensor : group) {
      plan.tensor_candidate[tensor] = chosen;
      assign(tensor, chosen);
    }
  }
  plan.prediction = best_prediction;
  if (best_prediction.step_ms > (1 - min_gain) * first_prediction.step_ms) {
    plan.below_min_gain = std::any_of(plan.tensor_candidate.begin(),
                                      plan.tensor_candidate.end(), [](int c) { return c != 0; });
    plan.searched_ms = best_prediction.step_ms;
    plan.tensor_candidate.assign(num_tensors, 0);
    plan.prediction = first_prediction;
  }
  return plan;
}

config::RunConfig ApplyPlan(const config::RunConfig& config, const JobLayout& layout,
                            const CompressionPlan& plan) {
  const config::AutoCompression& automatic = config.compression().automatic();
  std::vector<int> count(automatic.candidates_size(), 0);
  for (int c : plan.tensor_candidate) ++count[c];
  const int most = static_cast<int>(std::max_element(count.begin(), count.end()) - count.begin());
  config::RunConfig resolved = CandidateConfig(config, most);
  for (size_t t = 0; t < plan.tensor_candidate.size(); ++t) {
    const int c = plan.tensor_candidate[t];
    if (c == most) continue;
    OverrideTensor(layout.tensors[t].name, automatic.candidates(c), &resolved);
  }
  return resolved;
}

void OverrideTensor(const std::string& name, const config::ChunkCompression& compression,
                    config::RunConfig* config) {
  config::TensorOverride* override = config->mutable_compression()->add_tensor_overrides();
  override->set_pattern(name);
  *override->mutable_compression() = compression;
  // Every part named, even as none: an override replaces the default whole, and one that
  // names every part says so (job/config_notes.h notes the parts one leaves out).
  override->mutable_compression()->mutable_push_feedback();
  override->mutable_compression()->mutable_pull_feedback();
}

}  // namespace tamp::launcher
