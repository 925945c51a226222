#!/usr/bin/env bash
# bench/gpu/run_on_device.sh's verdicts, here, without a GPU: the script runs in a scratch
# tree whose .gpu_carry/bin holds fake test binaries, with fake nvidia-smi, ldd,
# compute-sanitizer and python3 first on PATH. A device run must fail when no GPU is
# visible, when a binary does not link the CUDA runtime, and when anything skips; the
# carried libraries must reach the carried binaries and not PyTorch; the sanitizer pass must
# plan within one device call and fail when a step runs out of time; the training check
# (`train`, with a fake tamp writing metrics) must pass when the GPU's losses are close to
# the CPU's and fail when they drift, are NaN, when the GPU run fails and when no GPU is
# visible. Then the real
# codec_gpu_bench and torch_compare.py: without a device they skip (exit 0), and fail where
# CUDA is required.
set -uo pipefail

SCRIPT="$TEST_SRCDIR/$TEST_WORKSPACE/bench/gpu/run_on_device.sh"
TORCH_COMPARE="$TEST_SRCDIR/$TEST_WORKSPACE/bench/gpu/torch_compare.py"
COMPARE_LOSSES="$TEST_SRCDIR/$TEST_WORKSPACE/bench/gpu/compare_losses.py"
BENCH="$TEST_SRCDIR/$TEST_WORKSPACE/bench/gpu/codec_gpu_bench"
CODEC_TEST="$TEST_SRCDIR/$TEST_WORKSPACE/compress/cuda/device_codec_test"
ROOT="$TEST_TMPDIR/tree"
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# A fresh scratch tree; every fake behaves normally (a GPU, CUDA-linked binaries, passing
# tests) until a test writes a mode file under $ROOT/mode.
setup() {
  rm -rf "$ROOT"
  mkdir -p "$ROOT/bench/gpu" "$ROOT/.gpu_carry/bin" "$ROOT/.gpu_carry/lib" \
    "$ROOT/.gpu_carry/data" "$ROOT/fake" "$ROOT/mode" "$ROOT/seen" "$ROOT/out"
  cp "$SCRIPT" "$ROOT/bench/gpu/run_on_device.sh"
  cp "$COMPARE_LOSSES" "$ROOT/bench/gpu/compare_losses.py"
  touch "$ROOT/bench/gpu/torch_compare.py"
  for name in device_test layers_test cnn_layers_test device_codec_test cuda_backend_test \
    gpu_model_test codec_gpu_bench codec_gpu_bench_before tamp_server tamp_worker; do
    cat >"$ROOT/.gpu_carry/bin/$name" <<EOF
#!/usr/bin/env bash
echo "LD_LIBRARY_PATH=\${LD_LIBRARY_PATH:-} TAMP_REQUIRE_CUDA=\${TAMP_REQUIRE_CUDA:-}" >"$ROOT/seen/$name"
case "\$(cat "$ROOT/mode/$name" 2>/dev/null)" in
  skip)
    echo "[  SKIPPED ] 1 test, listed below:"
    echo "[  SKIPPED ] Suite.NeedsGpu"
    echo "[  PASSED  ] 3 tests."
    exit 0 ;;
  fail) echo "[  FAILED  ] Suite.Broken"; exit 1 ;;
  benchskip) echo "no CUDA device: skipping (fake)"; exit 0 ;;
esac
echo "[  PASSED  ] 4 tests."
EOF
    chmod +x "$ROOT/.gpu_carry/bin/$name"
  done
  # The launcher: `tamp run CONFIG --metrics_file=F ...` writes 20 steps of losses (and an
  # evaluation at steps 10 and 20), the GPU's off by 1e-6 relative, or as a mode file says.
  cat >"$ROOT/.gpu_carry/bin/tamp" <<EOF
#!/usr/bin/env bash
config="\$2" metrics=""
for arg in "\$@"; do case "\$arg" in --metrics_file=*) metrics="\${arg#*=}" ;; esac; done
device="\$(sed -n 's/^device: //p' "\$config")"
echo "LD_LIBRARY_PATH=\${LD_LIBRARY_PATH:-} TAMP_REQUIRE_CUDA=\${TAMP_REQUIRE_CUDA:-} \$*" \
  >>"$ROOT/seen/tamp"
