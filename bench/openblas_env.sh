# shellcheck shell=bash
# Sourced by the benches that run OpenBLAS GEMMs (Tamp's workers, the PyTorch peers) so that
# both use the same kernels. Debian's OpenBLAS 0.3.21 does not recognise every CPU it runs
# on and then falls back to its Prescott (SSE3) kernels, about 4x slower than the AVX-512
# ones; this names the kernel family from the CPU's flags unless the caller chose one
# (OPENBLAS_CORETYPE set in the environment wins).
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell
  fi
fi
