#include "job/model_layout.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/philox.h"
#include "job/layout_file.h"

namespace tamp {

int64_t TensorSpec::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool TensorNameMatches(absl::string_view pattern, absl::string_view name) {
  // Greedy with one backtrack point: a mismatch after a '*' lets that '*' take one character
  // more. Linear for the names and patterns configs hold (at worst pattern x name).
  size_t p = 0, n = 0;
  size_t star = absl::string_view::npos, star_n = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_n = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != absl::string_view::npos) {
      p = star + 1;
      n = ++star_n;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool IsTensorPattern(absl::string_view pattern) { return !pattern.empty(); }

namespace {

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// Appends fc1.weight [w_1, w_0], fc1.bias [w_1], fc2.weight [w_2, w_1], ...: one (weight,
// bias) pair per layer of the chain `widths` (w_0 inputs, then each layer's outputs).
void AppendFullyConnected(const std::vector<int64_t>& widths, std::vector<TensorSpec>* tensors) {
  for (size_t layer = 0; layer + 1 < widths.size(); ++layer) {
    const std::string prefix = absl::StrCat("fc", layer + 1);
    tensors->push_back(
        {prefix + ".weight", {widths[layer + 1], widths[layer]}, widths[layer], false});
    tensors->push_back({prefix + ".bias", {widths[layer + 1]}, widths[layer], true});
  }
}

// The layout files are for kinds LAYOUT and REGISTERED.
absl::Status CheckNoLayoutFiles(const config::Model& model) {
  if (!model.layout_file().empty()) {
    return FieldError("model.layout_file", "is for kinds LAYOUT and REGISTERED");
  }
  if (!model.profile_file().empty()) {
    return FieldError("model.profile_file", "is for kinds LAYOUT and REGISTERED");
  }
  return absl::OkStatus();
}

// LAYOUT's tensors, or REGISTERED's described ahead: model.layout_file's, with
// model.profile_file beside it.
absl::StatusOr<std::vector<TensorSpec>> LayoutTensors(const config::Model& model) {
  const std::string kind = config::Model::Kind_Name(model.kind());
  if (model.hidden_size() != 0 || model.conv_channels_size() != 0 || model.kernel_size() != 0 ||
      model.fc_hidden_size() != 0) {
    return FieldError("model", absl::StrCat("kind ", kind,
                                            " takes its tensors from model.layout_file; hidden, "
                                            "conv_channels, kernel_size and fc_hidden must be "
                                            "unset"));
  }
  if (model.layout_file().empty()) {
    return FieldError("model.layout_file",
                      model.kind() == config::Model::LAYOUT
                          ? "required for kind LAYOUT"
                          : "kind REGISTERED has no tensors until the workers register them; "
                            "a layout_file (with a profile_file) describes them ahead, for "
                            "tamp model and compression.automatic");
  }
  if (model.profile_file().empty()) {
    return FieldError("model.profile_file", absl::StrCat("required with model.layout_file (kind ",
                                                         kind, ")"));
  }
  absl::StatusOr<std::vector<TensorSpec>> tensors = LoadLayoutFile(model.layout_file());
  if (!tensors.ok()) return FieldError("model.layout_file", tensors.status().message());
  return tensors;
}

absl::StatusOr<std::vector<TensorSpec>> MlpTensors(const config::Model& model) {
  if (absl::Status files = CheckNoLayoutFiles(model); !files.ok()) return files;
  if (model.conv_channels_size() != 0) {
    return FieldError("model.conv_channels", "is for kind CNN; this model is an MLP");
  }
  if (model.kernel_size() != 0) {
    return FieldError("model.kernel_size", "is for kind CNN; this model is an MLP");
  }
  if (model.fc_hidden_size() != 0) {
    return FieldError("model.fc_hidden",
                      "is for kind CNN; an MLP's hidden widths are model.hidden");
  }
  std::vector<int64_t> widths = {kImageSize};
  for (int i = 0; i < model.hidden_size(); ++i) {
    const uint32_t h = model.hidden(i);
    if (h == 0 || h > (1u << 16)) {
      return FieldError(absl::StrCat("model.hidden[", i, "]"),
                        absl::StrCat("width must be in [1, 65536], got ", h));
    }
    widths.push_back(h);
  }
  widths.push_back(kNumClasses);
  std::vector<TensorSpec> tensors;
  AppendFullyConnected(widths, &tensors);
  return tensors;
}

absl::StatusOr<std::vector<TensorSpec>> CnnTensors(const config::Model& model) {
  if (absl::Status files = CheckNoLayoutFiles(model); !files.ok()) return files;
  if (model.hidden_size() != 0) {
    return FieldError("model.hidden",
                      "is for kind MLP; a CNN's fully connected widths are model.fc_hidden");
  }
  const uint32_t k = model.kernel_size();
  if (k % 2 == 0 || k > 15) {
    return FieldError("model.kernel_size",
                      absl::StrCat("must be odd ('same' padding) and in [1, 15], got ", k));
  }
  const int layers = model.conv_channels_size();
  if (layers < 1 || layers > 4) {
    return FieldError("model.conv_channels",
                      absl::StrCat("a CNN has 1 to 4 convolution layers (each 2x2 max-pool halves "
                                   "the 28x28 image), got ",
                                   layers));
  }
  std::vector<TensorSpec> tensors;
  int64_t in_channels = 1;
  int64_t side = kImageSide;
  for (int i = 0; i < layers; ++i) {
    const uint32_t c = model.conv_channels(i);
    if (c == 0 || c > 1024) {
      return FieldError(absl::StrCat("model.conv_channels[", i, "]"),
                        absl::StrCat("channels must be in [1, 1024], got ", c));
    }
    const std::string prefix = absl::StrCat("conv", i + 1);
    const int64_t fan_in = in_channels * k * k;
    tensors.push_back({prefix + ".weight", {c, in_channels, k, k}, fan_in, false});
    tensors.push_back({prefix + ".bias", {c}, fan_in, true});
    in_channels = c;
    side /= 2;
  }
  std::vector<int64_t> widths = {in_channels * side * side};
  for (int i = 0; i < model.fc_hidden_size(); ++i) {
    const uint32_t h = model.fc_hidden(i);
    if (h == 0 || h > (1u << 16)) {
      return FieldError(absl::StrCat("model.fc_hidden[", i, "]"),
                        absl::StrCat("width must be in [1, 65536], got ", h));
    }
    widths.push_back(h);
  }
  widths.push_back(kNumClasses);
  AppendFullyConnected(widths, &tensors);
  return tensors;
}

}  // namespace

absl::StatusOr<std::vector<TensorSpec>> ModelTensors(const config::Model& model) {
  switch (model.kind()) {
    case config::Model::MLP:
      return MlpTensors(model);
    case config::Model::CNN:
      return CnnTensors(model);
    case config::Model::LAYOUT:
    case config::Model::REGISTERED:
      return LayoutTensors(model);
    default:
      return FieldError("model.kind",
                        absl::StrCat("unsupported model kind ",
                                     config::Model::Kind_Name(model.kind()),
                                     " (supported: MLP, CNN, LAYOUT, REGISTERED)"));
  }
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