while [ \$# -gt 0 ] && [ "\$1" != -- ]; do shift; done
if [ \$# -gt 0 ]; then  # tamp run CONFIG ... -- COMMAND: the command as its one worker.
  shift
  TAMP_CONFIG="\$config" TAMP_RANK=0 TAMP_SERVERS=127.0.0.1:4242,127.0.0.1:4243 exec "\$@"
fi
scale=1 nan=0
if [ "\$device" = CUDA ]; then
  [ -e "$ROOT/mode/gpufail" ] && { echo "tamp_worker 0: device CUDA: no usable GPU"; exit 1; }
  scale=1.000001
  [ -e "$ROOT/mode/gpudrift" ] && scale=1.1
  [ -e "$ROOT/mode/gpunan" ] && nan=1
fi
/usr/bin/python3 - "\$metrics" "\$scale" "\$nan" <<'PY'
import json, sys
path, scale, nan = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1"
with open(path, "w") as out:
    for step in range(1, 21):
        loss = "NaN" if nan and step == 3 else (2.3 - 0.05 * step) * scale
        out.write(json.dumps({"worker": 0, "step": step, "loss": loss, "step_ms": 10 / scale,
                              "bytes_pushed": 1000, "bytes_pulled": 2000}) + "\n")
        if step % 10 == 0:
            out.write(json.dumps({"worker": 0, "step": step, "test_accuracy": 0.5}) + "\n")
PY
echo "tamp: done"
EOF
  chmod +x "$ROOT/.gpu_carry/bin/tamp"
  cat >"$ROOT/fake/nvidia-smi" <<EOF
#!/usr/bin/env bash
if [ -e "$ROOT/mode/nogpu" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
  exit 9
fi
echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-fake)"
EOF
  cat >"$ROOT/fake/ldd" <<EOF
#!/usr/bin/env bash
echo "	libstdc++.so.6 => /usr/lib/x86_64-linux-gnu/libstdc++.so.6 (0x0)"
[ -e "$ROOT/mode/nocudart" ] || echo "	libcudart.so.13 => /fake/lib/libcudart.so.13 (0x0)"
EOF
  # The extension's kit: build.sh says what it built, or fails.
  mkdir -p "$ROOT/.gpu_carry/pykit" "$ROOT/tests/python"
  cat >"$ROOT/.gpu_carry/pykit/build.sh" <<EOF
#!/usr/bin/env bash
echo "KIT_LIB_DIR=\${KIT_LIB_DIR:-}" >"$ROOT/seen/build.sh"
[ -e "$ROOT/mode/buildfail" ] && { echo "binding.cc: error: fake"; exit 1; }
echo "build.sh: tamp/_tamp.cpython-312-x86_64-linux-gnu.so for Python 3.12.3"
EOF
  chmod +x "$ROOT/.gpu_carry/pykit/build.sh"
  touch "$ROOT/tests/python/device_worker.py"
  cat >"$ROOT/fake/python3" <<EOF
#!/usr/bin/env bash
if [ "\${1:-}" = -c ]; then  # The site-packages query, or whether torch sees a GPU.
  case "\$2" in *cuda.is_available*) [ -e "$ROOT/mode/notorchgpu" ] && exit 1 ;; esac
  exit 0
fi
case "\${1:-}" in *compare_losses.py) exec /usr/bin/python3 "\$@" ;; esac
case "\${1:-}" in
  *device_worker.py)  # DEVICE OUT: the worker's weights, the GPU's off where a mode says.
    echo "LD_LIBRARY_PATH=\${LD_LIBRARY_PATH:-} PYTHONPATH=\${PYTHONPATH:-}" \
      "TAMP_REQUIRE_CUDA=\${TAMP_REQUIRE_CUDA:-} TAMP_SERVERS=\${TAMP_SERVERS:-}" >"$ROOT/seen/worker_\$2"
    [ -e "$ROOT/mode/workerfail" ] && [ "\$2" = cuda ] && { echo "RuntimeError: fake"; exit 1; }
    if [ -e "$ROOT/mode/weightsdiffer" ] && [ "\$2" = cuda ]; then echo drift >"\$3"
    else echo weights >"\$3"; fi
    echo "\$2: 8 steps"
    exit 0 ;;
esac
echo "LD_LIBRARY_PATH=\${LD_LIBRARY_PATH:-} args=\$*" >"$ROOT/seen/python3"
[ -e "$ROOT/mode/torchfail" ] && { echo "no CUDA device: skipping"; exit 1; }
echo "| codec | n |"
EOF
  cat >"$ROOT/fake/compute-sanitizer" <<EOF
#!/usr/bin/env bash
[ -e "$ROOT/mode/slowsanitizer" ] && sleep 30
echo "========= ERROR SUMMARY: 0 errors"
echo "[  PASSED  ] 2 tests."
EOF
  chmod +x "$ROOT/fake/"*
}

