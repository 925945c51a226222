#include "protocol/keys.h"

namespace tamp {

RandomKey PushKey(const config::RunConfig& config, uint64_t step, uint32_t chunk, uint32_t worker) {
  return {.seed = config.compression().seed(), .step = step, .chunk = chunk, .worker = worker};
}

RandomKey PullKey(const config::RunConfig& config, uint64_t step, uint32_t chunk) {
  return {.seed = config.compression().seed(), .step = step, .chunk = chunk, .worker = kSharedStream};
}

}  // namespace tamp
