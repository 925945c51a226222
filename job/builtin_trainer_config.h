// CheckBuiltInTrainerConfig(): what the built-in trainer (tamp_worker) needs of a valid config
// beyond ValidateConfig(), for tamp_worker, its --check and `tamp run CONFIG` (no COMMAND) to
// refuse before anything starts.
#ifndef TAMP_JOB_BUILTIN_TRAINER_CONFIG_H_
#define TAMP_JOB_BUILTIN_TRAINER_CONFIG_H_

#include "absl/status/status.h"
#include "proto/config.pb.h"

namespace tamp {

// With server.mode AGGREGATE the servers answer the mean gradient and the trainer steps it
// with the config's optimizer section, on the CPU: INVALID_ARGUMENT naming the field when
// that section is missing or the model runs on the GPU (device CUDA). `config` is defaulted
// and valid (ValidateConfig()).
absl::Status CheckBuiltInTrainerConfig(const config::RunConfig& config);

}  // namespace tamp

#endif  // TAMP_JOB_BUILTIN_TRAINER_CONFIG_H_