# device COMMAND: runs the copied script as the device tool would; output in $ROOT/log.
device() {
  (cd "$ROOT" && PATH="$ROOT/fake:$PATH" OUT="$ROOT/out" PYTHON="$ROOT/fake/python3" \
    LD_LIBRARY_PATH=/device/own/lib bash bench/gpu/run_on_device.sh "$1") >"$ROOT/log" 2>&1
}

expect_exit() {  # expect_exit WHAT WANT GOT
  if [ "$2" = 0 ] && [ "$3" != 0 ]; then fail "$1: exit $3, expected 0"; sed 's/^/  | /' "$ROOT/log"; fi
  if [ "$2" != 0 ] && [ "$3" = 0 ]; then fail "$1: exit 0, expected failure"; sed 's/^/  | /' "$ROOT/log"; fi
}

expect_log() {  # expect_log WHAT PATTERN
  grep -q -- "$2" "$ROOT/log" || { fail "$1: no '$2' in the output"; sed 's/^/  | /' "$ROOT/log"; }
}

# Everything passes: exit 0, each carried binary saw the carried libraries and
# TAMP_REQUIRE_CUDA=1, and torch_compare.py saw the device's own LD_LIBRARY_PATH and
# --require-cuda.
setup
device run
expect_exit "all passing" 0 $?
planned="$(sed -n 's/^run: .*, \([0-9]*\) s of time limits.*/\1/p' "$ROOT/log")"
if [ -z "$planned" ] || [ "$planned" -gt 570 ]; then
  fail "run plans '${planned}' s; one device call is 600 s"
fi
# (codec_gpu_bench_before: another build carried by EXTRA_BENCHES, timed in the same run.)
for name in device_test layers_test cnn_layers_test device_codec_test cuda_backend_test \
  gpu_model_test codec_gpu_bench codec_gpu_bench_before; do
  grep -q "LD_LIBRARY_PATH=$ROOT/.gpu_carry/lib" "$ROOT/seen/$name" ||
    fail "$name did not get the carried libraries: $(cat "$ROOT/seen/$name" 2>/dev/null)"
  grep -q "TAMP_REQUIRE_CUDA=1" "$ROOT/seen/$name" || fail "$name ran without TAMP_REQUIRE_CUDA=1"
done
grep -qx "LD_LIBRARY_PATH=/device/own/lib args=bench/gpu/torch_compare.py --require-cuda" \
  "$ROOT/seen/python3" || fail "torch_compare.py's environment: $(cat "$ROOT/seen/python3")"

# The same from a packed carry (pack leaves one carry.tar.gz): unpacked, then run.
setup
tar -C "$ROOT/.gpu_carry" -czf "$ROOT/carry.tar.gz" bin lib
rm -rf "$ROOT/.gpu_carry/bin" "$ROOT/.gpu_carry/lib"
mv "$ROOT/carry.tar.gz" "$ROOT/.gpu_carry/carry.tar.gz"
device run
expect_exit "packed carry" 0 $?
[ -e "$ROOT/seen/gpu_model_test" ] || fail "packed carry: gpu_model_test did not run"

# A test binary that reports a skip (and exits 0) fails the run.
setup
echo skip >"$ROOT/mode/device_codec_test"
device run
expect_exit "a skipped test" 1 $?
expect_log "a skipped test" "device_codec_test: FAILED: skipped tests"

# A failing test binary fails the run.
setup
echo fail >"$ROOT/mode/layers_test"
device run
expect_exit "a failed test" 1 $?
expect_log "a failed test" "layers_test: FAILED: exit status 1"

# No GPU visible: fails before any binary runs.
setup
touch "$ROOT/mode/nogpu"
device run
expect_exit "no GPU" 1 $?
expect_log "no GPU" "FAIL: no GPU visible"
[ -z "$(ls "$ROOT/seen")" ] || fail "no GPU: binaries ran anyway: $(ls "$ROOT/seen")"
device sanitize
expect_exit "no GPU, sanitize" 1 $?
expect_log "no GPU, sanitize" "FAIL: no GPU visible"

# A CPU-only build (no libcudart): fails before any binary runs.
setup
touch "$ROOT/mode/nocudart"
device run
expect_exit "CPU-only build" 1 $?
expect_log "CPU-only build" "does not link the CUDA runtime"
[ -z "$(ls "$ROOT/seen")" ] || fail "CPU-only build: binaries ran anyway: $(ls "$ROOT/seen")"

