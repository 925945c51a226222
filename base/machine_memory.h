// MachineMemoryBytes(): the memory this process's machine (or container) has, so that a
// process can refuse work that cannot fit before allocating it: a vector of more than the
// machine has ends in std::bad_alloc (an abort) or the kernel's OOM killer, not in an error
// that names what was too big.
#ifndef TAMP_BASE_MACHINE_MEMORY_H_
#define TAMP_BASE_MACHINE_MEMORY_H_

#include <cstdint>
#include <optional>

namespace tamp {

// The physical memory (sysconf), or the cgroup's memory limit where one is set and lower
// (cgroup v2 memory.max, else v1 memory.limit_in_bytes: a container's or a Slurm job's
// share); nullopt where neither can be read. Reads /sys on every call.
std::optional<uint64_t> MachineMemoryBytes();

}  // namespace tamp

#endif  // TAMP_BASE_MACHINE_MEMORY_H_
