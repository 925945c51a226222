#!/usr/bin/env bash
# tamp_worker with device CUDA where no GPU is usable (CUDA_VISIBLE_DEVICES="" hides any,
# so this runs the same on a GPU machine): one line naming the cause, exit status 1, and no
# attempt to reach the servers (the address is a closed port; a connection attempt would
# fail differently, after cluster.connect_timeout_ms). --device overrides the config, and
# is validated as the config is.
source tests/testlib.sh

write_config "$WORK/cuda.pbtxt" cluster="connect_timeout_ms: 30000"
echo "device: CUDA" >> "$WORK/cuda.pbtxt"
write_config "$WORK/cpu.pbtxt" cluster="connect_timeout_ms: 30000"

# expect_no_gpu NAME ARGS...: the worker must exit 1 with exactly one stderr line.
expect_no_gpu() {
  local name=$1; shift
  local status=0
  CUDA_VISIBLE_DEVICES="" timeout 20 "$WORKER_BIN" --rank=1 --servers=127.0.0.1:1,127.0.0.1:2 \
    "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || status=$?
  cat "$WORK/$name.err"
  [ "$status" = 1 ] || fail "$name: exit status $status, expected 1"
  [ "$(wc -l < "$WORK/$name.err")" = 1 ] || fail "$name: stderr is not one line"
  grep -Eq '^tamp_worker 1: device CUDA: no usable GPU: .+' "$WORK/$name.err" ||
    fail "$name: the line does not name the cause"
  [ ! -s "$WORK/$name.out" ] || fail "$name: the worker reported progress"
}

expect_no_gpu config --config="$WORK/cuda.pbtxt"
expect_no_gpu flag --config="$WORK/cpu.pbtxt" --device=cuda

# --device is checked like the config: a bad value, and CUDA for a kind without a GPU model.
status=0
"$WORKER_BIN" --config="$WORK/cpu.pbtxt" --device=tpu 2>"$WORK/bad.err" || status=$?
[ "$status" = 2 ] || fail "--device=tpu: exit status $status, expected 2"
grep -q -- '--device=tpu: must be cpu or cuda' "$WORK/bad.err" || fail "--device=tpu: $(cat "$WORK/bad.err")"
cat > "$WORK/registered.pbtxt" <<CONFIG
version: 1
cluster { num_servers: 1 num_workers: 1 }
model { kind: REGISTERED }
optimizer { learning_rate: 0.1 }
CONFIG
status=0
"$WORKER_BIN" --config="$WORK/registered.pbtxt" --device=cuda --servers=127.0.0.1:1 \
  2>"$WORK/registered.err" || status=$?
[ "$status" = 2 ] || fail "REGISTERED on cuda: exit status $status, expected 2"
grep -q -- '--device=cuda: device: CUDA runs model.kind MLP or CNN, not REGISTERED' \
  "$WORK/registered.err" || fail "REGISTERED on cuda: $(cat "$WORK/registered.err")"

# usage_error NAME NEEDLE ARGS...: the worker exits 2 before anything, printing NEEDLE.
usage_error() {
  local name=$1 needle=$2; shift 2
  local status=0
  "$WORKER_BIN" --servers=127.0.0.1:1 "$@" 2>"$WORK/$name.err" >/dev/null || status=$?
  [ "$status" = 2 ] || fail "$name: exit status $status, expected 2"
  grep -q -- "$needle" "$WORK/$name.err" || fail "$name: $(cat "$WORK/$name.err")"
}
# AGGREGATE mode steps the optimizer on the CPU: a GPU model is refused, --check too.
cp "$WORK/cpu.pbtxt" "$WORK/aggregate.pbtxt"
echo "server { mode: AGGREGATE }" >> "$WORK/aggregate.pbtxt"
usage_error aggregate_cuda "device: CUDA with server.mode AGGREGATE" \
  --config="$WORK/aggregate.pbtxt" --device=cuda --check
# Flags: an unknown one, a value its flag cannot take, and values the worker cannot use.
usage_error unknown_flag "unknown flag --rnak" --config="$WORK/cpu.pbtxt" --rnak=1
usage_error bad_rank "--rank=-1: " --config="$WORK/cpu.pbtxt" --rank=-1
usage_error blas_threads "--blas_threads=0: must be at least 1" --config="$WORK/cpu.pbtxt" \
  --blas_threads=0
# Servers the environment names (here Slurm's) and a --servers that says otherwise.
SLURM_PROCID=3 SLURM_NTASKS=4 SLURM_STEP_NODELIST=localhost SLURM_STEP_TASKS_PER_NODE=4 \
  usage_error contradicting_servers "--servers=127.0.0.1:1 contradicts the slurm placement's servers" \
  --config="$WORK/cpu.pbtxt"
usage_error dump_weights "--dump_weights=/nonexistent/dir/w: cannot write in /nonexistent/dir" \
  --config="$WORK/cpu.pbtxt" --dump_weights=/nonexistent/dir/w
echo "PASS"
