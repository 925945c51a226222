#include "worker/layout_model.h"

#include <chrono>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/philox.h"
#include "glog/logging.h"

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
  std::vector<float> scales;
  for (const TensorSpec& tensor : model->tensors_) {
    model->noise_offsets_.push_back(2 * total);
    total += static_cast<uint64_t>(tensor.elements());
    scales.push_back(static_cast<float>(0.01 / std::sqrt(static_cast<double>(tensor.fan_in))));
  }
  model->params_.assign(total, 0.0f);
  model->noise_.resize(2 * total);
  // Flat index i's value goes to its tensor's noise, both copies.
  size_t tensor = 0;
  uint64_t first = 0;  // Flat index of `tensor`'s first element.
  auto place = [&](uint64_t i, float normal) {
    while (i >= first + static_cast<uint64_t>(model->tensors_[tensor].elements())) {
      first += static_cast<uint64_t>(model->tensors_[tensor].elements());
      ++tensor;
    }
    const uint64_t n = static_cast<uint64_t>(model->tensors_[tensor].elements());
    float* noise = model->noise_.data() + model->noise_offsets_[tensor];
    noise[i - first] = noise[n + i - first] = normal * scales[tensor];
  };
  // Box-Muller on two Philox uniforms per pair of flat elements.
  const PhiloxStream rng({.seed = seed, .step = 0, .chunk = 0, .worker = kSharedStream});
  for (uint64_t i = 0; i < total; i += 2) {
    const float u1 = 1.0f - rng.Uniform(i);  // In (0, 1]: log is finite.
    const float u2 = rng.Uniform(i + 1);
    const float r = std::sqrt(-2.0f * std::log(u1));
    const float angle = 6.2831853f * u2;
    place(i, r * std::cos(angle));
    if (i + 1 < total) place(i + 1, r * std::sin(angle));
  }
  return model;
}

absl::Span<const float> LayoutModel::Gradient(int tensor, uint64_t step) const {
  const uint64_t n = static_cast<uint64_t>(tensors_[tensor].elements());
  // A large odd stride: consecutive steps' offsets are far apart within the tensor.
  const uint64_t shift = (step * 2654435761u) % n;
  return absl::MakeConstSpan(noise_.data() + noise_offsets_[tensor] + shift, n);
}

absl::Span<const float> LayoutModel::gradient(int tensor, size_t /*offset*/,
                                              size_t elements) const {
  const absl::Span<const float> view = Gradient(tensor, step_);
  CHECK_EQ(view.size(), elements) << "tensor " << tensor << ": the layout differs from the model's";
  return view;
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
