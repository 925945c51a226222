// A random 64-bit id for a process or a run of one, never 0 (0 means "none" on the wire):
// a server's incarnation, a worker process's id. Drawn from std::random_device, so two
// processes started at the same instant still differ.
#ifndef TAMP_BASE_RANDOM_ID_H_
#define TAMP_BASE_RANDOM_ID_H_

#include <cstdint>

namespace tamp {

uint64_t RandomNonZeroId();

}  // namespace tamp

#endif  // TAMP_BASE_RANDOM_ID_H_
