#include "worker/mlp_cpu.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "worker/internal/dense_stack.h"
#include "worker/internal/tensor_checks.h"

namespace tamp {

absl::StatusOr<std::unique_ptr<MlpCpu>> MlpCpu::Create(std::vector<TensorSpec> tensors,
                                                       int max_batch) {
  if (max_batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch must be >= 1, got ", max_batch));
  }
  if (tensors.empty() || tensors.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an MLP needs (weight, bias) tensor pairs, got ", tensors.size(), " tensors"));
  }
  TAMP_RETURN_IF_ERROR(internal::CheckDenseChain(tensors, 0, kImageSize, "a weight"));
  return std::unique_ptr<MlpCpu>(new MlpCpu(std::move(tensors), max_batch));
}

MlpCpu::MlpCpu(std::vector<TensorSpec> tensors, int max_batch)
    : tensors_(std::move(tensors)), max_batch_(max_batch) {
  size_t total = 0;
  for (const TensorSpec& spec : tensors_) {
    offsets_.push_back(total);
    total += spec.elements();
  }
  params_.assign(total, 0.0f);
  grads_.assign(total, 0.0f);
  std::vector<int> widths = {kImageSize};
  for (size_t t = 0; t < tensors_.size(); t += 2) {
    widths.push_back(static_cast<int>(tensors_[t].shape[0]));
  }
  layers_ = std::make_unique<internal::DenseStack>(std::move(widths), /*first_tensor=*/0,
                                                   offsets_, max_batch_,
                                                   internal::DenseStack::Position::kWholeModel);
}

MlpCpu::~MlpCpu() = default;

void MlpCpu::Forward(const float* x, int batch) {
  CHECK_GE(batch, 1);
  CHECK_LE(batch, max_batch_);
  layers_->Forward(x, params_.data(), batch);
}

float MlpCpu::TrainStep(const float* x, const uint8_t* labels, int batch,
                        const std::function<void(int)>& on_tensor_ready) {
  Forward(x, batch);
  const double loss_sum =
      layers_->Backward(x, labels, params_.data(), batch, grads_.data(), on_tensor_ready);
  return static_cast<float>(loss_sum / batch);
}

int64_t MlpCpu::CountCorrect(const float* x, const uint8_t* labels, int batch) {
  Forward(x, batch);
  return layers_->CountCorrect(labels, batch);
}

}  // namespace tamp
