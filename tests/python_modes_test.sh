#!/usr/bin/env bash
# The Python package with the servers' other modes:
# - `model { kind: REGISTERED }`: a model the C++ worker does not have; rank 0's initial
#   weights become everyone's; replicas bit-identical. With checkpoints, under
#   `tamp run --restart_servers=1` (examples/pytorch/resmlp.py): a server killed mid-run
#   resumes from its checkpoint at the first handshake and the run ends. With
#   compression.automatic, planned from the files tamp.torch.describe_model() wrote.
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

dir="$WORK/registered_checkpoint"
mkdir -p "$dir"
write_config "$dir/job.pbtxt" model="kind: REGISTERED"  # 128 steps.
echo "checkpoint { every_steps: 10 }" >> "$dir/job.pbtxt"
PATH="/usr/bin:$PATH" "$TAMP_BIN" run "$dir/job.pbtxt" --restart_servers=1 --run_dir="$dir/run" \
  --summary_json="$dir/summary.json" --server_binary="$SERVER_BIN" -- \
  "${PYTHON3_COMMAND[@]}" examples/pytorch/resmlp.py > "$dir/out" 2>&1 &
launcher=$!
STARTED_PIDS+=($launcher)
this_jobs_server() {  # PID: a tamp_server of this job's config.
  grep -qzF "$dir/job.pbtxt" "/proc/$1/cmdline" 2>/dev/null &&
    grep -qzF "tamp_server" "/proc/$1/cmdline" 2>/dev/null
}
kill_mid_run "$dir/out" "step ([5-9][0-9])/128" "--rank=1" this_jobs_server
wait "$launcher" || { cat "$dir/out" "$dir"/run/server-1*.log >&2; fail "registered checkpoint: tamp run failed"; }
grep -q "restarting it on port .*, it resumes from its checkpoint" "$dir/out" ||
  { cat "$dir/out" >&2; fail "registered checkpoint: server 1 was not restarted"; }
grep -q "checkpoint: resumed from .*shard-1.ckpt at step" "$dir/run/server-1.restart-1.log" ||
  { cat "$dir/run/server-1.restart-1.log" >&2; fail "registered checkpoint: no resume"; }
grep -q "final test accuracy .* after 128 steps" "$dir/out" ||
  { cat "$dir/out" >&2; fail "registered checkpoint: the run did not end at step 128"; }
/usr/bin/python3 - "$dir/summary.json" <<'EOF' || fail "registered checkpoint: summary"
import json, sys
summary = json.load(open(sys.argv[1]))
assert summary["steps"] == 128 and summary["server_restarts"] == 1, summary
EOF
echo "registered checkpoint: $(grep -o 'checkpoint: resumed from .*' "$dir/run/server-1.restart-1.log");" \
  "$(grep -o 'final test accuracy .*' "$dir/out")"

# compression.automatic for a REGISTERED model: tamp.torch.describe_model() writes its layout
# and profile, `tamp run` plans per tensor from them and the workers register exactly those.
dir="$WORK/registered_auto"
mkdir -p "$dir"
(cd examples/pytorch && "${PYTHON3_COMMAND[@]}" - "$dir/resmlp" <<'EOF') ||
import sys, torch, resmlp, tamp.torch
torch.manual_seed(1)
batch = (torch.randn(32, 784), torch.randint(0, 10, (32,)))
tamp.torch.describe_model(resmlp.ResMlp(), sys.argv[1], batch, repetitions=3)
EOF
  fail "registered auto: describe_model failed"
write_config "$dir/job.pbtxt" \
  model="kind: REGISTERED layout_file: \"resmlp.layout\" profile_file: \"resmlp.profile\"" \
  training="max_steps: 20"
sed -i '/^compression {/,$d' "$dir/job.pbtxt"
cat >> "$dir/job.pbtxt" <<'EOF'
compression {
  automatic {
    bandwidth: "1gbit"
    candidates { push { name: "none" } }
    candidates { push { name: "topk" ratio: 0.01 } push_feedback { kind: RESIDUAL } }
  }
}
EOF
PATH="/usr/bin:$PATH" "$TAMP_BIN" run "$dir/job.pbtxt" --run_dir="$dir/run" \
  --summary_json="$dir/summary.json" --server_binary="$SERVER_BIN" -- \
  "${PYTHON3_COMMAND[@]}" examples/pytorch/resmlp.py > "$dir/out" 2>&1 ||
  { cat "$dir/out" >&2; fail "registered auto: tamp run failed"; }
grep -q "^# compression.automatic resolved by tamp run" "$dir/run/auto.pbtxt" ||
  fail "registered auto: no resolved config"
grep -q "final test accuracy .* after 20 steps" "$dir/out" ||
  { cat "$dir/out" >&2; fail "registered auto: the run did not end at step 20"; }
echo "registered auto: $(grep -c 'tensor_overrides' "$dir/run/auto.pbtxt") tensor overrides;" \
  "$(grep -o 'done: .*' "$dir/out")"

for check in client ddp optimizer mismatch; do
  dir="$WORK/aggregate_$check"
  mkdir -p "$dir"
  write_exact_config "$dir/job.pbtxt" 2 "server { mode: AGGREGATE }"
  start_servers "$dir" "$dir/job.pbtxt" 2
  TAMP_TEST_RENDEZVOUS="$dir/rendezvous" run_python_workers "$dir" aggregate_worker.py \
    "$check" "$dir/weights@"
  case "$check" in ddp|optimizer)
    cmp "$dir/weights0" "$dir/weights1" || fail "the $check replicas differ" ;;
  esac
done
# The package initialises glog (shared with torch), so no worker's log starts with glog's
# complaint about logging before it.
! grep -rq "Logging before InitGoogleLogging" "$WORK" ||
  fail "a worker's log has glog's 'Logging before InitGoogleLogging()' line"
echo "PASS"