# The benchmark skipping, or torch_compare.py failing, fails the run.
setup
echo benchskip >"$ROOT/mode/codec_gpu_bench"
device run
expect_exit "benchmark skipped" 1 $?
expect_log "benchmark skipped" "codec_gpu_bench: FAILED: it skipped"
setup
touch "$ROOT/mode/torchfail"
device run
expect_exit "torch_compare failed" 1 $?
expect_log "torch_compare failed" "torch_compare.py: FAILED: exit status 1"

# The training check: passes when the GPU's losses are within the bounds, the carried tamp
# running each job with the carried libraries and the carried server and worker; fails when
# they drift, are NaN, when the GPU job fails, and when no GPU is visible (before any job).
setup
device train
expect_exit "train" 0 $?
expect_log "train" "train topk1_ef: passed"
expect_log "train" "train powersgd: passed"
expect_log "train" "train cnn: passed"
expect_log "train" "train_cnn.md:median step ms (steps 2 on): CPU 10.00, GPU 10.00"
planned="$(sed -n 's/^train: .*, \([0-9]*\) s of time limits.*/\1/p' "$ROOT/log")"
if [ -z "$planned" ] || [ "$planned" -gt 570 ]; then
  fail "train plans '${planned}' s; one device call is 600 s"
fi
runs="$(grep -c "^LD_LIBRARY_PATH=$ROOT/.gpu_carry/lib.* TAMP_REQUIRE_CUDA=1 run .*--worker_binary=$ROOT/.gpu_carry/bin/tamp_worker" \
  "$ROOT/seen/tamp")"
[ "$runs" = 6 ] || fail "train: tamp's runs: $(cat "$ROOT/seen/tamp")"
for mode in gpudrift gpunan; do
  setup
  touch "$ROOT/mode/$mode"
  device train
  expect_exit "train, $mode" 1 $?
  expect_log "train, $mode" "train topk1_ef: FAILED: the losses differ"
  expect_log "train, $mode" "MISMATCH: worker 0 step"
done
setup
touch "$ROOT/mode/gpufail"
device train
expect_exit "train, GPU job failing" 1 $?
expect_log "train, GPU job failing" "train_topk1_ef_CUDA: FAILED: exit status 1"
setup
touch "$ROOT/mode/nogpu"
device train
expect_exit "train, no GPU" 1 $?
expect_log "train, no GPU" "FAIL: no GPU visible"
[ ! -e "$ROOT/seen/tamp" ] || fail "train, no GPU: tamp ran anyway"
setup
touch "$ROOT/mode/nocudart"
device train
expect_exit "train, CPU-only worker" 1 $?
expect_log "train, CPU-only worker" "does not link the CUDA runtime"
[ ! -e "$ROOT/seen/tamp" ] || fail "train, CPU-only worker: tamp ran anyway"

# all: one call within its budget: the benchmarks, the training, then the tests and the
# sanitizer at once; passes when everything does, brings back at most 8 files (the
# device tool's limit) with every log in all.tar.gz, and fails when any one part fails.
setup
device all
expect_exit "all" 0 $?
expect_log "all" "all: passed"
for line in "codec_gpu_bench: passed" "train cnn: passed" "gpu_model_test: passed" \
  "racecheck device_codec_test: passed"; do
  grep -q "$line" "$ROOT/out/summary.txt" || fail "all: no '$line' in summary.txt"
done
[ "$(ls "$ROOT/out" | wc -l)" -le 8 ] || fail "all: over 8 files back: $(ls "$ROOT/out")"
[ -e "$ROOT/out/codec_gpu_bench_before.md" ] || fail "all: the extra build's table is not back"
# Listed first, not piped into grep -q: under pipefail tar would die of SIGPIPE.
archived="$(tar -tzf "$ROOT/out/all.tar.gz")"
grep -q 'device_codec_test.log' <<<"$archived" || fail "all: no test log in all.tar.gz: $archived"
setup
echo fail >"$ROOT/mode/cnn_layers_test"
device all
expect_exit "all, a failed test" 1 $?
expect_log "all, a failed test" "cnn_layers_test: FAILED: exit status 1"
expect_log "all, a failed test" "all: FAILED"
setup
touch "$ROOT/mode/nogpu"
device all
expect_exit "all, no GPU" 1 $?
[ -z "$(ls "$ROOT/seen")" ] || fail "all, no GPU: binaries ran anyway: $(ls "$ROOT/seen")"

