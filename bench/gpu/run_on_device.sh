#!/usr/bin/env bash
# Runs the GPU tests and benchmarks on a device machine, with binaries built on this one.
#
# The device machine (see the workplace's device README) has a GPU, nvcc, compute-sanitizer
# and PyTorch but no Bazel and none of Debian's libraries, so the binaries are built here
# (with nvcc -lineinfo: --config=cuda_lineinfo) and travel with their non-system shared
# libraries in the git-ignored folder .gpu_carry/, as one carry.tar.gz (the device tool
# carries at most 64 MiB; Debian's OpenBLAS alone is 36 MB unpacked), unpacked there:
#
#   bench/gpu/run_on_device.sh pack         # here: bazel build + collect (no GPU needed);
#                                           # EXTRA_BENCHES="NAME=PATH ..." also carries other
#                                           # builds of codec_gpu_bench (e.g. the commit
#                                           # before a change), which `run` and `all` time
#                                           # in the same run (codec_gpu_bench_NAME.md)
#   device tool: run(command="bash bench/gpu/run_on_device.sh run", carry=[".gpu_carry"])
#                                           # there: tests, codec_gpu_bench, torch_compare.py
#   device tool: run(command="bash bench/gpu/run_on_device.sh sanitize", carry=[".gpu_carry"])
#                                           # there: compute-sanitizer memcheck/racecheck
#   device tool: run(command="bash bench/gpu/run_on_device.sh train", carry=[".gpu_carry"])
#                                           # there: GPU worker vs CPU worker, losses compared
#   device tool: run(command="bash bench/gpu/run_on_device.sh all", carry=[".gpu_carry"])
#                                           # there: all three in one call (ALL_BUDGET_S)
#   device tool: run(command="bash bench/gpu/run_on_device.sh pytorch", carry=[".gpu_carry"])
#                                           # there: the Python extension built for the
#                                           # device's Python (python/python_kit.sh) and a
#                                           # tamp.torch CUDA worker against a CPU one
#   bench/gpu/run_on_device.sh sanitize-plan   # anywhere: the sanitizer's steps and filters
#
# Each of `run`, `sanitize` and `train` fits one device call (10 minutes): every step has its
# own time limit (below), and a step that runs out of time fails. A session that holds only
# 15 minutes of device time runs `all`: the benchmarks alone on the GPU, then the training
# jobs, then the tests and the sanitizer steps all at once, with every limit cut to fit
# ALL_BUDGET_S (default 360 s), and every log brought back in one all.tar.gz.
#
# `train` runs `tamp run` (carried tamp, tamp_server, tamp_worker) on a cut of Fashion-MNIST
# that pack carries (the first TRAIN_IMAGES training and TEST_IMAGES test images, from
# $FASHION_MNIST_DIR, default Debian's /usr/share/datasets/fashion-mnist): for each of
# TRAIN_CODECS, the same seeded MLP job (1 server, 1 worker, TRAIN_STEPS steps) once with
# `device: CPU` and once with `device: CUDA`, then bench/gpu/compare_losses.py compares the
# per-step losses (step 1 within 1e-4 relative, steps 2-5 within 1e-3, later steps within
# 5e-2: cuBLAS sums in another order than OpenBLAS; compare_losses.py says how these were
# chosen), the wire bytes (equal) and the test accuracy (within 0.02).
# topk1_ef puts every compressed chunk on the GPU path (top-k 1% with residual both ways);
# powersgd runs its two rounds on the GPU path too (compress/cuda/device_powersgd.h).
#
# A run that did not exercise a GPU fails; it never passes by skipping:
#   - no GPU visible (nvidia-smi -L lists none): fails before running anything;
#   - a carried binary that does not link the CUDA runtime (a CPU-only build): fails;
#   - the binaries run with TAMP_REQUIRE_CUDA=1 (kernels/device.h CudaRequired()), so a test
#     that would skip without a device fails and codec_gpu_bench exits 1; besides, any
#     "[  SKIPPED ]" line, or no "[  PASSED  ]" line, fails the test binary;
#   - torch_compare.py runs with --require-cuda.
#
# The carried libraries (Debian's libstdc++, Abseil, protobuf, ...) are on LD_LIBRARY_PATH
# for the carried binaries alone; torch_compare.py runs with the device's own environment,
# so they cannot shadow the libraries PyTorch was built against.
#
# `run` writes, into $OUT (the device tool's return folder) or else bench/gpu/out/:
#   device.txt               nvidia-smi and the library path of the carried binaries
#   <test>.log               the GoogleTest output of each test binary
#   codec_gpu_bench.md       the Tamp table (bench/gpu/codec_gpu_bench.cc)
#   torch_compare.md         the same columns for GRACE-style PyTorch codecs
# ready to be copied into docs/. Exits non-zero if anything failed; the last lines summarise,
# with top-k 1%'s encode time against torch.topk's per size (topk_vs_torch; target 3x).
#
# cuBLAS (libcublasLt alone is over 500 MB) does not travel: the carried binaries find the
# device's own libcublas.so.13 (CUDA toolkit, else PyTorch's nvidia-cublas wheel).
#
# PYTHON (default python3) is the interpreter that runs torch_compare.py.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

