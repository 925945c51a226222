#include "job/job_layout.h"

#include <algorithm>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace tamp {
namespace {

// A chunk of `length` values too small to compress: it travels raw both ways.
bool TravelsRaw(const config::Compression& compression, uint64_t length) {
  return length * sizeof(float) < compression.min_compress_bytes();
}

config::ChunkCompression ResolveCompression(const config::Compression& compression,
                                            const std::string& tensor_name, const Chunk& chunk) {
  config::ChunkCompression resolved = compression.default_compression();
  for (const auto& override : compression.shard_overrides()) {
    for (uint32_t shard : override.shards()) {
      if (shard == chunk.shard) resolved = override.compression();
    }
  }
  for (const auto& override : compression.tensor_overrides()) {
    if (TensorNameMatches(override.pattern(), tensor_name)) resolved = override.compression();
  }
  if (TravelsRaw(compression, chunk.length)) {
    // Raw both ways. DGC's momentum moved to the workers stays: with codec none it is the
    // momentum SGD the paper's optimizer gives the tensors it does not compress.
    const config::ErrorFeedback push_feedback = resolved.push_feedback();
    resolved.Clear();
    resolved.mutable_push()->set_name("none");
    resolved.mutable_pull()->set_name("none");
    if (push_feedback.kind() == config::ErrorFeedback::DGC_MOMENTUM) {
      *resolved.mutable_push_feedback() = push_feedback;
    }
  }
  return resolved;
}

constexpr uint64_t kMaxChunks = 1 << 16;
constexpr uint64_t kMaxElements = uint64_t{1} << 40;

// A tensor as a refusal names it, with a bounded name (it may come from the wire).
std::string Named(const std::string& name) {
  return name.size() <= kMaxTensorNameBytes
             ? absl::StrCat("\"", name, "\"")
             : absl::StrCat("\"", name.substr(0, 64), "...\" (", name.size(), " bytes)");
}

}  // namespace

std::string DescribeTensor(const TensorSpec& tensor) {
  return absl::StrCat(Named(tensor.name), " [", absl::StrJoin(tensor.shape, ", "), "]");
}

std::string FirstTensorDifference(const std::vector<TensorSpec>& ours,
                                  const std::vector<TensorSpec>& theirs,
                                  absl::string_view ours_name, absl::string_view theirs_name) {
  const size_t common = std::min(ours.size(), theirs.size());
  for (size_t t = 0; t < common; ++t) {
    if (ours[t].name != theirs[t].name || ours[t].shape != theirs[t].shape) {
      return absl::StrCat("tensor ", t, ": ", ours_name, " ", DescribeTensor(ours[t]), " vs ",
                          theirs_name, " ", DescribeTensor(theirs[t]));
    }
  }
  if (ours.size() == theirs.size()) return "";
  const bool ours_longer = ours.size() > theirs.size();
  return absl::StrCat(ours_name, " has ", ours.size(), " tensors, ", theirs_name, " ",
                      theirs.size(), "; the first extra is tensor ", common, " (",
                      ours_longer ? ours_name : theirs_name, ") ",
                      DescribeTensor(ours_longer ? ours[common] : theirs[common]));
}

