#!/usr/bin/env bash
# The Python package: tamp.init()'s placement (tests/python/init_test.py), then against real
# servers: tamp.Client's exact steps and refusals
# (tests/python/binding_test.py), tamp.torch's (torch_test.py), two clients in two threads
# of one process (two_clients_test.py: the GIL is released while waiting), the DDP comm hook
# with a stand-in for AGGREGATE mode (comm_hook_test.py), a server gone
# (server_gone_test.py), a CUDA tamp.torch worker against a CPU one (device_worker.py; skipped
# without torch CUDA), and two tamp.torch workers ending with bit-identical replicas.
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

for script in binding_test.py torch_test.py; do
  dir="$WORK/${script%.py}"
  mkdir -p "$dir"
  write_exact_config "$dir/job.pbtxt"
  start_servers "$dir" "$dir/job.pbtxt" 2
  run_python "$dir" "$script"
done

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
# codecs; the rest through host copies). Needs torch with CUDA and a GPU; Debian's torch has
# no CUDA, so CI skips it, saying so (worker:cuda_backend_test checks the GPU codecs' side).
if run_python3 -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  for device in cpu cuda; do
    dir="$WORK/device_$device"
    mkdir -p "$dir"
    write_config "$dir/job.pbtxt" workers=1 compression='tensor_overrides { pattern: "fc1.weight"
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
run_python_workers "$dir" torch_worker.py "$dir/weights@"
cmp "$dir/weights0" "$dir/weights1" || fail "the torch workers' replicas differ"
echo "PASS"