CARRY=.gpu_carry
TARGETS=(
  //kernels:device_test
  //kernels:layers_test
  //kernels:cnn_layers_test
  //compress/cuda:device_codec_test
  //worker:cuda_backend_test
  //worker:gpu_model_test
  //bench/gpu:codec_gpu_bench
  //tools/tamp:tamp
  //server:tamp_server
  //worker:tamp_worker
)
# Carried binaries that need no CUDA runtime (the launcher and the server); the others must
# link it.
HOST_BINARIES=(tamp tamp_server)
# The carried binaries that hold kernels (and so must carry line tables).
KERNEL_BINARIES=(layers_test cnn_layers_test device_codec_test codec_gpu_bench)
# Test binaries and their time limits in seconds (the emulation tests are CPU-only: CI runs
# them). With the benchmarks', 570 s of the 600 s call.
TESTS=(device_test:20 layers_test:40 cnn_layers_test:40 device_codec_test:120
  cuda_backend_test:40 gpu_model_test:70)
BENCH_LIMIT_S=${BENCH_LIMIT_S:-120}
TORCH_LIMIT_S=${TORCH_LIMIT_S:-120}
# train: the jobs compared (train_config), the run's length and data, each tamp run's time
# limit. With 3 jobs x 2 devices x 90 s: 540 s of the 600 s call.
TRAIN_CODECS=(topk1_ef powersgd cnn)
TRAIN_STEPS=20
TRAIN_IMAGES=4096
TEST_IMAGES=1024
TRAIN_LIMIT_S=${TRAIN_LIMIT_S:-90}
# all: the whole call's budget in seconds.
ALL_BUDGET_S=${ALL_BUDGET_S:-360}

