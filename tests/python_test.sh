#!/usr/bin/env bash
# The Python package against real servers: tamp.Client's exact steps and refusals
# (tests/python/binding_test.py), tamp.torch's (torch_test.py), a server gone
# (server_gone_test.py), and two tamp.torch workers ending with bit-identical replicas.
# Debian's /usr/bin/python3 with python3-torch and python3-numpy.
source tests/testlib.sh

PYTHON=/usr/bin/python3
export PYTHONPATH="$PWD/python"

# The exact job: MLP 784-64-10, 1 worker, codec none both ways, SGD at 0.125 without
# momentum on the servers: one step moves the weights by exactly -0.125 * gradient.
write_exact_config() {
  cat > "$1" <<CONFIG
version: 1
name: "python_exact"
cluster { num_servers: 2 num_workers: 1 }
model { kind: MLP hidden: [64] init_seed: 3 }
data { dir: "$DATA_DIR" batch_size: 32 }
training { epochs: 2 }
optimizer { learning_rate: 0.125 momentum: 0 }
compression {
  partition_bytes: 16384
  seed: 7
  default_compression { push { name: "none" } pull { name: "none" } }
}
CONFIG
}

# run_python DIR SCRIPT [ARGS...]: SCRIPT as worker 0 of the job whose servers SERVERS are.
run_python() {
  local dir=$1 script=$2; shift 2
  TAMP_CONFIG="$dir/job.pbtxt" TAMP_SERVERS="$SERVERS" TAMP_RANK=0 \
    "$PYTHON" "tests/python/$script" "$@" || fail "$script failed"
}

for script in binding_test.py torch_test.py; do
  dir="$WORK/${script%.py}"
  mkdir -p "$dir"
  write_exact_config "$dir/job.pbtxt"
  start_servers "$dir" "$dir/job.pbtxt" 2
  run_python "$dir" "$script"
done

dir="$WORK/server_gone"
mkdir -p "$dir"
write_exact_config "$dir/job.pbtxt"
start_servers "$dir" "$dir/job.pbtxt" 2
TAMP_TEST_DOOMED_PID=${STARTED_PIDS[-1]} run_python "$dir" server_gone_test.py

# Two workers, top-k 10% with error feedback and momentum on the servers.
dir="$WORK/replicas"
mkdir -p "$dir"
write_config "$dir/job.pbtxt"
start_servers "$dir" "$dir/job.pbtxt" 2
pids=()
for rank in 0 1; do
  TAMP_CONFIG="$dir/job.pbtxt" TAMP_SERVERS="$SERVERS" TAMP_RANK=$rank \
    "$PYTHON" tests/python/torch_worker.py "$dir/weights$rank" > "$dir/worker$rank.log" 2>&1 &
  pids+=($!)
  STARTED_PIDS+=($!)
done
for rank in 0 1; do
  wait "${pids[$rank]}" || { cat "$dir/worker$rank.log" >&2; fail "torch worker $rank failed"; }
done
cat "$dir/worker0.log" "$dir/worker1.log"
cmp "$dir/weights0" "$dir/weights1" || fail "the torch workers' replicas differ"
echo "PASS"
