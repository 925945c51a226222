// Loading and validating run configurations (proto/config.proto, text format).
//
// LoadConfigFile() parses, fills defaults and validates; every error names the file and the
// field, e.g.
//   "examples/x.pbtxt:7:3: Message type "tamp.config.Training" has no field named "epohcs"."
//   "examples/x.pbtxt: cluster.num_workers: must be >= 1"
// A config that loads is complete: every default is filled in, so processes that load the
// same file agree on every value.
#ifndef TAMP_JOB_CONFIG_H_
#define TAMP_JOB_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/config.pb.h"

namespace tamp {

// The RunConfig.version this build reads.
inline constexpr uint32_t kConfigVersion = 1;

inline constexpr char kDefaultDataDir[] = "/usr/share/datasets/fashion-mnist";

// compression.automatic.min_gain when the config leaves it out: rounds of one config differ
// by up to 4% on a shared machine (docs/auto.md), so a smaller predicted gain is noise.
inline constexpr double kDefaultAutoMinGain = 0.05;

// validation.max_message_bytes when the config leaves it out.
inline constexpr uint64_t kDefaultMaxMessageBytes = 256 << 20;

// cluster.fusion_bytes when the config leaves it out, and its most.
inline constexpr uint64_t kDefaultFusionBytes = 256 << 10;
inline constexpr uint64_t kMaxFusionBytes = 64 << 20;

// Parses text-format `text`; `source` (a path) prefixes error messages.
absl::StatusOr<config::RunConfig> ParseConfig(absl::string_view text, absl::string_view source);

// Reads, parses, fills defaults and validates the file at `path`. With `notes`, a valid
// config's job/config_notes.h notes (what it says that has no effect) are appended there, each
// prefixed with `path`, for the caller to warn of.
absl::StatusOr<config::RunConfig> LoadConfigFile(const std::string& path,
                                                 std::vector<std::string>* notes = nullptr);

// Parses, fills defaults and validates `text`, as LoadConfigFile() does a file's; `source`
// (a path, "<text>") prefixes error messages and notes.
absl::StatusOr<config::RunConfig> LoadConfigText(absl::string_view text, absl::string_view source,
                                                 std::vector<std::string>* notes = nullptr);

// TotalSteps()
//
// Steps in the whole run: training.epochs passes of `steps_per_epoch` steps, cut at
// training.max_steps when it is set. The servers check the total_steps every worker
// announces against this (server/membership.cc), and every front end computes it here, so no two
// can disagree. Saturates at 2^64 - 1 rather than wrapping.
uint64_t TotalSteps(const config::Training& training, uint64_t steps_per_epoch);

// Fills unset fields with their documented defaults.
void ApplyDefaults(config::RunConfig* config);

// Checks a defaulted config; the error names the first bad field.
absl::Status ValidateConfig(const config::RunConfig& config);

// Whether any of the config's compression blocks (the default, each override, each automatic
// candidate) pushes with DGC's momentum correction (push_feedback DGC_MOMENTUM): the
// workers then keep the momentum, and no optimizer may add its own.
bool PushesWithDgcMomentum(const config::Compression& compression);

}  // namespace tamp

#endif  // TAMP_JOB_CONFIG_H_
