// Force-included (-include) by bench/fuzz.sh when clang cannot build a construct the
// project's gcc build uses. Each part is enabled by a -D the script sets after probing
// the compiler:
//
// TAMP_FUZZ_SHIM_CPU_SUPPORTS: clang 14 rejects __builtin_cpu_supports("f16c") ("invalid
//   cpu feature string for builtin"; compress/fp16.cc). Every __builtin_cpu_supports(LITERAL)
//   is routed to TampFuzzCpuSupports(), which answers "f16c" from CPUID (leaf 1, ECX bit 29,
//   and AVX, which fp16.cc also asks for) and forwards the features clang knows to the real
//   builtin. An unknown feature answers false, which only selects a portable path.
//
// TAMP_FUZZ_SHIM_TARGET_CLONES: clang 14 rejects target_clones on function templates
//   ("multiversioned functions do not yet support function templates";
//   compress/internal/quantize.h's TAMP_QUANTIZE_KERNEL). The attribute is dropped, so those
//   loops build once for the baseline ISA; their versions are documented to give the same
//   bits, and fuzzing is about the bounds checks around them, not the vector code.
#ifndef TAMP_BENCH_FUZZ_CLANG_COMPAT_H_
#define TAMP_BENCH_FUZZ_CLANG_COMPAT_H_

#ifdef TAMP_FUZZ_SHIM_CPU_SUPPORTS
#include <cpuid.h>
#include <string.h>

static inline int TampFuzzCpuSupports(const char* feature) {
  __builtin_cpu_init();
  if (strcmp(feature, "f16c") == 0) {
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1) != 0 &&
           __builtin_cpu_supports("avx");
  }
  if (strcmp(feature, "avx") == 0) return __builtin_cpu_supports("avx");
  if (strcmp(feature, "avx2") == 0) return __builtin_cpu_supports("avx2");
  if (strcmp(feature, "avx512f") == 0) return __builtin_cpu_supports("avx512f");
  if (strcmp(feature, "fma") == 0) return __builtin_cpu_supports("fma");
  if (strcmp(feature, "sse4.1") == 0) return __builtin_cpu_supports("sse4.1");
  if (strcmp(feature, "sse4.2") == 0) return __builtin_cpu_supports("sse4.2");
  if (strcmp(feature, "bmi2") == 0) return __builtin_cpu_supports("bmi2");
  return 0;
}

#define __builtin_cpu_supports(feature) TampFuzzCpuSupports(feature)
#endif  // TAMP_FUZZ_SHIM_CPU_SUPPORTS

#ifdef TAMP_FUZZ_SHIM_TARGET_CLONES
// Attribute names are macro-expanded: __attribute__((target_clones(...))) becomes
// __attribute__(()), an empty attribute list.
#define target_clones(...)
#endif  // TAMP_FUZZ_SHIM_TARGET_CLONES

#endif  // TAMP_BENCH_FUZZ_CLANG_COMPAT_H_
