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

}  // namespace tamp::internal
