#include "worker/internal/tensor_checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tamp::internal {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status BadTensor(int t, const TensorSpec& spec, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("tensor ", t, " (", spec.name, "): expected ",
                                                 expected, ", got shape ", ShapeString(spec.shape)));
}

absl::Status CheckDenseChain(const std::vector<TensorSpec>& tensors, int first, int64_t in,
                             absl::string_view weight) {
  const int num_tensors = static_cast<int>(tensors.size());
  for (int t = first; t + 1 < num_tensors; t += 2) {
    const TensorSpec& w = tensors[t];
    const TensorSpec& bias = tensors[t + 1];
    if (w.is_bias || w.shape.size() != 2 || w.shape[1] != in || !ValidWidth(w.shape[0])) {
      return BadTensor(t, w, absl::StrCat(weight, " of shape [out, ", in, "]"));
    }
    const int64_t out = w.shape[0];
    if (!bias.is_bias || bias.shape != std::vector<int64_t>{out}) {
      return BadTensor(t + 1, bias, absl::StrCat("a bias of shape [", out, "]"));
    }
    in = out;
  }
  if (in != kNumClasses) {
    return BadTensor(num_tensors - 2, tensors[num_tensors - 2],
                     absl::StrCat("the last layer to have ", kNumClasses, " outputs"));
  }
  return absl::OkStatus();
}

}  // namespace tamp::internal
