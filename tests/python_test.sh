#!/usr/bin/env bash
# The Python package: tamp.init()'s placement (tests/python/init_test.py), a model's layout and
# profile files (describe_test.py), then against real
# servers: tamp.Client's exact steps and refusals (tests/python/binding_test.py),
# tamp.torch's (torch_test.py), DistributedOptimizer's Horovod step controls
# (step_controls_test.py), the end of the run (run_end_test.py), two clients in two threads
# of one process (two_clients_test.py: the GIL is released while waiting), the DDP comm hook
# with a stand-in for AGGREGATE mode (comm_hook_test.py), a server gone
# (server_gone_test.py), resume() in place of a dead worker (resume_test.py), a CUDA
# tamp.torch worker against a CPU one (device_worker.py; skipped without torch CUDA), the
# events tamp.torch prints for a script that reports nothing (auto_report_worker.py), and two
# tamp.torch workers ending with bit-identical replicas, one of them once killed and restarted
# by `tamp run --restart_workers` (examples/pytorch/mlp.py), and a DDP script switched to Tamp
# under `tamp run` (examples/pytorch/ddp.py).
# Debian's /usr/bin/python3 with python3-torch and python3-numpy.
source tests/testlib.sh
source tests/python_testlib.sh

# run_python DIR SCRIPT [ARGS...]: SCRIPT as worker 0 of the job whose servers SERVERS are.
run_python() {
  local dir=$1 script=$2; shift 2
  TAMP_CONFIG="$dir/job.pbtxt" TAMP_SERVERS="$SERVERS" TAMP_RANK=0 \
    run_python3 "tests/python/$script" "$@" || fail "$script failed"
}

mkdir -p "$WORK/init"
write_config "$WORK/init/job.pbtxt"
run_python3 tests/python/init_test.py "$WORK/init/job.pbtxt" || fail "init_test.py failed"
run_python3 tests/python/describe_test.py || fail "describe_test.py failed"

for script in binding_test.py torch_test.py step_controls_test.py resume_test.py; do
  dir="$WORK/${script%.py}"
  mkdir -p "$dir"
  write_exact_config "$dir/job.pbtxt"
  start_servers "$dir" "$dir/job.pbtxt" 2
  run_python "$dir" "$script"
done

# The end of the run (training.max_steps 3): pushes after it are refused naming the run's length.
dir="$WORK/run_end"
mkdir -p "$dir"
write_exact_config "$dir/job.pbtxt"
sed -i 's/^training { epochs: 2 }$/training { epochs: 2 max_steps: 3 }/' "$dir/job.pbtxt"
grep -q "max_steps: 3" "$dir/job.pbtxt" || fail "run_end: no training line to cut"
start_servers "$dir" "$dir/job.pbtxt" 2
run_python "$dir" run_end_test.py

dir="$WORK/two_clients"
mkdir -p "$dir"
write_exact_config "$dir/job.pbtxt" 2
start_servers "$dir" "$dir/job.pbtxt" 2
run_python "$dir" two_clients_test.py

# tamp.torch.comm_hook under DDP and DistributedOptimizer in AGGREGATE mode, two processes,
# with a stand-in for that mode's client
# (no servers; python_modes_test runs the same check against real servers).
dir="$WORK/comm_hook"
mkdir -p "$dir"
write_exact_config "$dir/job.pbtxt" 2
SERVERS="unused:1,unused:2" TAMP_TEST_RENDEZVOUS="$dir/rendezvous" \
  run_python_workers "$dir" comm_hook_test.py "$dir/weights@"
for check in ddp optimizer; do
  cmp "$dir/weights0.$check" "$dir/weights1.$check" || fail "the $check replicas differ"
done

dir="$WORK/server_gone"
mkdir -p "$dir"
write_exact_config "$dir/job.pbtxt"
start_servers "$dir" "$dir/job.pbtxt" 2
TAMP_TEST_DOOMED_PID=${STARTED_PIDS[-1]} run_python "$dir" server_gone_test.py

# A CUDA worker trains exactly as a CPU worker (top-k and fp16 on fc1.weight's chunks: GPU
# codecs; the rest through host copies), its broadcasts included (resync_steps pulls what
# they gave the servers). Needs torch with CUDA and a GPU; Debian's torch has
# no CUDA, so CI skips it, saying so (worker:cuda_backend_test checks the GPU codecs' side).
if run_python3 -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  for device in cpu cuda; do
    dir="$WORK/device_$device"
    mkdir -p "$dir"
    write_config "$dir/job.pbtxt" workers=1 training="resync_steps: 3" compression='tensor_overrides { pattern: "fc1.weight"
      compression { push { name: "topk" ratio: 0.1 } push_feedback { kind: RESIDUAL }
                    pull { name: "fp16" } } }'
    start_servers "$dir" "$dir/job.pbtxt" 2
    run_python "$dir" device_worker.py "$device" "$dir/weights"
  done
  cmp "$WORK/device_cpu/weights" "$WORK/device_cuda/weights" ||
    fail "the CUDA worker's weights differ from the CPU worker's"
