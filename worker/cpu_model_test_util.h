// Inputs for the CPU models' tests (worker/mlp_cpu_test.cc, worker/cnn_cpu_test.cc).
#ifndef TAMP_WORKER_CPU_MODEL_TEST_UTIL_H_
#define TAMP_WORKER_CPU_MODEL_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "job/model_layout.h"

namespace tamp::testing {

// Weights He-uniform (as the servers initialise them); biases U(-0.1, 0.1) rather than zero,
// so that their gradients flow through every layer. `CpuModel`: MlpCpu or CnnCpu (tensors(),
// tensor_offset(t), params()).
template <typename CpuModel>
void RandomizeParams(CpuModel& model, uint64_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> bias_value(-0.1f, 0.1f);
  for (size_t t = 0; t < model.tensors().size(); ++t) {
    const TensorSpec& spec = model.tensors()[t];
    absl::Span<float> values = model.params().subspan(model.tensor_offset(t), spec.elements());
    if (spec.is_bias) {
      for (float& v : values) v = bias_value(rng);
    } else {
      InitTensorSlice(spec, seed, t, 0, values);
    }
  }
}

// `batch` images of uniform values over the normalised pixels' range.
inline std::vector<float> RandomInputs(int batch, uint64_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> pixel(-0.8f, 2.0f);
  std::vector<float> x(static_cast<size_t>(batch) * kImageSize);
  for (float& v : x) v = pixel(rng);
  return x;
}

}  // namespace tamp::testing

#endif  // TAMP_WORKER_CPU_MODEL_TEST_UTIL_H_
