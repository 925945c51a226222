#include "common/model_layout.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/philox.h"

namespace tamp {

int64_t TensorSpec::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool TensorNameMatches(absl::string_view pattern, absl::string_view name) {
  if (!pattern.empty() && pattern.back() == '*') {
    return absl::StartsWith(name, pattern.substr(0, pattern.size() - 1));
  }
  return pattern == name;
}

absl::StatusOr<std::vector<TensorSpec>> ModelTensors(const config::Model& model) {
  if (model.kind() != config::Model::MLP) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.kind: unsupported model kind ", config::Model::Kind_Name(model.kind()),
                     " (supported: MLP)"));
  }
  std::vector<int64_t> widths = {kImageSize};
  for (int i = 0; i < model.hidden_size(); ++i) {
    const uint32_t h = model.hidden(i);
    if (h == 0 || h > (1u << 16)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model.hidden[", i, "]: width must be in [1, 65536], got ", h));
    }
    widths.push_back(h);
  }
  widths.push_back(kNumClasses);
  std::vector<TensorSpec> tensors;
  for (size_t layer = 0; layer + 1 < widths.size(); ++layer) {
    const std::string prefix = absl::StrCat("fc", layer + 1);
    tensors.push_back({prefix + ".weight", {widths[layer + 1], widths[layer]}, widths[layer], false});
    tensors.push_back({prefix + ".bias", {widths[layer + 1]}, widths[layer], true});
  }
  return tensors;
}

void InitTensorSlice(const TensorSpec& spec, uint64_t seed, uint32_t tensor_index,
                     uint64_t first_element, absl::Span<float> out) {
  if (spec.is_bias) {
    for (float& v : out) v = 0.0f;
    return;
  }
  const float bound = std::sqrt(6.0f / static_cast<float>(spec.fan_in));
  const PhiloxStream rng({.seed = seed, .step = 0, .chunk = tensor_index, .worker = 0});
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = (2.0f * rng.Uniform(first_element + i) - 1.0f) * bound;
  }
}

}  // namespace tamp
