#!/usr/bin/env bash
# The Python package against servers this test starts itself (python_run_test has the
# scripts under `tamp run`): tamp.init()'s placement (tests/python/init_test.py), a model's
# layout and profile files (describe_test.py), then against real servers: tamp.Client's exact
# steps and refusals (tests/python/binding_test.py), tamp.torch's (torch_test.py),
# DistributedOptimizer's Horovod step controls (step_controls_test.py), the end of the run
# (run_end_test.py), two clients in two threads of one process (two_clients_test.py: the GIL
# is released while waiting), the DDP comm hook with a stand-in for AGGREGATE mode
# (comm_hook_test.py), a server gone (server_gone_test.py), resume() in place of a dead
# worker (resume_test.py), a CUDA tamp.torch worker against a CPU one (device_worker.py;
# skipped without torch CUDA), and two tamp.torch workers ending with bit-identical replicas,
# also after one of them rejoins past a refused NaN push (torch_worker.py).
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