else
  echo "device_worker.py: skipped: this torch sees no CUDA device (torch.cuda.is_available())"
fi

# `tamp run --restart_workers=1 -- python3 examples/pytorch/mlp.py`: worker 1 killed mid-run;
# its successor resumes (TAMP_RESTART) at the other worker's step and the run ends.
dir="$WORK/restart"
mkdir -p "$dir"
write_config "$dir/job.pbtxt" model="kind: MLP hidden: [1024, 1024] init_seed: 3" \
  training="eval_every_epoch: false"
sed -i 's/epochs: 2 /epochs: 3 /' "$dir/job.pbtxt"  # 192 steps.
PATH="/usr/bin:$PATH" "$TAMP_BIN" run "$dir/job.pbtxt" --restart_workers=1 --run_dir="$dir/run" \
  --summary_json="$dir/summary.json" --server_binary="$SERVER_BIN" -- \
  "${PYTHON3_COMMAND[@]}" examples/pytorch/mlp.py > "$dir/out" 2>&1 &
launcher=$!
STARTED_PIDS+=($launcher)
this_jobs_worker_1() {  # PID: worker 1 of this job's config.
  grep -qz '^TAMP_RANK=1$' "/proc/$1/environ" 2>/dev/null &&
    grep -qzF "$dir/job.pbtxt" "/proc/$1/environ" 2>/dev/null
}
kill_mid_run "$dir/out" "step 100/192" "examples/pytorch/mlp.py" this_jobs_worker_1
wait "$launcher" || { cat "$dir/out" "$dir"/run/worker-1*.log >&2; fail "restart: tamp run failed"; }
grep -q "worker 1 failed (killed by SIGKILL); restarting it (restart 1 of 1)" "$dir/out" ||
  { cat "$dir/out" >&2; fail "restart: worker 1 was not restarted"; }
grep -q "worker 1 rejoined at step" "$dir/run/worker-1.restart-1.log" ||
  { cat "$dir/run/worker-1.restart-1.log" >&2; fail "restart: the new worker 1 did not rejoin"; }
grep -q "final test accuracy .* after 192 steps" "$dir/out" ||
  { cat "$dir/out" >&2; fail "restart: worker 0 did not end after 192 steps"; }
# The example reports tamp_worker's events (tamp.torch.report_*): a full summary, not the
# wall time only.
/usr/bin/python3 - "$dir/summary.json" "$dir/out" <<'EOF' || fail "restart: summary incomplete"
import json, re, sys
summary = json.load(open(sys.argv[1]))
accuracy = float(re.search(r"final test accuracy ([0-9.]+) after 192", open(sys.argv[2]).read())[1])
assert summary["steps"] == 192, summary
assert summary["worker_restarts"] == 1, summary
assert abs(summary["test_accuracy"] - accuracy) < 1e-4, (summary, accuracy)
assert summary["bytes_pushed"] > 0 and summary["compression_ratio"] > 0, summary
assert summary["step_ms_median"] > 0 and summary["final_loss"] > 0, summary
EOF
echo "restart: $(grep -o 'worker 1 rejoined at step [0-9]*' "$dir/run/worker-1.restart-1.log");" \
  "$(grep -o 'final test accuracy .*' "$dir/out")"

# A script that reports nothing itself under `tamp run`: tamp.torch prints the events, so the
# summary still says what compression bought (steps, bytes, step time); accuracy and loss
# only where the script gave them (step(closure)'s loss, report_eval()'s accuracy).
for mode in silent closure; do
  dir="$WORK/auto_report_$mode"
  mkdir -p "$dir"
  write_config "$dir/job.pbtxt" model="kind: MLP hidden: [64] init_seed: 3"
  PATH="/usr/bin:$PATH" "$TAMP_BIN" run "$dir/job.pbtxt" --run_dir="$dir/run" \
    --summary_json="$dir/summary.json" --server_binary="$SERVER_BIN" -- \
    "${PYTHON3_COMMAND[@]}" tests/python/auto_report_worker.py "$mode" > "$dir/out" 2>&1 ||
    { cat "$dir/out" >&2; fail "auto reports ($mode): tamp run failed"; }
  /usr/bin/python3 - "$mode" "$dir/summary.json" "$dir/out" <<'EOF' ||
import json, sys
mode, summary, out = sys.argv[1], json.load(open(sys.argv[2])), open(sys.argv[3]).read()
assert summary["steps"] == 20, summary
assert summary["bytes_pushed"] > 0 and summary["compression_ratio"] > 5, summary
assert summary["step_ms_median"] > 0, summary
assert "step 20/20 (100%)" in out, out
if mode == "silent":
    assert "test_accuracy" not in summary and "final_loss" not in summary, summary
    assert "done: no test accuracy reported, 20 steps" in out, out
    assert "| loss " not in out, out
else:
    assert summary["test_accuracy"] == 0.625 and summary["final_loss"] > 0, summary
    assert "| loss " in out and "done: test accuracy 62.50%, 20 steps" in out, out