absl::Status ValidateTensors(const config::RunConfig& config,
                             const std::vector<TensorSpec>& tensors) {
  if (tensors.empty()) return absl::InvalidArgumentError("the model has no tensors");
  if (tensors.size() > kMaxTensors) {
    return absl::InvalidArgumentError(absl::StrCat("the model has ", tensors.size(),
                                                   " tensors; at most ", kMaxTensors,
                                                   " are allowed"));
  }
  absl::flat_hash_set<absl::string_view> names;
  uint64_t total = 0;
  uint64_t chunks = 0;
  const uint64_t chunk_elements =
      std::max<uint64_t>(1, config.compression().partition_bytes() / sizeof(float));
  for (size_t t = 0; t < tensors.size(); ++t) {
    const TensorSpec& tensor = tensors[t];
    const std::string which = absl::StrCat("tensor ", t, " ", Named(tensor.name));
    if (tensor.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", t, " has an empty name"));
    }
    if (tensor.name.size() > kMaxTensorNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": the name is longer than ",
                                                     kMaxTensorNameBytes, " bytes"));
    }
    if (!names.insert(tensor.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(which, ": the name is taken by an earlier tensor"));
    }
    if (tensor.shape.size() > static_cast<size_t>(kMaxTensorDims)) {
      return absl::InvalidArgumentError(
          absl::StrCat(which, ": shape [", absl::StrJoin(tensor.shape, ", "), "] has ",
                       tensor.shape.size(), " dimensions; at most ", kMaxTensorDims));
    }
    uint64_t elements = 1;
    for (int64_t dim : tensor.shape) {
      if (dim < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(which, ": shape [", absl::StrJoin(tensor.shape, ", "),
                         "] has a dimension below 1"));
      }
      if (static_cast<uint64_t>(dim) > kMaxElements / elements) {
        return absl::InvalidArgumentError(absl::StrCat(which, ": more than 2^40 elements"));
      }
      elements *= static_cast<uint64_t>(dim);
    }
    total += elements;
    if (total > kMaxElements) {
      return absl::InvalidArgumentError("the model has more than 2^40 elements");
    }
    chunks += (elements + chunk_elements - 1) / chunk_elements;
  }
  if (chunks > kMaxChunks) {
    return absl::InvalidArgumentError(
        absl::StrCat("compression.partition_bytes: ", config.compression().partition_bytes(),
                     " splits the model into ", chunks, " chunks; at most ", kMaxChunks,
                     " are allowed"));
  }
  const config::Compression& compression = config.compression();
  for (int i = 0; i < compression.tensor_overrides_size(); ++i) {
    const std::string& pattern = compression.tensor_overrides(i).pattern();
    bool matches = false;
    for (const TensorSpec& tensor : tensors) {
      matches = matches || TensorNameMatches(pattern, tensor.name);
    }
    if (!matches) {
      std::vector<std::string> listed;
      for (size_t t = 0; t < tensors.size() && t < 16; ++t) listed.push_back(tensors[t].name);
      return absl::InvalidArgumentError(absl::StrCat(
          "compression.tensor_overrides[", i, "].pattern: '", pattern, "' matches no tensor",
          " (tensors: ", absl::StrJoin(listed, ", "),
          tensors.size() > 16 ? ", ..." : "", ")"));
    }
  }
  return absl::OkStatus();
}

namespace {

// Whether an override's compression compresses anything (push or pull other than none).
bool Compresses(const config::TensorOverride& override) {
  auto compresses = [](const config::Codec& codec) {
    return !codec.name().empty() && codec.name() != "none";
  };
  return compresses(override.compression().push()) || compresses(override.compression().pull());
}

// A tensor override that compresses, all of whose tensors' chunks travel raw: its note, or "".
std::string RawOnlyNote(const config::Compression& compression, const JobLayout& layout, int i) {
  const config::TensorOverride& override = compression.tensor_overrides(i);
  if (!Compresses(override)) return "";
  auto matches = [&](const TensorSpec& tensor) {
    return TensorNameMatches(override.pattern(), tensor.name);
  };
  const bool compressible =
      std::any_of(layout.chunks.begin(), layout.chunks.end(), [&](const ChunkPlan& plan) {
        return matches(layout.tensor_of(plan)) && !TravelsRaw(compression, plan.chunk.length);
      });
  if (compressible) return "";
  std::vector<std::string> small;  // The first few.
  size_t num_small = 0;
  for (const TensorSpec& tensor : layout.tensors) {
    if (!matches(tensor) || ++num_small > 4) continue;
    small.push_back(
        absl::StrCat(DescribeTensor(tensor), " ", tensor.elements() * sizeof(float), " B"));
  }
  if (small.empty()) return "";
  return absl::StrCat(
      "compression.tensor_overrides[", i, "] (pattern '", override.pattern(),
      "') changes nothing: every tensor it matches is below compression.min_compress_bytes (",
      compression.min_compress_bytes(), " B) and travels raw (", absl::StrJoin(small, ", "),
      num_small > small.size() ? ", ..." : "", "); lower min_compress_bytes to compress them");
}

// By tensor of `layout`, the last tensor override matching it (-1: none); by shard, the last
// shard override listing it (-1: none). As ResolveCompression() picks them.
struct WinningOverrides {
  std::vector<int> by_tensor;
  std::vector<int> by_shard;
};

WinningOverrides FindWinningOverrides(const config::Compression& compression,
                                      const JobLayout& layout) {
  WinningOverrides winners{std::vector<int>(layout.tensors.size(), -1),
                           std::vector<int>(layout.shard_bytes.size(), -1)};
  for (size_t t = 0; t < layout.tensors.size(); ++t) {
    for (int i = 0; i < compression.tensor_overrides_size(); ++i) {
      if (TensorNameMatches(compression.tensor_overrides(i).pattern(), layout.tensors[t].name)) {
        winners.by_tensor[t] = i;
      }
    }
  }
  for (int i = 0; i < compression.shard_overrides_size(); ++i) {
    for (uint32_t shard : compression.shard_overrides(i).shards()) {
      if (shard < winners.by_shard.size()) winners.by_shard[shard] = i;
    }
  }
  return winners;
}

// "compression.tensor_overrides[2], pattern 'fc1.*'; compression.tensor_overrides[3], ...".
std::string NameOverrides(const config::Compression& compression, const std::set<int>& indices) {
  return absl::StrJoin(indices, "; ", [&](std::string* out, int index) {
    absl::StrAppend(out, "compression.tensor_overrides[", index, "], pattern '",
                    compression.tensor_overrides(index).pattern(), "'");
  });
}

}  // namespace

