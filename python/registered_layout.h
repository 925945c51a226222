// The job layout of the tensors a Python worker registers (names and shapes, in its order).
//
// With `model { kind: REGISTERED }` (once common/job_layout.h has the overload
// BuildJobLayout(config, tensors)) the layout is built from the registered tensors. Until
// then, and for the built-in kinds (MLP, CNN), it is built from the config's model, and the
// registered tensors must be exactly its tensors (common/model_layout.h: PyTorch's names and
// shapes); otherwise INVALID_ARGUMENT names the first tensor that differs.
//
// Blocking and threading: pure computation, no I/O.
//
// Example:
//   TAMP_ASSIGN_OR_RETURN(JobLayout layout,
//       BuildRegisteredLayout(config, {{"fc1.weight", {64, 784}}, {"fc1.bias", {64}}, ...}));
#ifndef TAMP_PYTHON_REGISTERED_LAYOUT_H_
#define TAMP_PYTHON_REGISTERED_LAYOUT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/job_layout.h"
#include "proto/config.pb.h"

namespace tamp::python {

struct RegisteredTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// Whether this build's BuildJobLayout() takes the registered tensors (kind REGISTERED).
bool LayoutFromRegisteredTensors();

// `config` must be validated.
absl::StatusOr<JobLayout> BuildRegisteredLayout(const config::RunConfig& config,
                                                const std::vector<RegisteredTensor>& tensors);

}  // namespace tamp::python

#endif  // TAMP_PYTHON_REGISTERED_LAYOUT_H_
