#include "job/builtin_trainer_config.h"

namespace tamp {

absl::Status CheckBuiltInTrainerConfig(const config::RunConfig& config) {
  if (config.server().mode() != config::Server::AGGREGATE) return absl::OkStatus();
  if (!config.has_optimizer()) {
    return absl::InvalidArgumentError(
        "optimizer: missing: with server.mode AGGREGATE the servers answer the mean gradient "
        "and the built-in trainer steps its model with the config's optimizer section");
  }
  if (config.device() == config::CUDA) {
    return absl::InvalidArgumentError(
        "device: CUDA with server.mode AGGREGATE: the built-in trainer steps its own optimizer "
        "on the CPU only; use server.mode OPTIMIZER, or tamp.torch with an optimizer of "
        "torch's");
  }
  return absl::OkStatus();
}

}  // namespace tamp
