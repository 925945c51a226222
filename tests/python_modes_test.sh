#!/usr/bin/env bash
# The Python package with the servers' other modes:
# - `model { kind: REGISTERED }`: a model the C++ worker does not have; rank 0's initial
#   weights become everyone's; replicas bit-identical.
# - `server { mode: AGGREGATE }`: wait() writes the workers' mean
#   gradient (codec none: to fp32 rounding); the DDP comm hook gives DDP that mean, and
#   DistributedOptimizer steps the wrapped optimizer on it.
source tests/testlib.sh
source tests/python_testlib.sh

dir="$WORK/registered"
mkdir -p "$dir"
write_config "$dir/job.pbtxt" model="kind: REGISTERED"
start_servers "$dir" "$dir/job.pbtxt" 2
run_python_workers "$dir" registered_worker.py "$dir/initial@" "$dir/final@"
cmp "$dir/initial0" "$dir/initial1" || fail "rank 1 did not start from rank 0's weights"
cmp "$dir/final0" "$dir/final1" || fail "the registered model's replicas differ"

for check in client ddp optimizer; do
  dir="$WORK/aggregate_$check"
mkdir -p "$dir"
  write_exact_config "$dir/job.pbtxt" 2 "server { mode: AGGREGATE }"
  start_servers "$dir" "$dir/job.pbtxt" 2
  TAMP_TEST_RENDEZVOUS="$dir/rendezvous" run_python_workers "$dir" aggregate_worker.py \
    "$check" "$dir/weights@"
  [ "$check" = client ] || cmp "$dir/weights0" "$dir/weights1" || fail "the $check replicas differ"
done
echo "PASS"
