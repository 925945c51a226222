// OpenBLAS picks its GEMM kernels when it is loaded, from the CPU it recognises. Debian's
// OpenBLAS 0.3.21 does not recognise every recent CPU and then falls back to its SSE3
// "Prescott" kernels, which run the models' GEMMs about 4x slower than the AVX2/AVX-512 ones
// the CPU can run (docs/speed.md). Only the environment (OPENBLAS_CORETYPE) changes that
// choice, and only before the library loads.
#ifndef TAMP_WORKER_OPENBLAS_KERNELS_H_
#define TAMP_WORKER_OPENBLAS_KERNELS_H_

namespace tamp {

// The kernel family this CPU should get ("SkylakeX", "Haswell") when OpenBLAS fell back to
// Prescott on a CPU that can do better; nullptr when its choice is fine.
const char* BetterOpenblasCoretype();

// Call first thing in main(). When OpenBLAS fell back to Prescott and the user did not set
// OPENBLAS_CORETYPE, sets it and re-executes this program with the same arguments, once.
// Returns (without re-executing) when the choice is fine, when the user chose the kernels,
// or when exec fails; the caller may then warn with BetterOpenblasCoretype().
void ReexecWithFasterOpenblasKernels(char** argv);

}  // namespace tamp

#endif  // TAMP_WORKER_OPENBLAS_KERNELS_H_
