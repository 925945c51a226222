#include "job/address.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tamp {

absl::Status ValidateHostPort(absl::string_view address, absl::string_view what) {
  const size_t colon = address.rfind(':');
  absl::string_view host = address.substr(0, colon == absl::string_view::npos ? 0 : colon);
  // An IPv6 literal carries colons of its own, so it must be bracketed.
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != absl::string_view::npos) {
    host = {};
  }
  uint32_t port = 0;
  if (colon == absl::string_view::npos || host.empty() ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", address,
                     "' is not host:port (or [IPv6]:port) with a port in [1, 65535]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> PortOf(absl::string_view address, absl::string_view what) {
  TAMP_RETURN_IF_ERROR(ValidateHostPort(address, what));
  uint32_t port = 0;
  const bool parsed = absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port);
  return parsed ? port : 0;  // Always parsed: ValidateHostPort() read it.
}

absl::Status ValidateServerList(const std::vector<std::string>& addresses,
                                absl::string_view what) {
  for (size_t i = 0; i < addresses.size(); ++i) {
    TAMP_RETURN_IF_ERROR(ValidateHostPort(addresses[i], what));
    for (size_t j = 0; j < i; ++j) {
      if (addresses[j] == addresses[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": '", addresses[i], "' is given twice (servers ", j, " and ", i,
            "): each server needs an address of its own"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tamp
