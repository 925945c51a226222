#include "worker/cpu_models.h"

#include "absl/strings/str_cat.h"
#include "worker/cnn_cpu.h"
#include "worker/mlp_cpu.h"

namespace tamp {

absl::StatusOr<std::unique_ptr<Model>> CreateCpuModel(const config::Model& config,
                                                      std::vector<TensorSpec> tensors,
                                                      int max_batch) {
  switch (config.kind()) {
    case config::Model::MLP: {
      auto mlp = MlpCpu::Create(std::move(tensors), max_batch);
      if (!mlp.ok()) return mlp.status();
      return std::unique_ptr<Model>(std::move(*mlp));
    }
    case config::Model::CNN: {
      auto cnn = CnnCpu::Create(std::move(tensors), max_batch);
      if (!cnn.ok()) return cnn.status();
      return std::unique_ptr<Model>(std::move(*cnn));
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "model.kind: no CPU model for ", config::Model::Kind_Name(config.kind())));
  }
}

}  // namespace tamp
