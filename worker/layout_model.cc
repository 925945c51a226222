#include "worker/layout_model.h"

#include <chrono>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/philox.h"

namespace tamp {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration Ms(double ms) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

}  // namespace

LayoutModel::LayoutModel(std::vector<TensorSpec> tensors, LayerProfile profile)
    : tensors_(std::move(tensors)), profile_(std::move(profile)) {}

absl::StatusOr<std::unique_ptr<LayoutModel>> LayoutModel::Create(std::vector<TensorSpec> tensors,
                                                                  LayerProfile profile,
                                                                  uint64_t seed) {
  for (const ProfileLayer& layer : profile.layers) {
    for (int t : layer.tensors) {
      if (t < 0 || static_cast<size_t>(t) >= tensors.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the profile names tensor ", t, " but the layout has ", tensors.size()));
      }
    }
  }
  std::unique_ptr<LayoutModel> model(new LayoutModel(std::move(tensors), std::move(profile)));
  uint64_t total = 0;
  for (const TensorSpec& tensor : model->tensors_) {
    model->offsets_.push_back(total);
    total += static_cast<uint64_t>(tensor.elements());
  }
  model->params_.assign(total, 0.0f);
  model->grads_.assign(total, 0.0f);
  model->noise_.resize(total);
  // Box-Muller on two Philox uniforms per pair of elements.
  const PhiloxStream rng({.seed = seed, .step = 0, .chunk = 0, .worker = kSharedStream});
  for (uint64_t i = 0; i < total; i += 2) {
    const float u1 = 1.0f - rng.Uniform(i);  // In (0, 1]: log is finite.
    const float u2 = rng.Uniform(i + 1);
    const float r = std::sqrt(-2.0f * std::log(u1));
    const float angle = 6.2831853f * u2;
    model->noise_[i] = r * std::cos(angle);
    if (i + 1 < total) model->noise_[i + 1] = r * std::sin(angle);
  }
  return model;
}

void LayoutModel::FillGradient(int tensor, uint64_t step) {
  const TensorSpec& spec = tensors_[tensor];
  const uint64_t n = static_cast<uint64_t>(spec.elements());
  const float scale = static_cast<float>(0.01 / std::sqrt(static_cast<double>(spec.fan_in)) /
                                         std::sqrt(1.0 + static_cast<double>(step) / 100.0));
  // A large odd stride: consecutive steps' offsets are far apart within the tensor.
  const uint64_t shift = (step * 2654435761u) % n;
  const float* noise = noise_.data() + offsets_[tensor];
  float* out = grads_.data() + offsets_[tensor];
  for (uint64_t i = 0; i + shift < n; ++i) out[i] = noise[i + shift] * scale;
  for (uint64_t i = n - shift; i < n; ++i) out[i] = noise[i + shift - n] * scale;
}

void LayoutModel::FillGradients(uint64_t step) {
  for (size_t t = 0; t < tensors_.size(); ++t) FillGradient(static_cast<int>(t), step);
}

float LayoutModel::TrainStep(const float* /*x*/, const uint8_t* /*labels*/, int /*batch*/,
                             const std::function<void(int tensor)>& on_tensor_ready) {
  const Clock::time_point start = Clock::now();
  const double scale = profile_.scale;
  double compute_ms = 0;
  for (const ProfileLayer& layer : profile_.layers) compute_ms += layer.forward_ms * scale;
  std::this_thread::sleep_until(start + Ms(compute_ms));
  Clock::duration in_callbacks{0};
  for (auto layer = profile_.layers.rbegin(); layer != profile_.layers.rend(); ++layer) {
    for (int t : layer->tensors) FillGradient(t, step_);
    compute_ms += layer->backward_ms * scale;
    std::this_thread::sleep_until(start + Ms(compute_ms) + in_callbacks);
    const Clock::time_point callbacks = Clock::now();
    for (auto t = layer->tensors.rbegin(); t != layer->tensors.rend(); ++t) on_tensor_ready(*t);
    in_callbacks += Clock::now() - callbacks;
  }
  ++step_;
  return 0;
}

absl::StatusOr<std::unique_ptr<LayoutModel>> LoadLayoutModel(const config::Model& model,
                                                             std::vector<TensorSpec> tensors,
                                                             uint64_t seed) {
  absl::StatusOr<LayerProfile> profile = LoadProfileFile(model.profile_file(), tensors);
  if (!profile.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.profile_file: ", profile.status().message()));
  }
  return LayoutModel::Create(std::move(tensors), *std::move(profile), seed);
}

}  // namespace tamp
