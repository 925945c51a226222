// Shape checks shared by the CPU models' Create(): error messages that name the tensor.
#ifndef TAMP_WORKER_INTERNAL_TENSOR_CHECKS_H_
#define TAMP_WORKER_INTERNAL_TENSOR_CHECKS_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "job/model_layout.h"

namespace tamp::internal {

// "[a, b, c]"
std::string ShapeString(const std::vector<int64_t>& shape);

// INVALID_ARGUMENT: "tensor <t> (<name>): expected <expected>, got shape [..]".
absl::Status BadTensor(int t, const TensorSpec& spec, absl::string_view expected);

// A layer width the models can index with int.
inline bool ValidWidth(int64_t w) { return w >= 1 && w <= std::numeric_limits<int>::max(); }

// tensors[first..] as fully connected layers on `in` inputs (internal/dense_stack.h): pairs
// of `weight` [out, in] (e.g. "a weight") and bias [out], each layer's in the previous out,
// the last out kNumClasses. BadTensor() naming the first that is not.
absl::Status CheckDenseChain(const std::vector<TensorSpec>& tensors, int first, int64_t in,
                             absl::string_view weight);

}  // namespace tamp::internal

#endif  // TAMP_WORKER_INTERNAL_TENSOR_CHECKS_H_
