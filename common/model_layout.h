// The tensors of a model (names, shapes, initialisation), derived from config::Model alone so
// that servers (which initialise and own the weights) and workers (which compute with them)
// agree on the layout without talking.
//
// MLP with hidden [h1, ..., hk]: fc1.weight [h1, 784], fc1.bias [h1], ..., fc{k+1}.weight
// [10, hk], fc{k+1}.bias [10]. Weights are row-major [out, in].
#ifndef TAMP_COMMON_MODEL_LAYOUT_H_
#define TAMP_COMMON_MODEL_LAYOUT_H_

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

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  int64_t fan_in = 0;    // Inputs feeding one output unit (He initialisation).
  bool is_bias = false;  // Biases start at zero.

  int64_t elements() const;
};

// True when tensor `name` matches an override pattern: the exact name, or a prefix followed
// by '*' ("fc1.*").
bool TensorNameMatches(absl::string_view pattern, absl::string_view name);

// Errors name the offending config field (model.kind, model.hidden).
absl::StatusOr<std::vector<TensorSpec>> ModelTensors(const config::Model& model);

// Fills `out` (spec.elements() values) with the initial value of tensor `tensor_index`:
// He-uniform U(-sqrt(6/fan_in), sqrt(6/fan_in)) for weights, 0 for biases. Deterministic in
// (seed, tensor_index); `first_element` lets a shard initialise just its chunk.
void InitTensorSlice(const TensorSpec& spec, uint64_t seed, uint32_t tensor_index,
                     uint64_t first_element, absl::Span<float> out);

}  // namespace tamp

#endif  // TAMP_COMMON_MODEL_LAYOUT_H_
