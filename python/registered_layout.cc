#include "python/registered_layout.h"

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace tamp::python {
namespace {

// The registered-tensor overload of BuildJobLayout(), when common/job_layout.h declares it
// (found by argument-dependent lookup at instantiation). This lets the binding build both
// before and after that overload lands; once it has, the detection can go.
template <typename Specs, typename = void>
struct HasTensorOverload : std::false_type {};
template <typename Specs>
struct HasTensorOverload<Specs, std::void_t<decltype(BuildJobLayout(
                                    std::declval<const config::RunConfig&>(),
                                    std::declval<Specs>()))>> : std::true_type {};

template <typename Specs>
absl::StatusOr<JobLayout> BuildLayout(const config::RunConfig& config, Specs specs) {
  if constexpr (HasTensorOverload<Specs>::value) {
    return BuildJobLayout(config, std::move(specs));
  } else {
    return BuildJobLayout(config);
  }
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// INVALID_ARGUMENT naming the first registered tensor that is not the layout's.
absl::Status CheckSame(const JobLayout& layout, const std::vector<RegisteredTensor>& tensors) {
  const size_t common = std::min(layout.tensors.size(), tensors.size());
  for (size_t t = 0; t < common; ++t) {
    const TensorSpec& spec = layout.tensors[t];
    if (spec.name != tensors[t].name || spec.shape != tensors[t].shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "registered tensor ", t, " is \"", tensors[t].name, "\" ", ShapeText(tensors[t].shape),
          "; the job's model has \"", spec.name, "\" ", ShapeText(spec.shape), " there"));
    }
  }
  if (tensors.size() > common) {
    return absl::InvalidArgumentError(absl::StrCat("registered tensor \"", tensors[common].name,
                                                   "\" is not in the job's model (it has ",
                                                   layout.tensors.size(), " tensors)"));
  }
  if (layout.tensors.size() > common) {
    return absl::InvalidArgumentError(absl::StrCat("the job's model has tensor \"",
                                                   layout.tensors[common].name,
                                                   "\", which was not registered"));
  }
  return absl::OkStatus();
}

}  // namespace

bool LayoutFromRegisteredTensors() {
  return HasTensorOverload<std::vector<TensorSpec>>::value;
}

absl::StatusOr<JobLayout> BuildRegisteredLayout(const config::RunConfig& config,
                                                const std::vector<RegisteredTensor>& tensors) {
  std::vector<TensorSpec> specs(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    specs[t].name = tensors[t].name;
    specs[t].shape = tensors[t].shape;
  }
  TAMP_ASSIGN_OR_RETURN(JobLayout layout, BuildLayout(config, std::move(specs)));
  // Whichever way the layout was built, the client's tensors are the caller's.
  TAMP_RETURN_IF_ERROR(CheckSame(layout, tensors));
  return layout;
}

}  // namespace tamp::python