EOF
    { cat "$dir/out" >&2; fail "auto reports ($mode): the summary is not the events'"; }
  echo "auto reports ($mode): $(grep -o 'done: .*' "$dir/out")"
done

# An override that changes nothing (fc2.bias is below min_compress_bytes) on a REGISTERED
# model, whose layout only the workers know: worker 0 says so on the progress display, once.
dir="$WORK/override_note"
mkdir -p "$dir"
write_config "$dir/job.pbtxt" model="kind: REGISTERED" compression='min_compress_bytes: 1024
  tensor_overrides { pattern: "fc2.bias" compression { push { name: "fp16" } push_feedback { } } }'
PATH="/usr/bin:$PATH" "$TAMP_BIN" run "$dir/job.pbtxt" --run_dir="$dir/run" \
  --server_binary="$SERVER_BIN" -- \
  "${PYTHON3_COMMAND[@]}" tests/python/auto_report_worker.py silent > "$dir/out" 2>&1 ||
  { cat "$dir/out" >&2; fail "override note: tamp run failed"; }
[ "$(grep -c "warning: tamp: .*'fc2.bias') changes nothing" "$dir/out")" -eq 1 ] &&
  grep -q "^\[worker 0\] warning: tamp: .*changes nothing" "$dir/out" ||
  { cat "$dir/out" >&2; fail "override note: not said once, by worker 0"; }
echo "override note: $(grep -o "warning: tamp: .*changes nothing" "$dir/out" | cut -c1-90)"

# A DDP script switched to Tamp (examples/pytorch/ddp.py: the comm hook, AGGREGATE mode):
# its gloo process group comes from the torchrun variables `tamp run` sets (env://).
dir="$WORK/ddp_example"
mkdir -p "$dir"
write_config "$dir/job.pbtxt" model="kind: REGISTERED" training="max_steps: 20"
echo "server { mode: AGGREGATE }" >> "$dir/job.pbtxt"
PATH="/usr/bin:$PATH" "$TAMP_BIN" run "$dir/job.pbtxt" --run_dir="$dir/run" \
  --summary_json="$dir/summary.json" --server_binary="$SERVER_BIN" -- \
  "${PYTHON3_COMMAND[@]}" examples/pytorch/ddp.py > "$dir/out" 2>&1 ||
  { cat "$dir/out" "$dir"/run/worker-*.log >&2; fail "ddp example: tamp run failed"; }
/usr/bin/python3 - "$dir/summary.json" "$dir/out" <<'EOF' ||
import json, re, sys
summary, out = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
accuracy = float(re.search(r"final test accuracy ([0-9.]+) after 20 steps", out)[1])
assert summary["steps"] == 20 and abs(summary["test_accuracy"] - accuracy) < 1e-4, summary
assert summary["compression_ratio"] > 5, summary  # top-k 10% of the pushes.
EOF
  { cat "$dir/out" >&2; fail "ddp example: the summary is not the run's"; }
echo "ddp example: $(grep -o 'done: .*' "$dir/out")"

# Two workers, top-k 10% with error feedback and momentum on the servers.
dir="$WORK/replicas"
mkdir -p "$dir"
write_config "$dir/job.pbtxt"
start_servers "$dir" "$dir/job.pbtxt" 2
# The collectives' rendezvous (tamp run sets it): a free port on loopback.
export MASTER_ADDR=127.0.0.1
MASTER_PORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export MASTER_PORT
run_python_workers "$dir" torch_worker.py "$dir/weights@"
unset MASTER_ADDR MASTER_PORT
grep -q "rank 1: collectives ok" "$dir/worker1.log" || fail "torch_worker.py: no collectives"
cmp "$dir/weights0" "$dir/weights1" || fail "the torch workers' replicas differ"

# Rank 1's batch of step 3 is NaN: the servers refuse its push (validation.nonfinite_policy
# REJECT), step() raises, the script catches it and goes on: its next push rejoins the run
# with the others' weights at step 3 itself (its first push, refused, was all it sent of it,
# so no step is skipped), and both end with identical replicas.
dir="$WORK/nan"
mkdir -p "$dir"
write_config "$dir/job.pbtxt"
start_servers "$dir" "$dir/job.pbtxt" 2
run_python_workers "$dir" torch_worker.py "$dir/weights@" nan_at=3
[ "$(grep -c "rank 1 caught: .*step 3.*NaN" "$dir/worker1.log")" -eq 1 ] &&
  [ "$(grep -c "caught" "$dir/worker1.log")" -eq 1 ] &&
  grep -q "step 3 failed (.*); rejoined the run at step 3 with the other workers' weights" \
    "$dir/worker1.log" || { cat "$dir/worker1.log" >&2; fail "nan: rank 1 did not go on"; }
cmp "$dir/weights0" "$dir/weights1" || fail "nan: the replicas differ after the rejoin"
echo "nan: $(grep -o 'rejoined the run at step [0-9]*' "$dir/worker1.log")"
echo "PASS"
