// CreateCpuModel: the CPU backend's model for a config.
#ifndef TAMP_WORKER_CPU_MODELS_H_
#define TAMP_WORKER_CPU_MODELS_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "job/model_layout.h"
#include "proto/config.pb.h"
#include "worker/model.h"

namespace tamp {

// The model of kind config.kind() over `tensors` (ModelTensors(config)), taking batches of
// up to max_batch examples.
absl::StatusOr<std::unique_ptr<Model>> CreateCpuModel(const config::Model& config,
                                                      std::vector<TensorSpec> tensors,
                                                      int max_batch);

}  // namespace tamp

#endif  // TAMP_WORKER_CPU_MODELS_H_
