// The placement flags tamp_server and tamp_worker share (--placement, --base_port,
// --k8s_statefulset, --k8s_service), defined once, and the PlacementRequest they make.
#ifndef TAMP_JOB_PLACEMENT_FLAGS_H_
#define TAMP_JOB_PLACEMENT_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "job/placement.h"
#include "proto/config.pb.h"

namespace tamp {

// The request for `role` from the shared flags and `cluster`'s counts; `flag_rank` and
// `flag_servers` are the binary's own --rank (none when not given: 0 for the flags
// placement, and no disagreement with the environment's) and server list. INVALID_ARGUMENT naming
// --placement when its value is unknown.
absl::StatusOr<PlacementRequest> PlacementRequestFromFlags(Role role,
                                                           const config::Cluster& cluster,
                                                           std::optional<uint32_t> flag_rank,
                                                           std::vector<std::string> flag_servers);

}  // namespace tamp

#endif  // TAMP_JOB_PLACEMENT_FLAGS_H_