# The sanitizer pass: plans within one 600 s device call with margin, passes when the tool
# does, and a step out of time fails.
setup
device sanitize
expect_exit "sanitize" 0 $?
planned="$(sed -n 's/^sanitize: [0-9]* steps, \([0-9]*\) s of time limits.*/\1/p' "$ROOT/log")"
if [ -z "$planned" ] || [ "$planned" -gt 540 ]; then
  fail "sanitize plans '${planned}' s; one device call is 600 s with the machine's start"
fi
touch "$ROOT/mode/slowsanitizer"
(cd "$ROOT" && SANITIZE_LIMIT_CAP_S=1 PATH="$ROOT/fake:$PATH" OUT="$ROOT/out" \
  bash bench/gpu/run_on_device.sh sanitize) >"$ROOT/log" 2>&1
expect_exit "sanitize out of time" 1 $?
expect_log "sanitize out of time" "FAILED: timed out after 1 s"

# Every pattern of the sanitizer's filters names tests that exist (a typo would run nothing
# and pass): the real device_codec_test lists them without a device (a CUDA build; a build
# without CUDA holds only BuiltWithoutCuda).
codec_tests="$("$CODEC_TEST" --gtest_list_tests)"
if grep -q BuiltWithoutCuda <<<"$codec_tests"; then
  echo "note: device_codec_test built without CUDA; sanitizer filters not checked"
else
  while read -r _ binary _ filter; do
    [ "$binary" = device_codec_test ] || continue
    IFS=':' read -r -a patterns <<<"$filter"
    for pattern in "${patterns[@]}"; do
      listed="$("$CODEC_TEST" --gtest_list_tests --gtest_filter="$pattern" | grep -c '^  ')"
      [ "$listed" -ge 1 ] || fail "sanitizer filter pattern '$pattern' matches no test"
    done
  done < <(bash "$SCRIPT" sanitize-plan)
fi

# pytorch: the extension built from the kit for the device's Python, then the CUDA and CPU
# tamp.torch workers against the carried servers, byte-identical; each failure fails it.
setup
device pytorch
expect_exit "pytorch passing" 0 $?
expect_log "pytorch passing" "pytorch: passed (tamp/_tamp.cpython-312-x86_64-linux-gnu.so for Python 3.12.3"
grep -q "KIT_LIB_DIR=$ROOT/.gpu_carry/lib" "$ROOT/seen/build.sh" ||
  fail "the kit's build did not take the carried libraries: $(cat "$ROOT/seen/build.sh")"
for device in cpu cuda; do
  grep -q "LD_LIBRARY_PATH=$ROOT/.gpu_carry/lib.* PYTHONPATH=$ROOT/.gpu_carry/pykit TAMP_REQUIRE_CUDA=1 TAMP_SERVERS=127.0.0.1:4242,127.0.0.1:4243" \
    "$ROOT/seen/worker_$device" ||
    fail "the $device worker's environment: $(cat "$ROOT/seen/worker_$device" 2>/dev/null)"
done
for mode in notorchgpu:"this torch sees no CUDA device" nogpu:"FAIL: no GPU visible" \
    buildfail:"the extension did not build" weightsdiffer:"weights differ from the CPU" \
    workerfail:"a worker failed"; do
  setup
  touch "$ROOT/mode/${mode%%:*}"
  device pytorch
  expect_exit "pytorch, ${mode%%:*}" 1 $?
  expect_log "pytorch, ${mode%%:*}" "${mode#*:}"
done

# The real benchmark: a skip without a device, a failure where CUDA is required.
if out="$("$BENCH" 2>&1)"; then
  grep -q "no CUDA device: skipping" <<<"$out" || echo "note: codec_gpu_bench ran on a device: $out"
else
  fail "codec_gpu_bench without TAMP_REQUIRE_CUDA: $out"
fi
if out="$(TAMP_REQUIRE_CUDA=1 "$BENCH" --sizes=10 --iters=1 --warmup=0 2>&1)"; then
  grep -q "| codec |" <<<"$out" || fail "codec_gpu_bench with TAMP_REQUIRE_CUDA=1 passed without a device: $out"
fi

# torch_compare.py, where Debian's torch is installed: --require-cuda fails without a device.
if /usr/bin/python3 -c 'import torch; assert not torch.cuda.is_available()' 2>/dev/null; then
  /usr/bin/python3 "$TORCH_COMPARE" >/dev/null 2>&1 || fail "torch_compare.py without a device failed"
  /usr/bin/python3 "$TORCH_COMPARE" --require-cuda >/dev/null 2>&1 &&
    fail "torch_compare.py --require-cuda passed without a device"
else
  echo "note: no CPU-only torch at /usr/bin/python3; torch_compare.py's exit codes not checked"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
