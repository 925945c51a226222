#include "base/machine_memory.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"

namespace tamp {
namespace {

// A cgroup limit file's number; nullopt for "max" (no limit) or a file that is not there.
std::optional<uint64_t> CgroupLimit(const char* path) {
  std::ifstream file(path);
  std::string word;
  uint64_t limit = 0;
  if (!(file >> word) || !absl::SimpleAtoi(word, &limit)) return std::nullopt;
  return limit;  // cgroup v1 says "no limit" with a number near 2^63: above any machine's.
}

}  // namespace

std::optional<uint64_t> MachineMemoryBytes() {
  std::optional<uint64_t> memory;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_bytes > 0) {
    memory = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_bytes);
  }
  for (const char* limit_file : {"/sys/fs/cgroup/memory.max",
                                 "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    if (std::optional<uint64_t> limit = CgroupLimit(limit_file); limit.has_value()) {
      memory = memory.has_value() ? std::min(*memory, *limit) : *limit;
      break;
    }
  }
  return memory;
}

}  // namespace tamp
