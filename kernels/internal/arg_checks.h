// Argument checks of the kernels/ entry points: INVALID_ARGUMENT naming the argument.
// Internal to kernels/.
#ifndef TAMP_KERNELS_INTERNAL_ARG_CHECKS_H_
#define TAMP_KERNELS_INTERNAL_ARG_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tamp::kernels::internal {

inline absl::Status CheckPositive(const char* name, int64_t value) {
  if (value < 1) return absl::InvalidArgumentError(absl::StrCat(name, " must be >= 1, got ", value));
  return absl::OkStatus();
}

inline absl::Status CheckNotNull(const char* name, const void* p) {
  if (p == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, " is null"));
  return absl::OkStatus();
}

}  // namespace tamp::kernels::internal

#define TAMP_CHECK_ARG(expr)                                 \
  do {                                                       \
    const ::absl::Status tamp_arg_status_ = (expr);          \
    if (!tamp_arg_status_.ok()) return tamp_arg_status_;     \
  } while (0)

#endif  // TAMP_KERNELS_INTERNAL_ARG_CHECKS_H_
