// Status helpers missing from Debian 12's Abseil (20220623).
//
//   TAMP_RETURN_IF_ERROR(expr);            returns expr's Status if it is not OK.
//   TAMP_ASSIGN_OR_RETURN(auto x, expr);   unwraps a StatusOr or returns its Status.
#ifndef TAMP_BASE_STATUS_MACROS_H_
#define TAMP_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TAMP_RETURN_IF_ERROR(expr)                     \
  do {                                                 \
    ::absl::Status tamp_status_ = (expr);              \
    if (!tamp_status_.ok()) return tamp_status_;       \
  } while (0)

#define TAMP_STATUS_CONCAT_INNER_(a, b) a##b
#define TAMP_STATUS_CONCAT_(a, b) TAMP_STATUS_CONCAT_INNER_(a, b)

#define TAMP_ASSIGN_OR_RETURN(lhs, expr) \
  TAMP_ASSIGN_OR_RETURN_IMPL_(TAMP_STATUS_CONCAT_(tamp_statusor_, __LINE__), lhs, expr)

#define TAMP_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                \
  if (!statusor.ok()) return statusor.status();          \
  lhs = std::move(statusor).value()

#endif  // TAMP_BASE_STATUS_MACROS_H_