pack() {
  bazel build --config=cuda_lineinfo "${TARGETS[@]}" || return 1
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
  local ok=0
  for bin in "$CARRY"/bin/*; do
    host_binary "$bin" || links_cuda_runtime "$bin" "" || ok=1
  done
  for name in "${KERNEL_BINARIES[@]}"; do
    if ! grep -aq '\.nv_debug_line_sass' "$CARRY/bin/$name"; then
      echo "FAIL: $name has no device line tables (built without --config=cuda_lineinfo?)"
      ok=1
    fi
  done
  [ "$ok" -eq 0 ] || return 1
  # Every shared library the binaries load, except the C runtime, the driver and cuBLAS.
  ldd "$CARRY"/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    while read -r lib; do
      case "$(basename "$lib")" in
        libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libcuda.so* | \
          libcublas* | libgcc_s.so*) ;;
        *) cp -L "$lib" "$CARRY/lib/" ;;
      esac
    done
  local extra
  for extra in ${EXTRA_BENCHES:-}; do
    local name="${extra%%=*}" path="${extra#*=}"
    cp -L "$path" "$CARRY/bin/codec_gpu_bench_$name" || return 1
    links_cuda_runtime "$CARRY/bin/codec_gpu_bench_$name" "" || return 1
  done
  echo "packed: $(ls "$CARRY/bin" | tr '\n' ' ')"
  cut_data "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" "$CARRY/data" || return 1
  # The Python extension's kit (python/python_kit.sh), for `pytorch` to build the extension
  # for the device's own Python; its libraries join the binaries'.
  BAZEL_FLAGS=--config=cuda_lineinfo python/python_kit.sh pack "$CARRY/pykit" || return 1
  cp -n "$CARRY"/pykit/lib/* "$CARRY/lib/" && rm -rf "$CARRY/pykit/lib"
  tar -C "$CARRY" -czf "$CARRY/carry.tar.gz" bin lib data pykit || return 1
  rm -rf "${CARRY:?}/bin" "${CARRY:?}/lib" "${CARRY:?}/data" "${CARRY:?}/pykit"
  du -sh "$CARRY/carry.tar.gz"
}

# cut_data FROM TO: the first TRAIN_IMAGES training and TEST_IMAGES test images and labels of
# the Fashion-MNIST IDX files in FROM, as IDX .gz files in TO (what `train` trains on).
cut_data() {
  mkdir -p "$2"
  /usr/bin/python3 - "$1" "$2" "$TRAIN_IMAGES" "$TEST_IMAGES" <<'PY' || return 1
import gzip, struct, sys
src, dst = sys.argv[1], sys.argv[2]
for prefix, count in (("train", int(sys.argv[3])), ("t10k", int(sys.argv[4]))):
    for kind, record in (("images-idx3", 784), ("labels-idx1", 1)):
        name = f"{prefix}-{kind}-ubyte.gz"
        data = gzip.open(f"{src}/{name}").read()
        ndims = data[3]
        dims = list(struct.unpack(f">{ndims}I", data[4:4 + 4 * ndims]))
        if dims[0] < count:
            sys.exit(f"cut_data: {src}/{name} holds {dims[0]} records, fewer than {count}")
        dims[0] = count
        body = data[4 + 4 * ndims:4 + 4 * ndims + count * record]
        with gzip.open(f"{dst}/{name}", "wb") as out:
            out.write(data[:4] + struct.pack(f">{ndims}I", *dims) + body)
PY
}

# There: unpacks carry.tar.gz (once) into bin/, lib/ and data/.
unpack() {
  [ -d "$CARRY/bin" ] || [ ! -e "$CARRY/carry.tar.gz" ] || tar -C "$CARRY" -xzf "$CARRY/carry.tar.gz"
}

# Prints the LD_LIBRARY_PATH for the carried binaries: the carried libraries, the device's
# cuBLAS, then whatever the environment had. Exports nothing.
carried_library_path() {
  local dirs="$PWD/$CARRY/lib"
  local cublas=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/libcublas.so.13" ] && cublas="$d" && break
  done
  if [ -z "$cublas" ]; then
    local sites
    sites="$("${PYTHON:-python3}" -c 'import site; print(" ".join(site.getsitepackages()))' \
      2>/dev/null)"
    for site in $sites; do
      [ -e "$site/nvidia/cublas/lib/libcublas.so.13" ] && cublas="$site/nvidia/cublas/lib" && break
      [ -e "$site/nvidia/cu13/lib/libcublas.so.13" ] && cublas="$site/nvidia/cu13/lib" && break
    done
  fi
  if [ -z "$cublas" ]; then
    cublas="$(find /usr /opt -xdev -name libcublas.so.13 2>/dev/null | head -1)"
    [ -n "$cublas" ] && cublas="$(dirname "$cublas")"
  fi
  [ -n "$cublas" ] && dirs="$dirs:$cublas"
  echo "$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# carried BINARY ARGS...: runs a carried binary with the carried libraries and
# TAMP_REQUIRE_CUDA=1 in its environment only.
carried() {
  LD_LIBRARY_PATH="$CARRIED_LIBRARY_PATH" TAMP_REQUIRE_CUDA=1 "$@"
}

# Fails unless nvidia-smi lists at least one GPU.
require_gpu() {
  local listing
  if ! listing="$(nvidia-smi -L 2>&1)" || ! grep -q '^GPU [0-9]' <<<"$listing"; then
    echo "FAIL: no GPU visible: nvidia-smi -L says: ${listing:-nothing}"
    return 1
  fi
  echo "$listing"
}

# host_binary BINARY: whether BINARY is one of HOST_BINARIES.
host_binary() {
  local name
  for name in "${HOST_BINARIES[@]}"; do [ "$(basename "$1")" = "$name" ] && return 0; done
  return 1
}

# links_cuda_runtime BINARY LIBRARY_PATH: fails unless BINARY loads libcudart from a file.
links_cuda_runtime() {
  local libraries  # Not piped into grep -q: ldd would die of SIGPIPE under pipefail.
  libraries="$(LD_LIBRARY_PATH="$2" ldd "$1" 2>/dev/null)"
  if ! grep -Eq '^\s*libcudart\.so[.0-9]* => /' <<<"$libraries"; then
    echo "FAIL: $(basename "$1") does not link the CUDA runtime (a CPU-only build? pack where" \
      "nvcc is, without TAMP_DISABLE_CUDA)"
    return 1
  fi
}

# gtest_verdict LOG STATUS: prints why a test binary failed, or "passed".
gtest_verdict() {
  local log=$1 status=$2
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "FAILED: timed out"
  elif [ "$status" -ne 0 ]; then
    echo "FAILED: exit status $status"
  elif grep -q '^\[  SKIPPED \]' "$log"; then
    echo "FAILED: skipped tests (a skip on the device is a failure):" \
      "$(grep '^\[  SKIPPED \] [A-Za-z]' "$log" | head -3 | tr '\n' ' ')"
  elif ! grep -q '^\[  PASSED  \] [1-9]' "$log"; then
    echo "FAILED: no test passed"
  else
    echo "passed ($(grep '^\[  PASSED  \]' "$log"))"
    return 0
  fi
  return 1
}

# run_tests OUT [PARALLEL]: each of TESTS, one after another (or all at once where PARALLEL is
# 1: `all` does so), its GoogleTest output in OUT/<test>.log; appends a verdict per test to
# OUT/summary.txt; fails if any failed.
run_tests() {
  local out=$1 parallel=${2:-0} status=0 entry
  for entry in "${TESTS[@]}"; do
    local test="${entry%%:*}" limit="${entry##*:}"
    [ "${TEST_LIMIT_CAP_S:-$limit}" -lt "$limit" ] && limit=$TEST_LIMIT_CAP_S
    echo "== $test (limit ${limit} s)"
    if [ "$parallel" -eq 1 ]; then
      (carried timeout -k 5 "$limit" "$CARRY/bin/$test" >"$out/$test.log" 2>&1
        echo $? >"$out/$test.status") &
    else
      carried timeout -k 5 "$limit" "$CARRY/bin/$test" >"$out/$test.log" 2>&1
      echo $? >"$out/$test.status"
    fi
  done
  wait
  for entry in "${TESTS[@]}"; do
    local test="${entry%%:*}" verdict
    verdict="$(gtest_verdict "$out/$test.log" "$(cat "$out/$test.status")")" || status=1
    grep -E '^\[  FAILED  \] [A-Za-z]' "$out/$test.log" | head -10
    echo "$test: $verdict" >>"$out/summary.txt"
  done
  return $status
}

# run_benchmarks OUT: codec_gpu_bench and torch_compare.py into OUT/codec_gpu_bench.md and
# OUT/torch_compare.md, verdicts and top-k against torch.topk appended to OUT/summary.txt.
run_benchmarks() {
  local out=$1 status=0
  echo "== codec_gpu_bench (limit ${BENCH_LIMIT_S} s)"
  carried timeout -k 5 "$BENCH_LIMIT_S" "$CARRY/bin/codec_gpu_bench" 2>&1 | tee "$out/codec_gpu_bench.md"
  local bench=$?
  if [ "$bench" -ne 0 ]; then
    echo "codec_gpu_bench: FAILED: exit status $bench" >>"$out/summary.txt"
    status=1
  elif grep -q 'skipping' "$out/codec_gpu_bench.md"; then
    echo "codec_gpu_bench: FAILED: it skipped" >>"$out/summary.txt"
    status=1
  else
    echo "codec_gpu_bench: passed" >>"$out/summary.txt"
  fi
  local extra
  for extra in "$CARRY"/bin/codec_gpu_bench_*; do
    [ -x "$extra" ] || continue
    local name
    name="$(basename "$extra")"
    echo "== $name (a build EXTRA_BENCHES named at pack; limit ${BENCH_LIMIT_S} s)"
    carried timeout -k 5 "$BENCH_LIMIT_S" "$extra" 2>&1 | tee "$out/$name.md"
    local code=$?
    [ "$code" -eq 0 ] || { echo "$name: FAILED: exit status $code" >>"$out/summary.txt"; status=1; }
  done
  echo "== torch_compare.py (limit ${TORCH_LIMIT_S} s; the device's own environment)"
  PYTHONUNBUFFERED=1 timeout -k 5 "$TORCH_LIMIT_S" "${PYTHON:-python3}" bench/gpu/torch_compare.py \
    --require-cuda 2>&1 | tee "$out/torch_compare.md"
  local torch=$?
  if [ "$torch" -ne 0 ]; then
    echo "torch_compare.py: FAILED: exit status $torch" >>"$out/summary.txt"
    status=1
  else
    echo "torch_compare.py: passed" >>"$out/summary.txt"
  fi
  topk_vs_torch "$out/codec_gpu_bench.md" "$out/torch_compare.md" >>"$out/summary.txt"
  return $status
}

# prepare OUT: unpacks, checks the GPU and that every carried binary but the host ones links
# the CUDA runtime, and sets CARRIED_LIBRARY_PATH; writes OUT/device.txt. Every mode starts
# with it.
prepare() {
  local out=$1
  mkdir -p "$out"
  unpack
  [ -d "$CARRY/bin" ] || { echo "FAIL: no $CARRY/bin: run 'pack' first and carry $CARRY"; return 1; }
  require_gpu >"$out/device.txt" 2>&1 || { cat "$out/device.txt"; return 1; }
  CARRIED_LIBRARY_PATH="$(carried_library_path)"
  {
    nvidia-smi || true
    uname -r
    echo "carried binaries: LD_LIBRARY_PATH=$CARRIED_LIBRARY_PATH"
  } >>"$out/device.txt" 2>&1
  local bin
  for bin in "$CARRY"/bin/*; do
    host_binary "$bin" || links_cuda_runtime "$bin" "$CARRIED_LIBRARY_PATH" || return 1
  done
}

# in_one_call PART...: the modes run, train and sanitize: prepare, each PART OUT in turn
# (each appends its verdicts to OUT/summary.txt), then the summary; fails if any part did.
in_one_call() {
  local out="${OUT:-bench/gpu/out}" status=0 part
  prepare "$out" || return 1
  : >"$out/summary.txt"
  for part in "$@"; do "$part" "$out" || status=1; done
  echo "== summary"
  cat "$out/summary.txt"
  return $status
}

# run_plan: what `run` is about to spend of the device call.
run_plan() {
  local total=$((BENCH_LIMIT_S + TORCH_LIMIT_S)) entry
  for entry in "${TESTS[@]}"; do total=$((total + ${entry##*:})); done
  echo "run: ${#TESTS[@]} test binaries and 2 benchmarks, ${total} s of time limits" \
    "(one device call: 600 s)"
}

# topk_vs_torch TAMP_TABLE TORCH_TABLE: per size, the encode time of Tamp's "topk 1%" row
# against torch.topk's (issue 17's target: 3x), both tables from this run; nothing where
# either row is missing.
topk_vs_torch() {
  [ -s "$1" ] && [ -s "$2" ] || return 0
  awk -F'|' '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    trim($2) == "topk 1%" && FNR == NR { tamp[trim($3)] = trim($5) }
    trim($2) == "topk 1%" && FNR != NR { torch[trim($3)] = trim($5) }
    END {
      for (n in tamp) {
        if (n in torch && tamp[n] > 0) {
          printf "topk 1%% at %s: encode %s ms, torch.topk %s ms: %.2fx\n", n, tamp[n],
                 torch[n], torch[n] / tamp[n]
        }
      }
    }' "$1" "$2" 2>/dev/null
}

# train_config JOB DEVICE DATA_DIR: the seeded job `train` runs, on DEVICE (CPU or CUDA):
# topk1_ef and powersgd train the MLP with those codecs, cnn the CNN uncompressed.
train_config() {
  local compression model='model { kind: MLP hidden: [1024, 1024] init_seed: 1 }'
  case "$1" in
    topk1_ef)
      compression='push { name: "topk" ratio: 0.01 } push_feedback { kind: RESIDUAL }
    pull { name: "topk" ratio: 0.01 } pull_feedback { kind: RESIDUAL }' ;;
    powersgd) compression='push { name: "powersgd" rank: 2 }' ;;
    cnn)
      compression='push { name: "none" }'
      model='model { kind: CNN conv_channels: [32, 64] kernel_size: 5 fc_hidden: [128] init_seed: 1 }' ;;
    *) echo "train_config: unknown job $1" >&2; return 1 ;;
  esac
  cat <<CONFIG
version: 1
name: "gpu_train_$1"
device: $2
cluster { num_servers: 1 num_workers: 1 }
$model
data { dir: "$3" batch_size: 64 shuffle_seed: 1 }
training { max_steps: $TRAIN_STEPS eval_every_steps: 10 }
optimizer { name: "sgd" learning_rate: 0.01 momentum: 0.9 }
compression {
  min_compress_bytes: 16384
  seed: 1
  default_compression {
    $compression
  }
}
CONFIG
}

# loss_bounds JOB: compare_losses.py's bounds for JOB beyond its defaults (calibrated for the
# MLP jobs). The CNN job's loss climbs from 3.9 to 6.1 over steps 2-3 before it falls, which
# amplifies any difference in summation order: on the first H200 machine (2026-11-26) the
# same tamp_worker on that machine's CPU (another OpenBLAS kernel) drifted from this
# machine's CPU run by 1.9e-4 at step 2, 2.0e-3 by step 5 and 5.9e-2 by step 20, while the
# GPU run stayed within 1e-7 of this machine's through step 16 (docs/gpu.md). The bounds
# leave about 5x of the CPU's own drift.
loss_bounds() {
  case "$1" in
    cnn) echo "--early_rel 1e-2 --rel 0.3" ;;
    *) echo "" ;;
  esac
}

# train_jobs OUT: trains each of TRAIN_CODECS on the CPU and on the GPU and compares the
# losses; verdicts in OUT/summary.txt, and each job's median step times (steps 2 on, CPU
# and GPU) in OUT/step_times.md.
train_jobs() {
  local out=$1
  [ -d "$CARRY/data" ] || { echo "FAIL: no $CARRY/data: pack again (it cuts the data set)"; return 1; }
  echo "train: ${#TRAIN_CODECS[@]} jobs x 2 devices," \
    "$((${#TRAIN_CODECS[@]} * 2 * TRAIN_LIMIT_S)) s of time limits"
  local status=0 codec device work
  work="$(mktemp -d)"
  for codec in "${TRAIN_CODECS[@]}"; do
    local ran=0
    for device in CPU CUDA; do
      local name="train_${codec}_${device}"
      train_config "$codec" "$device" "$PWD/$CARRY/data" >"$work/$name.pbtxt" || return 1
      echo "== $name (limit ${TRAIN_LIMIT_S} s)"
      rm -f "$out/$name.jsonl"
      carried timeout -k 5 "$TRAIN_LIMIT_S" "$CARRY/bin/tamp" run "$work/$name.pbtxt" \
        --run_dir="$work/$name" --metrics_file="$out/$name.jsonl" \
        --server_binary="$PWD/$CARRY/bin/tamp_server" \
        --worker_binary="$PWD/$CARRY/bin/tamp_worker" >"$out/$name.log" 2>&1
      local code=$?
      tail -3 "$out/$name.log"
      if [ "$code" -ne 0 ]; then
        echo "$name: FAILED: exit status $code (see $name.log)" >>"$out/summary.txt"
        status=1
      else
        ran=$((ran + 1))
      fi
    done
    [ "$ran" -eq 2 ] || continue
    echo "== $codec: GPU against CPU"
    local bounds=()
    read -r -a bounds <<<"$(loss_bounds "$codec")"
    "${PYTHON:-python3}" bench/gpu/compare_losses.py "$out/train_${codec}_CPU.jsonl" \
      "$out/train_${codec}_CUDA.jsonl" "${bounds[@]}" >"$out/train_$codec.md" 2>&1
    local compared=$?
    tail -4 "$out/train_$codec.md"
    if [ "$compared" -ne 0 ]; then
      echo "train $codec: FAILED: the losses differ (see train_$codec.md)" >>"$out/summary.txt"
      status=1
    else
      echo "train $codec: passed ($(tail -1 "$out/train_$codec.md"))" >>"$out/summary.txt"
    fi
  done
  grep -H '^median step ms' "$out"/train_*.md >"$out/step_times.md"
  cat "$out/step_times.md"
  return $status
}

# gtest_filter TEST SPEC...: TEST of the AllCodecs suite for each spec label
# (compress/cuda/internal/test_cases.h), ':'-joined.
gtest_filter() {
  local test=$1 filter="" spec
  shift
  for spec in "$@"; do filter+="${filter:+:}AllCodecs/DeviceCodecTest.$test/$spec"; done
  echo "$filter"
}

# Specs that between them take every kernel path: the quantize tile (elementwise, signum's
# state), fused and two-pass bucket stats, chunk stats, top-k (and dgc), threshold,
# random-block, random-k.
MEMCHECK_SPECS=(none fp16 natural signum efsign terngrad qsgd_s127_d512 qsgd_s7_d100
  maxmin_b3_stoch_d37 maxmin_b8_near_d512 topk_r1 topk_r30_fp16 dgc_r1 threshold_t5_fp16
  randomblock_r1_b4_fp16 randomblock_r30_b1000 randomk_r1 randomk_r30_fp16)
# The kernels that share memory between threads: the tile (every quantize codec), fused
# stats, chunk stats, top-k's histograms, sample sort, candidates and scans
# (DeviceCodecTopKTest: level 0's gather, then the candidates pass and the whole-chunk
# fallback), threshold's scans.
RACECHECK_SPECS=(fp16 qsgd_s127_d512 maxmin_b8_near_d512 terngrad efsign topk_r1 threshold_t5)

# The sanitizer steps: tool, binary, time limit in seconds, gtest filter.
# 240 + 180 + 90 = 510 s of the 600 s call.
SANITIZE_STEPS=(
  "memcheck|device_codec_test|240|$(gtest_filter MatchesCpuCodec "${MEMCHECK_SPECS[@]}"):$(
    gtest_filter RejectsWhatCpuRejects topk_r1 threshold_t5 qsgd_s127_d512 maxmin_b8_near_d512
  ):DeviceCodecEdgeTest.*:DeviceCodecAsyncTest.*:SparseCodecs/DeviceCodecDgcTest.*/threshold_t5"\
":PowerSgdCases/DevicePowerSgdTest.*:Cases/DeviceCodecTopKTest.*"
  "racecheck|device_codec_test|180|$(gtest_filter MatchesCpuCodec "${RACECHECK_SPECS[@]}"):$(
  )Cases/DeviceCodecTopKTest.*/ties_across_tiles:Cases/DeviceCodecTopKTest.*/all_equal_large"
  "memcheck|layers_test|90|*"
)

