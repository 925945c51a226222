#!/usr/bin/env bash
# Runs the GPU tests and benchmarks on a device machine, with binaries built on this one.
#
# The device machine (see the workplace's device README) has a GPU, nvcc and PyTorch but no
# Bazel and none of Debian's libraries, so the binaries are built here and travel with their
# non-system shared libraries in the git-ignored folder .gpu_carry/:
#
#   bench/gpu/run_on_device.sh pack         # here: bazel build + collect (no GPU needed)
#   device tool: run(command="bash bench/gpu/run_on_device.sh run", carry=[".gpu_carry"])
#                                           # there: tests, codec_gpu_bench, torch_compare.py
#   device tool: run(command="bash bench/gpu/run_on_device.sh sanitize", carry=[".gpu_carry"])
#                                           # there: compute-sanitizer memcheck/racecheck
#
# `run` writes, into $OUT (the device tool's return folder) or else bench/gpu/out/:
#   device.txt               nvidia-smi and the library paths used
#   layers_test.log, device_codec_test.log, emulation_test.log   the GoogleTest output
#   codec_gpu_bench.md       the Tamp table (bench/gpu/codec_gpu_bench.cc)
#   torch_compare.md         the same columns for GRACE-style PyTorch codecs
# ready to be copied into docs/. Exits non-zero if any test or benchmark failed.
#
# cuBLAS (libcublasLt alone is over 500 MB) does not travel: `run` finds the device's own
# libcublas.so.13 (CUDA toolkit, else PyTorch's nvidia-cublas wheel).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

CARRY=.gpu_carry
TARGETS=(
  //kernels:layers_test
  //compress/cuda:device_codec_test
  //compress/cuda:emulation_test
  //bench/gpu:codec_gpu_bench
)

pack() {
  bazel build "${TARGETS[@]}" || return 1
  rm -rf "$CARRY"
  mkdir -p "$CARRY/bin" "$CARRY/lib"
  local exclude
  exclude="$(git rev-parse --git-path info/exclude)"
  mkdir -p "$(dirname "$exclude")"
  grep -qxF "/$CARRY/" "$exclude" 2>/dev/null || echo "/$CARRY/" >>"$exclude"
  for target in "${TARGETS[@]}"; do
    local path="bazel-bin/${target#//}"
    path="${path/://}"
    cp -L "$path" "$CARRY/bin/" || return 1
  done
  # Every shared library the binaries load, except the C runtime, the driver and cuBLAS.
  ldd "$CARRY"/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    while read -r lib; do
      case "$(basename "$lib")" in
        libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libcuda.so* | \
          libcublas* | libgcc_s.so*) ;;
        *) cp -L "$lib" "$CARRY/lib/" ;;
      esac
    done
  du -sh "$CARRY"
  echo "packed: $(ls "$CARRY/bin" | tr '\n' ' ')"
}

# Sets LD_LIBRARY_PATH for the carried binaries; prints what it found.
library_path() {
  local dirs="$PWD/$CARRY/lib"
  local cublas=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/libcublas.so.13" ] && cublas="$d" && break
  done
  if [ -z "$cublas" ]; then
    for site in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
      [ -e "$site/nvidia/cublas/lib/libcublas.so.13" ] && cublas="$site/nvidia/cublas/lib" && break
      [ -e "$site/nvidia/cu13/lib/libcublas.so.13" ] && cublas="$site/nvidia/cu13/lib" && break
    done
  fi
  [ -z "$cublas" ] && cublas="$(dirname "$(find / -name libcublas.so.13 -not -path '/proc/*' 2>/dev/null | head -1)" 2>/dev/null)"
  [ -n "$cublas" ] && dirs="$dirs:$cublas"
  export LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
}

run() {
  [ -d "$CARRY/bin" ] || { echo "no $CARRY/bin: run 'pack' first and carry $CARRY"; return 1; }
  local out="${OUT:-bench/gpu/out}"
  mkdir -p "$out"
  local status=0
  {
    nvidia-smi || true
    library_path
  } >"$out/device.txt" 2>&1
  library_path >/dev/null
  for test in layers_test device_codec_test emulation_test; do
    echo "== $test"
    timeout 420 "$CARRY/bin/$test" >"$out/$test.log" 2>&1 || status=1
    grep -E '^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]+ test|no CUDA device' "$out/$test.log" |
      sort -u | head -20
  done
  echo "== codec_gpu_bench"
  timeout 300 "$CARRY/bin/codec_gpu_bench" 2>&1 | tee "$out/codec_gpu_bench.md" || status=1
  echo "== torch_compare.py"
  PYTHONUNBUFFERED=1 timeout 300 python3 bench/gpu/torch_compare.py 2>&1 |
    tee "$out/torch_compare.md" || status=1
  return $status
}

sanitize() {
  [ -d "$CARRY/bin" ] || { echo "no $CARRY/bin: run 'pack' first and carry $CARRY"; return 1; }
  library_path >/dev/null
  local status=0
  local filter='AllCodecs/DeviceCodecTest.MatchesCpuCodec/*:DeviceCodecEdgeTest.TopKWithMassiveTies'
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer --tool $tool"
    timeout 280 compute-sanitizer --tool "$tool" --error-exitcode 3 \
      "$CARRY/bin/device_codec_test" --gtest_filter="$filter" 2>&1 | tail -15 || status=1
  done
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 "$CARRY/bin/layers_test" 2>&1 |
    tail -5 || status=1
  return $status
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  sanitize) sanitize ;;
  *)
    echo "usage: $0 pack|run|sanitize" >&2
    exit 2
    ;;
esac
