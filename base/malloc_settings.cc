#include "base/malloc_settings.h"

#include <malloc.h>

#include "absl/strings/str_cat.h"

namespace tamp {
namespace {

// glibc's largest mmap threshold on 64-bit hosts (DEFAULT_MMAP_THRESHOLD_MAX); setting it
// also stops glibc from moving it.
constexpr int kMmapThreshold = 32 << 20;
// Free memory a heap may keep at its top before it is trimmed.
constexpr int kTrimThreshold = 1 << 30;

// mallopt(option, value), which returns 1 on success.
absl::Status SetOption(int option, int value, const char* name) {
  if (mallopt(option, value) == 1) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("mallopt(", name, ", ", value, ") refused; is glibc's malloc replaced (a "
                   "sanitizer)? Freed memory goes back to the kernel as by default"));
}

}  // namespace

absl::Status KeepFreedMemory() {
  // Setting either also stops glibc from moving both as blocks are freed.
  if (absl::Status set = SetOption(M_MMAP_THRESHOLD, kMmapThreshold, "M_MMAP_THRESHOLD");
      !set.ok()) {
    return set;
  }
  return SetOption(M_TRIM_THRESHOLD, kTrimThreshold, "M_TRIM_THRESHOLD");
}

absl::Status ShareOneHeap() { return SetOption(M_ARENA_MAX, 1, "M_ARENA_MAX"); }

}  // namespace tamp
