#include "worker/openblas_kernels.h"

#include <cblas.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>

namespace tamp {

const char* BetterOpenblasCoretype() {
  if (std::strcmp(openblas_get_corename(), "Prescott") != 0) return nullptr;
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2")) return "Haswell";
  return nullptr;
}

void ReexecWithFasterOpenblasKernels(char** argv) {
  if (getenv("OPENBLAS_CORETYPE") != nullptr) return;  // The user's choice stands.
  const char* coretype = BetterOpenblasCoretype();
  if (coretype == nullptr) return;
  // Set before exec, so the new image loads OpenBLAS with it and this branch is not taken
  // again (the variable is now set).
  setenv("OPENBLAS_CORETYPE", coretype, /*overwrite=*/1);
  execv("/proc/self/exe", argv);
}

}  // namespace tamp
