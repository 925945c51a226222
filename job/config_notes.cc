#include "job/config_notes.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tamp {
namespace {

bool Compresses(const config::Codec& codec) {
  return !codec.name().empty() && codec.name() != "none";
}

std::string KindName(config::ErrorFeedback::Kind kind) {
  return config::ErrorFeedback::Kind_Name(kind);
}

// The parts of `base` that do something and that `override` leaves out, as
// "push topk" / "push_feedback RESIDUAL". A residual is not missed beside a codec the
// override sets to none: it would keep nothing.
std::vector<std::string> PartsLeftOut(const config::ChunkCompression& base,
                                      const config::ChunkCompression& override) {
  std::vector<std::string> parts;
  auto left_out = [&](absl::string_view part, bool has_codec, const config::Codec& codec,
                      const config::Codec& base_codec, bool has_feedback,
                      const config::ErrorFeedback& base_feedback) {
    if (!has_codec && Compresses(base_codec)) {
      parts.push_back(absl::StrCat(part, " ", base_codec.name()));
    }
    const bool codec_set_to_none = has_codec && !Compresses(codec);
    if (!has_feedback && !codec_set_to_none &&
        base_feedback.kind() != config::ErrorFeedback::NONE) {
      parts.push_back(absl::StrCat(part, "_feedback ", KindName(base_feedback.kind())));
    }
  };
  left_out("push", override.has_push(), override.push(), base.push(),
           override.has_push_feedback(), base.push_feedback());
  left_out("pull", override.has_pull(), override.pull(), base.pull(),
           override.has_pull_feedback(), base.pull_feedback());
  return parts;
}

void NoteOverride(const config::Compression& compression, const std::string& override_name,
                  const config::ChunkCompression& override, std::vector<std::string>* notes) {
  const std::vector<std::string> left_out =
      PartsLeftOut(compression.default_compression(), override);
  if (left_out.empty()) return;
  notes->push_back(absl::StrCat(
      override_name, " leaves out what default_compression sets (", absl::StrJoin(left_out, ", "),
      "): an override replaces default_compression whole, so for its tensors those are none; "
      "repeat them in the override to keep them"));
}

// Notes on one block: a residual around codec none keeps nothing; a pull residual under
// ASYNC / SSP is not used; a push warm-up as long as the run's `epochs` (0: not given)
// leaves the codec's own ratio unused.
void NoteBlock(const config::ChunkCompression& block, const std::string& field,
               config::Consistency::Mode mode, uint32_t epochs, std::vector<std::string>* notes) {
  const int warmup = block.push().ratio_warmup_size();
  if (epochs != 0 && warmup >= static_cast<int>(epochs)) {
    notes->push_back(absl::StrCat(
        field, ".push.ratio_warmup has ", warmup, warmup == 1 ? " epoch" : " epochs",
        " of warm-up and training.epochs is ",
        epochs, ": the run ends inside the warm-up",
        warmup > static_cast<int>(epochs)
            ? absl::StrCat(" (its last ", warmup - static_cast<int>(epochs), " never apply)")
            : "",
        " and the push codec's own ratio is never used"));
  }
  if (block.push_feedback().kind() == config::ErrorFeedback::RESIDUAL &&
      !Compresses(block.push())) {
    notes->push_back(absl::StrCat(field, ".push_feedback RESIDUAL keeps nothing: push codec none "
                                  "sends the gradient whole"));
  }
  if (block.pull_feedback().kind() == config::ErrorFeedback::NONE) return;
  if (mode != config::Consistency::SYNC) {
    notes->push_back(absl::StrCat(
        field, ".pull_feedback is not used with consistency.mode ",
        config::Consistency::Mode_Name(mode),
        ": the servers keep each worker's view of the weights, which carries what the pull "
        "codec drops to that worker's next answer (docs/consistency.md)"));
  } else if (block.pull_feedback().kind() == config::ErrorFeedback::RESIDUAL &&
             !Compresses(block.pull())) {
    notes->push_back(absl::StrCat(field, ".pull_feedback RESIDUAL keeps nothing: pull codec none "
                                  "sends the update whole"));
  }
}

}  // namespace

std::vector<std::string> ConfigNotes(const config::RunConfig& parsed) {
  std::vector<std::string> notes;
  const config::Compression& compression = parsed.compression();
  const config::Consistency::Mode mode = parsed.consistency().mode();
  const uint32_t epochs = parsed.training().epochs();
  NoteBlock(compression.default_compression(), "compression.default_compression", mode, epochs,
            &notes);
  for (int i = 0; i < compression.shard_overrides_size(); ++i) {
    const config::ShardOverride& override = compression.shard_overrides(i);
    const std::string field = absl::StrCat("compression.shard_overrides[", i, "]");
    NoteOverride(compression,
                 absl::StrCat(field, " (shards ", absl::StrJoin(override.shards(), ", "), ")"),
                 override.compression(), &notes);
    NoteBlock(override.compression(), field + ".compression", mode, epochs, &notes);
  }
  for (int i = 0; i < compression.tensor_overrides_size(); ++i) {
    const config::TensorOverride& override = compression.tensor_overrides(i);
    const std::string field = absl::StrCat("compression.tensor_overrides[", i, "]");
    NoteOverride(compression, absl::StrCat(field, " (pattern '", override.pattern(), "')"),
                 override.compression(), &notes);
    NoteBlock(override.compression(), field + ".compression", mode, epochs, &notes);
  }
  return notes;
}

}  // namespace tamp