std::vector<std::string> LayoutNotes(const config::RunConfig& config, const JobLayout& layout) {
  const config::Compression& compression = config.compression();
  const WinningOverrides winners = FindWinningOverrides(compression, layout);
  std::vector<std::string> notes;
  for (int i = 0; i < compression.tensor_overrides_size(); ++i) {
    if (std::string raw = RawOnlyNote(compression, layout, i); !raw.empty()) {
      notes.push_back(std::move(raw));
      continue;
    }
    const std::string& pattern = compression.tensor_overrides(i).pattern();
    std::set<int> later;  // The later overrides that win tensors it matches.
    bool matches_any = false;
    bool wins_any = false;
    for (size_t t = 0; t < layout.tensors.size(); ++t) {
      if (!TensorNameMatches(pattern, layout.tensors[t].name)) continue;
      matches_any = true;
      if (winners.by_tensor[t] == i) {
        wins_any = true;
      } else {
        later.insert(winners.by_tensor[t]);
      }
    }
    if (matches_any && !wins_any) {
      notes.push_back(absl::StrCat(
          "compression.tensor_overrides[", i, "] (pattern '", pattern,
          "') changes nothing: later overrides, which win, match every tensor it matches (",
          NameOverrides(compression, later), ")"));
      continue;
    }
    // Both at once: the tensors it wins travel raw, and later overrides win the others.
    if (later.empty() || !Compresses(compression.tensor_overrides(i))) continue;
    const bool decides_a_chunk =
        std::any_of(layout.chunks.begin(), layout.chunks.end(), [&](const ChunkPlan& plan) {
          return winners.by_tensor[plan.chunk.tensor] == i &&
                 !TravelsRaw(compression, plan.chunk.length);
        });
    if (!decides_a_chunk) {
      notes.push_back(absl::StrCat(
          "compression.tensor_overrides[", i, "] (pattern '", pattern,
          "') changes nothing: later overrides, which win, take some of the tensors it "
          "matches (", NameOverrides(compression, later),
          "), and the others are below compression.min_compress_bytes (",
          compression.min_compress_bytes(), " B) and travel raw"));
    }
  }
  for (int i = 0; i < compression.shard_overrides_size(); ++i) {
    const bool decides_a_chunk =
        std::any_of(layout.chunks.begin(), layout.chunks.end(), [&](const ChunkPlan& plan) {
          return winners.by_shard[plan.chunk.shard] == i &&
                 winners.by_tensor[plan.chunk.tensor] == -1 &&
                 !TravelsRaw(compression, plan.chunk.length);
        });
    if (decides_a_chunk) continue;
    notes.push_back(absl::StrCat(
        "compression.shard_overrides[", i, "] (shards ",
        absl::StrJoin(compression.shard_overrides(i).shards(), ", "),
        ") changes nothing: its shards hold no chunk it decides (none at all, only chunks "
        "below compression.min_compress_bytes, or chunks a tensor override or a later shard "
        "override sets)"));
  }
  std::vector<std::string> idle;
  for (uint32_t shard = 0; shard < layout.shard_bytes.size(); ++shard) {
    if (layout.ChunksOfShard(shard).empty()) idle.push_back(absl::StrCat(shard));
  }
  if (!idle.empty()) {
    notes.push_back(absl::StrCat(
        idle.size(), " of ", layout.shard_bytes.size(), " servers hold no chunk (shards ",
        absl::StrJoin(idle, ", "), "): the job has ", layout.chunks.size(),
        " chunks; lower cluster.num_servers, or compression.partition_bytes to split tensors "
        "into more chunks"));
  }
  return notes;
}