# sanitize_steps OUT [PARALLEL]: runs SANITIZE_STEPS one after another (or all at once where
# PARALLEL is 1: `all` does so); verdicts in OUT/summary.txt.
sanitize_steps() {
  local out=$1 parallel=${2:-0}
  local sanitizer
  sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)"
  [ -n "$sanitizer" ] || { echo "FAIL: no compute-sanitizer on this machine"; return 1; }
  local total=0
  for step in "${SANITIZE_STEPS[@]}"; do
    IFS='|' read -r _ _ limit _ <<<"$step"
    total=$((total + limit))
  done
  echo "sanitize: ${#SANITIZE_STEPS[@]} steps, ${total} s of time limits (one device call: 600 s)"
  local status=0 index=0 logs=() limits=()
  for step in "${SANITIZE_STEPS[@]}"; do
    local tool binary limit filter log
    IFS='|' read -r tool binary limit filter <<<"$step"
    # SANITIZE_LIMIT_CAP_S (tests, `all`) lowers every limit.
    [ "${SANITIZE_LIMIT_CAP_S:-$limit}" -lt "$limit" ] && limit=$SANITIZE_LIMIT_CAP_S
    index=$((index + 1))
    log="$out/sanitize$index-$tool-$binary.log"
    logs+=("$log")
    limits+=("$limit")
    echo "== compute-sanitizer --tool $tool $binary (limit ${limit} s)"
    if [ "$parallel" -eq 1 ]; then
      (carried timeout -k 5 "$limit" "$sanitizer" --tool "$tool" --error-exitcode 3 \
        "$CARRY/bin/$binary" --gtest_filter="$filter" >"$log" 2>&1
        echo $? >"$log.status") &
    else
      carried timeout -k 5 "$limit" "$sanitizer" --tool "$tool" --error-exitcode 3 \
        "$CARRY/bin/$binary" --gtest_filter="$filter" >"$log" 2>&1
      echo $? >"$log.status"
    fi
  done
  wait
  index=0
  for step in "${SANITIZE_STEPS[@]}"; do
    local tool binary log code verdict
    IFS='|' read -r tool binary _ _ <<<"$step"
    log=${logs[$index]}
    code="$(cat "$log.status")"
    tail -8 "$log"
    if [ "$code" -eq 124 ] || [ "$code" -eq 137 ]; then
      verdict="FAILED: timed out after ${limits[$index]} s (over budget: narrow its filter here)"
    elif grep -q 'Device not supported' "$log"; then
      verdict="FAILED: compute-sanitizer cannot use this device (a gVisor machine?)"
    elif [ "$code" -eq 3 ]; then
      verdict="FAILED: $tool reported errors (see $(basename "$log"))"
    else
      verdict="$(gtest_verdict "$log" "$code")" && verdict="passed"
    fi
    [ "$verdict" = passed ] || status=1
    echo "$tool $binary: $verdict" >>"$out/summary.txt"
    index=$((index + 1))
  done
  return $status
}

