// The tensors of a model (names, shapes, initialisation), derived from config::Model alone so
// that servers (which initialise and own the weights) and workers (which compute with them)
// agree on the layout without talking.
//
// MLP with hidden [h1, ..., hk]: fc1.weight [h1, 784], fc1.bias [h1], ..., fc{k+1}.weight
// [10, hk], fc{k+1}.bias [10]. Weights are row-major [out, in].
//
// CNN with conv_channels [c1, ..., cn], kernel_size k and fc_hidden [h1, ..., hm]:
// conv1.weight [c1, 1, k, k], conv1.bias [c1], conv2.weight [c2, c1, k, k], conv2.bias [c2],
// ..., then fc1.weight [h1, cn * s * s], fc1.bias [h1], ..., fc{m+1}.weight [10, hm],
// fc{m+1}.bias [10], where s = 28 halved (rounding down) n times by the 2x2 max-pools. Conv
// weights are row-major [out_channels, in_channels, ky, kx] (PyTorch's layout), and fc1's
// inputs are the last pool's output flattened as (channel, y, x).
//
// LAYOUT: the tensors of model.layout_file (job/layout_file.h), read on each call.
// REGISTERED: the workers' tensors, as model.layout_file describes them ahead (for planning:
// tamp model, compression.automatic); without the file, an error saying so.
#ifndef TAMP_JOB_MODEL_LAYOUT_H_
#define TAMP_JOB_MODEL_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/config.pb.h"

namespace tamp {

inline constexpr int kImageSize = 784;  // 28 x 28 Fashion-MNIST
inline constexpr int kNumClasses = 10;
inline constexpr int kImageSide = 28;

// CNN defaults, filled in by ApplyDefaults (job/config.h) when the fields are unset.
inline constexpr uint32_t kDefaultConvChannels[] = {32, 64};
inline constexpr uint32_t kDefaultKernelSize = 5;

// The most dimensions a tensor of a layout may have.
inline constexpr int kMaxTensorDims = 8;

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t fan_in = 0;    // Inputs feeding one output unit (He initialisation).
  bool is_bias = false;  // Biases start at zero.

  int64_t elements() const;
};

// True when tensor `name` matches an override pattern: the exact name, or a glob whose '*'
// stands for any run of characters, dots included ("fc1.*", "blocks.*.attn.*.weight",
// "*.bias").
bool TensorNameMatches(absl::string_view pattern, absl::string_view name);

// True when `pattern` can name tensors: not empty.
bool IsTensorPattern(absl::string_view pattern);

// Errors name the offending config field (model.kind, model.hidden, model.conv_channels,
// model.kernel_size, model.fc_hidden, model.layout_file with the file's own error). Fields
// of the other kinds must be unset.
absl::StatusOr<std::vector<TensorSpec>> ModelTensors(const config::Model& model);

// Fills `out` (spec.elements() values) with the initial value of tensor `tensor_index`:
// He-uniform U(-sqrt(6/fan_in), sqrt(6/fan_in)) for weights, 0 for biases. Deterministic in
// (seed, tensor_index); `first_element` lets a shard initialise just its chunk.
void InitTensorSlice(const TensorSpec& spec, uint64_t seed, uint32_t tensor_index,
                     uint64_t first_element, absl::Span<float> out);

}  // namespace tamp

#endif  // TAMP_JOB_MODEL_LAYOUT_H_
