#ifndef TAMP_JOB_ADDRESS_H_
#define TAMP_JOB_ADDRESS_H_

// Server addresses as configs, flags and launchers' variables give them.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tamp {

// OK when `address` is "host:port" or "[v6-literal]:port" with a port in [1, 65535]; else
// INVALID_ARGUMENT "WHAT: 'ADDRESS' is not host:port ..." (`what` names the field or
// variable it came from).
absl::Status ValidateHostPort(absl::string_view address, absl::string_view what);

// The port of a valid "host:port" (ValidateHostPort's error otherwise).
absl::StatusOr<uint32_t> PortOf(absl::string_view address, absl::string_view what);

// Every address of a server list valid (ValidateHostPort) and no address twice: INVALID_ARGUMENT
// "WHAT: '127.0.0.1:5000' is given twice (servers 0 and 1): each server needs an address of
// its own" otherwise.
absl::Status ValidateServerList(const std::vector<std::string>& addresses,
                                absl::string_view what);

}  // namespace tamp

#endif  // TAMP_JOB_ADDRESS_H_