# all: everything in one device call, within ALL_BUDGET_S (a device session holds 15 minutes
# in all): the benchmarks first, alone on the GPU; then the training jobs, alone; then the
# test binaries and the sanitizer steps all at once (their timings do not matter). Each step's
# limit is cut to fit. The device tool brings back at most 8 files, so everything lands in
# $OUT/all.tar.gz, with summary.txt and the tables beside it.
all() {
  local final="${OUT:-bench/gpu/out}" out status=0 started=$SECONDS
  local BENCH_LIMIT_S=60 TORCH_LIMIT_S=60 TRAIN_LIMIT_S=25
  out="$(mktemp -d)"
  mkdir -p "$final"
  prepare "$out" || { cp "$out/device.txt" "$final/" 2>/dev/null; return 1; }
  : >"$out/summary.txt"
  echo "all: budget ${ALL_BUDGET_S} s: benchmarks ${BENCH_LIMIT_S}+${TORCH_LIMIT_S} s," \
    "training $((${#TRAIN_CODECS[@]} * 2))x${TRAIN_LIMIT_S} s, then tests and sanitizer at once"
  run_benchmarks "$out" || status=1
  echo "[all] benchmarks done at $((SECONDS - started)) s"
  train_jobs "$out" || status=1
  echo "[all] training done at $((SECONDS - started)) s"
  local left=$((ALL_BUDGET_S - (SECONDS - started) - 10))
  [ "$left" -ge 30 ] || left=30
  TEST_LIMIT_CAP_S=$left run_tests "$out" 1 >"$out/tests.txt" 2>&1 &
  local tests=$!
  SANITIZE_LIMIT_CAP_S=$left sanitize_steps "$out" 1 >"$out/sanitize.txt" 2>&1 &
  local sanitize=$!
  wait "$tests" || status=1
  wait "$sanitize" || status=1
  cat "$out/tests.txt" "$out/sanitize.txt"
  echo "[all] tests and sanitizer done at $((SECONDS - started)) s"
  echo "== summary"
  cat "$out/summary.txt"
  [ "$status" -eq 0 ] && echo "all: passed" || echo "all: FAILED"
  tar -C "$out" -czf "$final/all.tar.gz" .
  cp "$out/summary.txt" "$out/codec_gpu_bench.md" "$out/torch_compare.md" \
    "$out/step_times.md" "$final/" 2>/dev/null
  local extra
  for extra in "$out"/codec_gpu_bench_*.md; do [ -e "$extra" ] && cp "$extra" "$final/"; done
  return $status
}