std::vector<uint32_t> JobLayout::ChunksOfShard(uint32_t shard) const {
  std::vector<uint32_t> ids;
  for (const ChunkPlan& plan : chunks) {
    if (plan.chunk.shard == shard) ids.push_back(plan.chunk.id);
  }
  return ids;
}

absl::StatusOr<JobLayout> BuildJobLayout(const config::RunConfig& config) {
  if (config.model().kind() == config::Model::REGISTERED && config.model().layout_file().empty()) {
    return absl::InvalidArgumentError(
        "model.kind REGISTERED: the layout comes from the tensors the workers register (a "
        "model.layout_file with a profile_file describes them ahead: docs/auto.md)");
  }
  TAMP_ASSIGN_OR_RETURN(std::vector<TensorSpec> tensors, ModelTensors(config.model()));
  return BuildJobLayout(config, std::move(tensors));
}

absl::Status CheckResolved(const config::RunConfig& config) {
  if (!config.compression().has_automatic()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "compression.automatic: `tamp run` resolves it into per-tensor overrides before "
      "starting the processes (docs/auto.md); run the job with `tamp run`, or, for servers "
      "and workers a cluster engine starts, give them the config `tamp model CONFIG --auto "
      "--write_config PATH` writes");
}

absl::StatusOr<JobLayout> BuildJobLayout(const config::RunConfig& config,
                                         std::vector<TensorSpec> tensors) {
  TAMP_RETURN_IF_ERROR(CheckResolved(config));
  if (config.model().kind() == config::Model::REGISTERED) {
    TAMP_RETURN_IF_ERROR(ValidateTensors(config, tensors));
    if (!config.model().layout_file().empty()) {  // Described ahead: exactly these.
      TAMP_ASSIGN_OR_RETURN(const std::vector<TensorSpec> described, ModelTensors(config.model()));
      const std::string difference =
          FirstTensorDifference(tensors, described, "registered", "model.layout_file");
      if (!difference.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the registered tensors are not model.layout_file's: ", difference));
      }
    }
  } else {
    TAMP_ASSIGN_OR_RETURN(const std::vector<TensorSpec> model, ModelTensors(config.model()));
    const std::string difference =
        FirstTensorDifference(tensors, model, "registered", "model");
    if (!difference.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the registered tensors are not model.kind ",
          config::Model::Kind_Name(config.model().kind()), "'s: ", difference));
    }
    tensors = model;  // With the initialisation details the registration does not carry.
  }
  JobLayout layout;
  layout.tensors = std::move(tensors);
  std::vector<uint64_t> sizes;
  for (const TensorSpec& tensor : layout.tensors) {
    layout.tensor_offsets.push_back(layout.total_elements);
    layout.total_elements += tensor.elements();
    sizes.push_back(tensor.elements());
  }
  TAMP_ASSIGN_OR_RETURN(Partition partition,
                        PartitionTensors(sizes, config.compression().partition_bytes(),
                                         config.cluster().num_servers()));
  layout.shard_bytes = std::move(partition.shard_bytes);
  for (const Chunk& chunk : partition.chunks) {
    layout.chunks.push_back(
        {chunk, ResolveCompression(config.compression(), layout.tensors[chunk.tensor].name, chunk)});
  }
  return layout;
}

}  // namespace tamp
