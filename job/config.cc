#include "job/config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "compress/error_feedback.h"
#include "compress/registry.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "job/address.h"
#include "job/config_notes.h"
#include "job/job_layout.h"
#include "job/layout_file.h"
#include "job/model_layout.h"
#include "job/security.h"
#include "optim/adam.h"
#include "optim/optimizer.h"

namespace tamp {
namespace {

constexpr uint32_t kMaxProcesses = 1024;
constexpr uint64_t kMaxChunks = 1 << 16;

// Collects the parser's complaints as "source:line:col: message" (1-based positions).
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  explicit ErrorCollector(absl::string_view source) : source_(source) {}
  void AddError(int line, int column, const std::string& message) override {
    errors_.push_back(absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int line, int column, const std::string& message) override {
    AddError(line, column, message);
  }
  std::string Joined() const { return absl::StrJoin(errors_, "\n"); }

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// config.validation: max_message_bytes fits gRPC's int limit and a useful minimum.
absl::Status ValidateValidation(const config::Validation& validation) {
  if (!config::Validation::NonfinitePolicy_IsValid(validation.nonfinite_policy())) {
    return FieldError("validation.nonfinite_policy",
                      absl::StrCat("unknown policy ", static_cast<int>(validation.nonfinite_policy())));
  }
  // 0 before ApplyDefaults() means the default.
  if (validation.max_message_bytes() != 0 &&
      (validation.max_message_bytes() < 4096 || validation.max_message_bytes() > 0x7fffffffu)) {
    return FieldError("validation.max_message_bytes",
                      absl::StrCat("must be in [4096, 2147483647], got ",
                                   validation.max_message_bytes()));
  }
  return absl::OkStatus();
}

// cluster.fusion_bytes: a batch of pushes must fit in one message the servers take. A
// worker sends a batch once its chunks' fp32 bytes or their payloads' bytes reach the
// threshold (worker/push_fusion.h), so it holds less than twice the threshold in payloads
// (the last push's may be up to twice its chunk: top-k near ratio 1, an index beside each
// value), plus a few bytes of framing per push (at most one push per 12 payload bytes, a
// payload's header).
absl::Status ValidateFusion(const config::RunConfig& config) {
  const uint64_t fusion = config.cluster().fusion_bytes();
  const uint64_t max_message = config.validation().max_message_bytes() != 0
                                   ? config.validation().max_message_bytes()
                                   : kDefaultMaxMessageBytes;
  const uint64_t most = std::min<uint64_t>(kMaxFusionBytes, max_message / 4);
  if (fusion > most) {
    return FieldError("cluster.fusion_bytes",
                      absl::StrCat("is ", fusion, "; at most ", most,
                                   " (64 MiB, and validation.max_message_bytes / 4: a batch "
                                   "of pushes travels in one message), or 0 for no fusion"));
  }
  return absl::OkStatus();
}

// Rounds per step of the registered codec `name` (1 when unknown: ValidateCodecSpec reports it).
int CodecRounds(const std::string& name) {
  for (const compress::CodecInfo& info : compress::ListCodecs()) {
    if (info.name == name) return info.rounds;
  }
  return 1;
}

// OK when every push codec of `compression` takes one round per step; else an error naming
// the first that does not, the rounds it takes, then `why_not`.
// Calls check(block, field) for every compression block (the default, each shard override,
// each tensor override, each of compression.automatic's candidates, any of which the plan may
// put on a tensor) with its field path, e.g. "compression.shard_overrides[1].compression";
// the first error.
template <typename Check>
absl::Status ForEachChunkCompression(const config::Compression& compression, Check check) {
  TAMP_RETURN_IF_ERROR(
      check(compression.default_compression(), std::string("compression.default_compression")));
  for (int i = 0; i < compression.shard_overrides_size(); ++i) {
    TAMP_RETURN_IF_ERROR(check(compression.shard_overrides(i).compression(),
                               absl::StrCat("compression.shard_overrides[", i, "].compression")));
  }
  for (int i = 0; i < compression.tensor_overrides_size(); ++i) {
    TAMP_RETURN_IF_ERROR(check(compression.tensor_overrides(i).compression(),
                               absl::StrCat("compression.tensor_overrides[", i, "].compression")));
  }
  for (int i = 0; i < compression.automatic().candidates_size(); ++i) {
    TAMP_RETURN_IF_ERROR(check(compression.automatic().candidates(i),
                               absl::StrCat("compression.automatic.candidates[", i, "]")));
  }
  return absl::OkStatus();
}

absl::Status CheckSingleRoundPush(const config::Compression& compression,
                                  absl::string_view why_not) {
  return ForEachChunkCompression(
      compression, [&](const config::ChunkCompression& chunk, const std::string& field) {
        const int rounds = CodecRounds(chunk.push().name());
        if (rounds == 1) return absl::OkStatus();
        return FieldError(absl::StrCat(field, ".push.name"),
                          absl::StrCat("codec '", chunk.push().name(), "' takes ", rounds,
                                       " rounds per step, ", why_not));
      });
}

// consistency: staleness only with SSP and >= 1 there; multi-round push codecs are SYNC-only
// (their rounds need every worker's push of the same step). Run after the compression check.
absl::Status ValidateConsistency(const config::RunConfig& config) {
  const config::Consistency& consistency = config.consistency();
  const config::Consistency::Mode mode = consistency.mode();
  if (!config::Consistency::Mode_IsValid(mode)) {
    return FieldError("consistency.mode", absl::StrCat("unknown mode ", static_cast<int>(mode)));
  }
  if (mode == config::Consistency::SSP && consistency.staleness() == 0) {
    return FieldError("consistency.staleness", "must be >= 1 with mode SSP (tau, in steps)");
  }
  if (mode != config::Consistency::SSP && consistency.staleness() != 0) {
    return FieldError("consistency.staleness",
                      absl::StrCat("is only used by mode SSP; mode is ",
                                   config::Consistency::Mode_Name(mode)));
  }
  if (consistency.worker_timeout_ms() != 0) {
    if (mode != config::Consistency::SYNC) {
      return FieldError("consistency.worker_timeout_ms",
                        absl::StrCat("is only used by mode SYNC (its barriers); mode is ",
                                     config::Consistency::Mode_Name(mode)));
    }
    // rpc_timeout_ms is 0 before ApplyDefaults(), which then sets it.
    const uint32_t rpc_timeout = config.cluster().rpc_timeout_ms();
    if (rpc_timeout != 0 && consistency.worker_timeout_ms() >= rpc_timeout) {
      return FieldError("consistency.worker_timeout_ms",
                        absl::StrCat(consistency.worker_timeout_ms(),
                                     " must be below cluster.rpc_timeout_ms (", rpc_timeout,
                                     "), or the other workers' pushes time out first"));
    }
  }
  if (mode == config::Consistency::SYNC) return absl::OkStatus();
  return CheckSingleRoundPush(
      config.compression(),
      absl::StrCat("which needs every worker's push of the step; it works only with "
                   "consistency.mode SYNC, not ", config::Consistency::Mode_Name(mode)));
}

// The built-in models' tensors must fit the compression settings; registered ones are
// checked when the workers register them (BuildJobLayout(config, tensors)).
absl::Status ValidateModel(const config::RunConfig& config) {
  const config::Model& model = config.model();
  if (model.kind() == config::Model::LAYOUT) {
    TAMP_ASSIGN_OR_RETURN(std::vector<TensorSpec> tensors, ModelTensors(model));
    TAMP_RETURN_IF_ERROR(ValidateTensors(config, tensors));
    absl::StatusOr<LayerProfile> profile = LoadProfileFile(model.profile_file(), tensors);
    if (!profile.ok()) return FieldError("model.profile_file", profile.status().message());
    // No data set: the run's length is a step count, and there is nothing to evaluate.
    if (config.training().max_steps() == 0) {
      return FieldError("training.max_steps", "required (> 0) with model.kind LAYOUT");
    }
    if (config.training().epochs() != 1) {
      return FieldError("training.epochs",
                        "must be 1 with model.kind LAYOUT: the max_steps steps are one epoch");
    }
    if (config.training().eval_every_steps() != 0) {
      return FieldError("training.eval_every_steps",
                        "must be 0 with model.kind LAYOUT: synthetic gradients have no accuracy");
    }
    return absl::OkStatus();
  }
  if (model.kind() != config::Model::REGISTERED) {
    TAMP_ASSIGN_OR_RETURN(std::vector<TensorSpec> tensors, ModelTensors(model));
    return ValidateTensors(config, tensors);
  }
  if (model.hidden_size() != 0 || model.conv_channels_size() != 0 || model.kernel_size() != 0 ||
      model.fc_hidden_size() != 0) {
    return FieldError("model", "kind REGISTERED takes its tensors from the workers; "
                               "hidden, conv_channels, kernel_size and fc_hidden must be unset");
  }
  if (model.layout_file().empty() && model.profile_file().empty()) return absl::OkStatus();
  // The workers' tensors described ahead, with their compute (docs/auto.md): checked now as
  // LAYOUT's are; the workers must then register exactly these.
  TAMP_ASSIGN_OR_RETURN(std::vector<TensorSpec> tensors, ModelTensors(model));
  TAMP_RETURN_IF_ERROR(ValidateTensors(config, tensors));
  absl::StatusOr<LayerProfile> profile = LoadProfileFile(model.profile_file(), tensors);
  if (!profile.ok()) return FieldError("model.profile_file", profile.status().message());
  return absl::OkStatus();
}

// AGGREGATE servers hold only the initial weights: nothing to resync with, resume from or
// rejoin into, and no per-worker views for ASYNC/SSP.
absl::Status ValidateServerMode(const config::RunConfig& config) {
  if (config.server().mode() != config::Server::AGGREGATE) return absl::OkStatus();
  const config::Consistency::Mode mode = config.consistency().mode();
  if (mode != config::Consistency::SYNC) {
    return FieldError("server.mode", absl::StrCat("AGGREGATE needs consistency.mode SYNC, not ",
                                                  config::Consistency::Mode_Name(mode)));
  }
  if (config.training().resync_steps() != 0) {
    return FieldError("training.resync_steps",
                      "must be 0 with server.mode AGGREGATE: the servers hold no trained weights");
  }
  if (config.has_checkpoint()) {
    return FieldError("checkpoint", "not supported with server.mode AGGREGATE: the servers hold "
                                    "no trained weights");
  }
  return absl::OkStatus();
}

// device: CUDA runs the built-in models only; a REGISTERED model's tensors are the front
// end's, which puts them on the GPU itself (through the client).
absl::Status ValidateDevice(const config::RunConfig& config) {
  if (!config::Device_IsValid(config.device())) {
    return FieldError("device", absl::StrCat("unknown device ", static_cast<int>(config.device())));
  }
  if (config.device() != config::CUDA) return absl::OkStatus();
  const config::Model::Kind kind = config.model().kind();
  if (kind == config::Model::MLP || kind == config::Model::CNN) return absl::OkStatus();
  return FieldError("device", absl::StrCat("CUDA runs model.kind MLP or CNN, not ",
                                           config::Model::Kind_Name(kind)));
}

// One direction's codecs and memories. The pull carries the servers' update, so its codec
// must decode to the update's scale and take one round (ValidatePullCodecSpec()), and its
// memory may not be DGC_MOMENTUM: the servers' optimizer has already applied its momentum to
// the update, and a second momentum on the workers' copy would apply it twice.
absl::Status ValidateChunkCompression(const config::ChunkCompression& compression,
                                      absl::string_view field) {
  TAMP_RETURN_IF_ERROR(compress::ValidateCodecSpec(compression.push(), absl::StrCat(field, ".push")));
  TAMP_RETURN_IF_ERROR(compress::ValidateErrorFeedbackSpec(compression.push_feedback(),
                                                           absl::StrCat(field, ".push_feedback")));
  TAMP_RETURN_IF_ERROR(
      compress::ValidatePullCodecSpec(compression.pull(), absl::StrCat(field, ".pull")));
  TAMP_RETURN_IF_ERROR(compress::ValidateErrorFeedbackSpec(compression.pull_feedback(),
                                                           absl::StrCat(field, ".pull_feedback")));
  if (compression.push_feedback().kind() == config::ErrorFeedback::DGC_MOMENTUM &&
      !compress::SparsifyingCodec(compression.push().name())) {
    return FieldError(absl::StrCat(field, ".push_feedback.kind"),
                      absl::StrCat("DGC_MOMENTUM needs a sparsifying push codec (",
                                   compress::SparsifyingCodecNames(), "): its momentum factor "
                                   "masking clears the momentum of every entry sent, and codec '",
                                   compression.push().name(), "' sends every entry each step, so "
                                   "no momentum would be kept. With it use RESIDUAL (momentum on "
                                   "the optimizer)"));
  }
  if (compression.pull_feedback().kind() == config::ErrorFeedback::DGC_MOMENTUM) {
    return FieldError(absl::StrCat(field, ".pull_feedback.kind"),
                      "DGC_MOMENTUM cannot wrap the pull: it adds momentum to what it sends, and "
                      "the servers' update already carries the optimizer's momentum; use "
                      "RESIDUAL (or NONE)");
  }
  return absl::OkStatus();
}

// An override's compression block (`field`: the override's path): required, as one left
// out would silently send its chunks uncompressed.
absl::Status ValidateOverrideCompression(bool present, const config::ChunkCompression& compression,
                                         const std::string& field) {
  if (!present) {
    return FieldError(absl::StrCat(field, ".compression"),
                      "missing: an override names its codecs (compression { push { name: "
                      "\"none\" } } sends its chunks uncompressed)");
  }
  return ValidateChunkCompression(compression, absl::StrCat(field, ".compression"));
}

// DGC's momentum correction (push_feedback DGC_MOMENTUM) keeps the momentum on the
// workers; an optimizer with a momentum of its own (SGD's momentum, Adam's first moment)
// would apply it a second time (an effective step ~10x larger at 0.9), and the job diverges.
// In AGGREGATE mode the optimizer section, when given, is the workers' own (the examples
// build theirs from it), checked alike.
absl::Status CheckMomentumAppliedOnce(const config::RunConfig& config) {
  if (!config.has_optimizer()) return absl::OkStatus();
  const config::Optimizer& optimizer = config.optimizer();
  const bool adam = optimizer.name() == "adam";
  if (!adam && optimizer.momentum() == 0) return absl::OkStatus();
  const std::string whose = config.server().mode() == config::Server::AGGREGATE
                                ? "the workers' optimizer (AGGREGATE mode)"
                                : "the servers' optimizer";
  return ForEachChunkCompression(
      config.compression(),
      [&](const config::ChunkCompression& block, const std::string& field) {
        if (block.push_feedback().kind() != config::ErrorFeedback::DGC_MOMENTUM) {
          return absl::OkStatus();
        }
        const std::string dgc = absl::StrCat(
            field, ".push_feedback is DGC_MOMENTUM, whose momentum correction already applies "
            "momentum on the workers; applied twice by ", whose, ", the job diverges. ");
        if (adam) {
          return FieldError("optimizer.name",
                            absl::StrCat("is adam, whose first moment (beta1) is a momentum, "
                                         "but ", dgc, "Use sgd with momentum 0, as DGC does"));
        }
        return FieldError("optimizer.momentum",
                          absl::StrCat("is ", optimizer.momentum(), " but ", dgc,
                                       "Set optimizer { momentum: 0 } (plain SGD, as in DGC)"));
      });
}

}  // namespace

bool PushesWithDgcMomentum(const config::Compression& compression) {
  bool found = false;
  ForEachChunkCompression(compression,
                          [&](const config::ChunkCompression& block, const std::string&) {
                            found = found || block.push_feedback().kind() ==
                                                 config::ErrorFeedback::DGC_MOMENTUM;
                            return absl::OkStatus();
                          })
      .IgnoreError();
  return found;
}

namespace {

// Whether `text` is well-formed UTF-8 without control characters (below U+0020, DEL).
bool IsPrintableUtf8(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      if (lead < 0x20 || lead == 0x7f) return false;
      ++i;
      continue;
    }
    // Continuation bytes, and the smallest code point each length may encode (no overlong
    // forms; no surrogates nor past U+10FFFF).
    const size_t length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 ? 2 : 0;
    if (length == 0 || lead > 0xf4 || i + length > text.size()) return false;
    uint32_t code = lead & (0xff >> (length + 1));
    for (size_t k = 1; k < length; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    const uint32_t smallest = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
    if (code < smallest || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    i += length;
  }
  return true;
}

void DefaultCodecNames(config::ChunkCompression* compression) {
  if (compression->push().name().empty()) compression->mutable_push()->set_name("none");
  if (compression->pull().name().empty()) compression->mutable_pull()->set_name("none");
}

// `path` from the working directory when relative.
std::string AbsolutePath(const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;  // Left relative: errors name it.
  return absl::StrCat(cwd, "/", path);
}

// Fields whose 0 ApplyDefaults() reads as "not given": written as 0 in a file, they would
// silently run with the default, so the parse refuses them, saying the default.
struct DefaultedWhenZero {
  std::vector<const char*> path;  // Field names from the RunConfig down.
  const char* default_value;
};
const DefaultedWhenZero kDefaultedWhenZero[] = {
    {{"data", "batch_size"}, "64"},
    {{"training", "epochs"}, "1"},
    {{"compression", "partition_bytes"}, "4194304 (4 MiB)"},
    {{"cluster", "connect_timeout_ms"}, "10000"},
    {{"cluster", "rpc_timeout_ms"}, "120000"},
    {{"validation", "max_message_bytes"}, "268435456 (256 MiB)"},
};

// The first field of kDefaultedWhenZero the text wrote as 0, as an error naming its line.
absl::Status CheckNoDefaultedZero(const config::RunConfig& config,
                                  const google::protobuf::TextFormat::ParseInfoTree& tree,
                                  absl::string_view source) {
  for (const DefaultedWhenZero& field : kDefaultedWhenZero) {
    const google::protobuf::Message* message = &config;
    const google::protobuf::TextFormat::ParseInfoTree* at = &tree;
    for (size_t i = 0; at != nullptr && i + 1 < field.path.size(); ++i) {
      const google::protobuf::FieldDescriptor* nested =
          message->GetDescriptor()->FindFieldByName(field.path[i]);
      at = at->GetTreeForNested(nested, -1);
      message = &message->GetReflection()->GetMessage(*message, nested);
    }
    if (at == nullptr) continue;
    const google::protobuf::FieldDescriptor* leaf =
        message->GetDescriptor()->FindFieldByName(field.path.back());
    const google::protobuf::TextFormat::ParseLocation written = at->GetLocation(leaf, -1);
    const google::protobuf::Reflection& reflection = *message->GetReflection();
    const uint64_t value = leaf->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64
                               ? reflection.GetUInt64(*message, leaf)
                               : reflection.GetUInt32(*message, leaf);
    if (written.line >= 0 && value == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", written.line + 1, ":", written.column + 1, ": ",
          absl::StrJoin(field.path, "."), ": must be at least 1, got 0 (leave it out for the "
          "default, ", field.default_value, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<config::RunConfig> ParseConfig(absl::string_view text, absl::string_view source) {
  config::RunConfig config;
  ErrorCollector errors(source);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  google::protobuf::TextFormat::ParseInfoTree written;
  parser.WriteLocationsTo(&written);
  if (!parser.ParseFromString(std::string(text), &config)) {
    return absl::InvalidArgumentError(errors.Joined());
  }
  TAMP_RETURN_IF_ERROR(CheckNoDefaultedZero(config, written, source));
  return config;
}

namespace {

// AGGREGATE servers run no optimizer: a config that leaves it out gets none (has_optimizer()
// stays false, and validation skips it).
void ApplyOptimizerDefaults(config::RunConfig* config) {
  // One left out stays out: validation says it is missing (AGGREGATE: that it needs none).
  if (!config->has_optimizer()) return;
  config::Optimizer* optimizer = config->mutable_optimizer();
  if (optimizer->name().empty()) optimizer->set_name("sgd");
  if (optimizer->name() == "adam") {
    if (!optimizer->has_beta1()) optimizer->set_beta1(kAdamDefaultBeta1);
    if (!optimizer->has_beta2()) optimizer->set_beta2(kAdamDefaultBeta2);
    if (!optimizer->has_epsilon()) optimizer->set_epsilon(kAdamDefaultEpsilon);
  }
}

void ApplyCompressionDefaults(config::Compression* compression) {
  if (compression->partition_bytes() == 0) compression->set_partition_bytes(4 << 20);
  DefaultCodecNames(compression->mutable_default_compression());
  // An override without its compression stays without: validation names it.
  for (auto& override : *compression->mutable_shard_overrides()) {
    if (override.has_compression()) DefaultCodecNames(override.mutable_compression());
  }
  for (auto& override : *compression->mutable_tensor_overrides()) {
    if (override.has_compression()) DefaultCodecNames(override.mutable_compression());
  }
  if (compression->has_automatic()) {  // mutable_automatic() would make it present.
    config::AutoCompression* automatic = compression->mutable_automatic();
    for (auto& candidate : *automatic->mutable_candidates()) DefaultCodecNames(&candidate);
    if (!automatic->has_min_gain()) automatic->set_min_gain(kDefaultAutoMinGain);
  }
}

}  // namespace

void ApplyDefaults(config::RunConfig* config) {
  config::Cluster* cluster = config->mutable_cluster();
  if (cluster->host().empty()) cluster->set_host("127.0.0.1");
  if (cluster->connect_timeout_ms() == 0) cluster->set_connect_timeout_ms(10000);
  if (cluster->rpc_timeout_ms() == 0) cluster->set_rpc_timeout_ms(120000);
  if (config->validation().max_message_bytes() == 0) {
    config->mutable_validation()->set_max_message_bytes(kDefaultMaxMessageBytes);
  }
  // Within what a smaller message limit allows (ValidateFusion).
  if (!cluster->has_fusion_bytes()) {
    cluster->set_fusion_bytes(
        std::min<uint64_t>(kDefaultFusionBytes, config->validation().max_message_bytes() / 4));
  }
  if (config->has_checkpoint() && !config->checkpoint().has_reconnect_timeout_ms()) {
    config->mutable_checkpoint()->set_reconnect_timeout_ms(60000);
  }

  if (config->device() == config::DEVICE_UNSPECIFIED) config->set_device(config::CPU);

  if (config->server().mode() == config::Server::MODE_UNSPECIFIED) {
    config->mutable_server()->set_mode(config::Server::OPTIMIZER);
  }

  config::Model* model = config->mutable_model();
  if (model->kind() == config::Model::CNN) {
    if (model->conv_channels_size() == 0) {
      for (uint32_t channels : kDefaultConvChannels) model->add_conv_channels(channels);
    }
    if (model->kernel_size() == 0) model->set_kernel_size(kDefaultKernelSize);
  }

  config::Data* data = config->mutable_data();
  if (data->dir().empty()) data->set_dir(kDefaultDataDir);
  if (data->batch_size() == 0) data->set_batch_size(64);

  config::Training* training = config->mutable_training();
  if (training->epochs() == 0) training->set_epochs(1);
  if (!training->has_eval_every_epoch()) training->set_eval_every_epoch(true);

  ApplyOptimizerDefaults(config);
  ApplyCompressionDefaults(config->mutable_compression());
}

absl::Status ValidateConfig(const config::RunConfig& config) {
  if (config.version() != kConfigVersion) {
    return FieldError("version", config.version() == 0
                                     ? absl::StrCat("missing; add `version: ", kConfigVersion, "`")
                                     : absl::StrCat("this build reads version ", kConfigVersion,
                                                    ", the file says ", config.version()));
  }
  // The name goes into summaries (JSON), progress lines and logs as it is.
  if (!IsPrintableUtf8(config.name())) {
    return FieldError("name", "must be UTF-8 text without control characters (it names the "
                              "run in summaries and progress lines)");
  }
  const config::Cluster& cluster = config.cluster();
  if (cluster.num_servers() < 1 || cluster.num_servers() > kMaxProcesses) {
    return FieldError("cluster.num_servers",
                      absl::StrCat("must be in [1, ", kMaxProcesses, "], got ", cluster.num_servers()));
  }
  if (cluster.num_workers() < 1 || cluster.num_workers() > kMaxProcesses) {
    return FieldError("cluster.num_workers",
                      absl::StrCat("must be in [1, ", kMaxProcesses, "], got ", cluster.num_workers()));
  }
  if (cluster.server_addresses_size() != 0) {
    if (static_cast<uint32_t>(cluster.server_addresses_size()) != cluster.num_servers()) {
      return FieldError("cluster.server_addresses",
                        absl::StrCat("has ", cluster.server_addresses_size(),
                                     " entries but cluster.num_servers is ", cluster.num_servers()));
    }
    for (int i = 0; i < cluster.server_addresses_size(); ++i) {
      TAMP_RETURN_IF_ERROR(ValidateHostPort(cluster.server_addresses(i),
                                            absl::StrCat("cluster.server_addresses[", i, "]")));
    }
    TAMP_RETURN_IF_ERROR(ValidateServerList(
        {cluster.server_addresses().begin(), cluster.server_addresses().end()},
        "cluster.server_addresses"));
  }

  TAMP_RETURN_IF_ERROR(ValidateModel(config));
  TAMP_RETURN_IF_ERROR(ValidateDevice(config));

  if (config.data().batch_size() > 65536) {
    return FieldError("data.batch_size",
                      absl::StrCat("must be in [1, 65536], got ", config.data().batch_size()));
  }
  // AGGREGATE servers run no optimizer: one left out is not missing.
  if (config.has_optimizer()) {
    TAMP_RETURN_IF_ERROR(ValidateOptimizerSpec(config.optimizer()));
  } else if (config.server().mode() != config::Server::AGGREGATE) {
    return FieldError("optimizer",
                      "missing: the servers run the config's optimizer (server.mode OPTIMIZER, "
                      "the default); add e.g. optimizer { name: \"sgd\" learning_rate: 0.05 }, "
                      "or server { mode: AGGREGATE } for workers that step their own");
  }

  const config::Compression& compression = config.compression();
  if (compression.partition_bytes() < sizeof(float)) {
    return FieldError("compression.partition_bytes", "must be >= 4");
  }
  // Written so that NaN fails too; inf would clip nothing and is refused as a likely typo.
  if (compression.has_clip_norm() &&
      !(compression.clip_norm() > 0 && compression.clip_norm() < HUGE_VAL)) {
    return FieldError("compression.clip_norm",
                      absl::StrCat("must be > 0 and finite, got ", compression.clip_norm()));
  }
  TAMP_RETURN_IF_ERROR(
      ValidateChunkCompression(compression.default_compression(), "compression.default_compression"));
  for (int i = 0; i < compression.shard_overrides_size(); ++i) {
    const auto& override = compression.shard_overrides(i);
    const std::string field = absl::StrCat("compression.shard_overrides[", i, "]");
    if (override.shards_size() == 0) return FieldError(absl::StrCat(field, ".shards"), "is empty");
    for (uint32_t shard : override.shards()) {
      if (shard >= cluster.num_servers()) {
        return FieldError(absl::StrCat(field, ".shards"),
                          absl::StrCat("shard ", shard, " does not exist (cluster.num_servers is ",
                                       cluster.num_servers(), ")"));
      }
    }
    TAMP_RETURN_IF_ERROR(ValidateOverrideCompression(override.has_compression(),
                                                     override.compression(), field));
  }
  for (int i = 0; i < compression.tensor_overrides_size(); ++i) {
    const config::TensorOverride& override = compression.tensor_overrides(i);
    const std::string field = absl::StrCat("compression.tensor_overrides[", i, "]");
    const std::string& pattern = override.pattern();
    if (!IsTensorPattern(pattern)) {
      return FieldError(absl::StrCat(field, ".pattern"),
                        "'' (empty): a tensor's exact name, or a glob whose '*' stands for "
                        "any run of characters ('fc1.*', 'blocks.*.attn.*.weight')");
    }
    TAMP_RETURN_IF_ERROR(ValidateOverrideCompression(override.has_compression(),
                                                     override.compression(), field));
  }
  if (compression.has_automatic()) {
    const config::AutoCompression& automatic = compression.automatic();
    config::ChunkCompression left_out;  // What ApplyDefaults() makes of no default_compression.
    DefaultCodecNames(&left_out);
    if (!google::protobuf::util::MessageDifferencer::Equivalent(
            compression.default_compression(), left_out)) {
      return FieldError("compression.default_compression",
                        "is set beside compression.automatic, which chooses every tensor's "
                        "compression itself (the candidate most tensors take becomes the "
                        "default): list it among automatic.candidates instead");
    }
    if (automatic.candidates_size() == 0) {
      return FieldError("compression.automatic.candidates", "is empty; list at least one");
    }
    for (int i = 0; i < automatic.candidates_size(); ++i) {
      TAMP_RETURN_IF_ERROR(ValidateChunkCompression(
          automatic.candidates(i), absl::StrCat("compression.automatic.candidates[", i, "]")));
    }
    if (automatic.bandwidth().empty()) {
      return FieldError("compression.automatic.bandwidth",
                        "required: the link the job runs on (\"1gbit\", \"unshaped\", ...)");
    }
    if (!(automatic.min_gain() >= 0 && automatic.min_gain() < 1)) {
      return FieldError("compression.automatic.min_gain",
                        absl::StrCat("is ", automatic.min_gain(),
                                     "; a share of the step in [0, 1), e.g. 0.05"));
    }
  }
  TAMP_RETURN_IF_ERROR(ValidateServerMode(config));
  TAMP_RETURN_IF_ERROR(CheckMomentumAppliedOnce(config));
  TAMP_RETURN_IF_ERROR(ValidateSecurity(config));
  TAMP_RETURN_IF_ERROR(ValidateValidation(config.validation()));
  TAMP_RETURN_IF_ERROR(ValidateFusion(config));
  return ValidateConsistency(config);
}

absl::StatusOr<config::RunConfig> LoadConfigText(absl::string_view text, absl::string_view source,
                                                 std::vector<std::string>* notes) {
  TAMP_ASSIGN_OR_RETURN(config::RunConfig config, ParseConfig(text, source));
  // Before the defaults: which parts an override names is then still known.
  const std::vector<std::string> parsed_notes = ConfigNotes(config);
  // Relative model files are relative to the config's directory (the working directory for
  // a source without one); made absolute here so that every process, and every config
  // written from this one, finds the same files.
  const size_t slash = source.rfind('/');
  const std::string dir =
      slash == absl::string_view::npos ? "" : std::string(source.substr(0, slash + 1));
  config::Model* model = config.mutable_model();
  for (std::string* file : {model->mutable_layout_file(), model->mutable_profile_file()}) {
    if (!file->empty() && file->front() != '/') *file = AbsolutePath(dir + *file);
  }
  ApplyDefaults(&config);
  absl::Status valid = ValidateConfig(config);
  if (!valid.ok()) {
    return absl::Status(valid.code(), absl::StrCat(source, ": ", valid.message()));
  }
  if (notes != nullptr) {
    for (const std::string& note : parsed_notes) notes->push_back(absl::StrCat(source, ": ", note));
  }
  return config;
}

absl::StatusOr<config::RunConfig> LoadConfigFile(const std::string& path,
                                                 std::vector<std::string>* notes) {
  std::ifstream file(path);
  // A directory opens, then reads as an empty config ("version: missing").
  std::error_code ignored;
  const int error = !file ? errno : std::filesystem::is_directory(path, ignored) ? EISDIR : 0;
  if (error != 0) {
    return absl::NotFoundError(
        absl::StrCat("config file '", path, "' cannot be read: ", std::strerror(error)));
  }
  std::stringstream text;
  text << file.rdbuf();
  return LoadConfigText(text.str(), path, notes);
}

uint64_t TotalSteps(const config::Training& training, uint64_t steps_per_epoch) {
  const uint64_t epochs = training.epochs();
  const uint64_t total = epochs != 0 && steps_per_epoch > UINT64_MAX / epochs
                             ? UINT64_MAX
                             : steps_per_epoch * epochs;
  return training.max_steps() != 0 ? std::min<uint64_t>(total, training.max_steps()) : total;
}

}  // namespace tamp