# pytorch_check OUT: tamp.torch under the device's own Python and torch. Builds the extension
# for that Python from the carried kit (python/python_kit.sh), then python_test's device
# check: one tamp.torch worker (tests/python/device_worker.py) with its parameters on the
# CPU, then on the GPU (top-k with error feedback and an fp16 pull on fc1.weight: GPU
# codecs), each under the carried `tamp run` with 2 servers, broadcasting its parameters and
# an object first (resync_steps pulls what they gave the servers); both must end with
# byte-identical weights. A torch that sees no GPU fails the check.
pytorch_check() {
  local out=$1 python="${PYTHON:-python3}" device
  if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "pytorch: FAILED: this torch sees no CUDA device" >>"$out/summary.txt"
    return 1
  fi
  if ! KIT_LIB_DIR="$PWD/$CARRY/lib" PYTHON="$python" "$CARRY/pykit/build.sh" \
      >"$out/pytorch_build.log" 2>&1; then
    tail -20 "$out/pytorch_build.log"
    echo "pytorch: FAILED: the extension did not build (pytorch_build.log)" >>"$out/summary.txt"
    return 1
  fi
  tail -1 "$out/pytorch_build.log"
  for device in cpu cuda; do
    local dir="$out/pytorch_$device"
    mkdir -p "$dir"
    cat >"$dir/job.pbtxt" <<JOB
version: 1
name: "pytorch_device_check"
cluster { num_servers: 2 num_workers: 1 }
model { kind: MLP hidden: [64] init_seed: 3 }
data { dir: "$PWD/$CARRY/data" batch_size: 32 }
training { epochs: 2 resync_steps: 3 }
optimizer { learning_rate: 0.05 momentum: 0.9 }
compression {
  partition_bytes: 16384
  seed: 7
  default_compression { push { name: "topk" ratio: 0.1 } push_feedback { kind: RESIDUAL } }
  tensor_overrides { pattern: "fc1.weight" compression { push { name: "topk" ratio: 0.1 }
    push_feedback { kind: RESIDUAL } pull { name: "fp16" } } }
}
JOB
    carried timeout -k 5 60 "$CARRY/bin/tamp" run "$dir/job.pbtxt" --run_dir="$dir/run" \
      --server_binary="$PWD/$CARRY/bin/tamp_server" -- \
      env PYTHONPATH="$PWD/$CARRY/pykit" "$python" tests/python/device_worker.py "$device" \
      "$dir/weights" >"$dir/worker.log" 2>&1
    echo $? >"$dir/status"
    tail -3 "$dir/worker.log"
  done
  if [ "$(cat "$out/pytorch_cpu/status")" -ne 0 ] || [ "$(cat "$out/pytorch_cuda/status")" -ne 0 ]; then
    echo "pytorch: FAILED: a worker failed (pytorch_cpu/worker.log, pytorch_cuda/worker.log)" \
      >>"$out/summary.txt"
    return 1
  fi
  if ! cmp "$out/pytorch_cpu/weights" "$out/pytorch_cuda/weights"; then
    echo "pytorch: FAILED: the CUDA worker's weights differ from the CPU worker's" \
      >>"$out/summary.txt"
    return 1
  fi
  echo "pytorch: passed ($(tail -1 "$out/pytorch_build.log" | sed 's/^build.sh: //');" \
    "CUDA and CPU tamp.torch workers byte-identical)" >>"$out/summary.txt"
}

# One line per sanitizer step: tool, binary, time limit, gtest filter (what sanitize runs).
sanitize_plan() {
  for step in "${SANITIZE_STEPS[@]}"; do
    IFS='|' read -r tool binary limit filter <<<"$step"
    echo "$tool $binary $limit $filter"
  done
}

case "${1:-}" in
  pack) pack ;;
  run) in_one_call run_plan run_tests run_benchmarks ;;
  sanitize) in_one_call sanitize_steps ;;
  train) in_one_call train_jobs ;;
  pytorch) in_one_call pytorch_check ;;
  all) all ;;
  sanitize-plan) sanitize_plan ;;
  *)
    echo "usage: $0 pack|run|sanitize|train|pytorch|all|sanitize-plan" >&2
    exit 2
    ;;
esac
