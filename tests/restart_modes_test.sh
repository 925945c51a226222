#!/usr/bin/env bash
# Server failure and checkpoints beyond SYNC with single-round codecs (README "Checkpoints and
# failures"): in ASYNC, in SSP, and in SYNC with powersgd (two rounds per step), `tamp run
# --restart_servers=1` with checkpoints every 10 steps; server 1 is killed (SIGKILL) once it
# has checkpointed mid-run, resumes from its checkpoint, the workers resync and push again
# (powersgd: each step of server 1's chunks from its first round), and the job ends with
# every step and the accuracy of a normal run.
source tests/testlib.sh

# 4096 examples / 2 workers / batch 32 = 64 steps per epoch; 6 epochs = 384 steps.
total_steps=384
# run_case NAME KILL_AFTER [WRITE_CONFIG_ARGS...]: kills server 1 once it has checkpointed at a
# step >= KILL_AFTER. In ASYNC / SSP a shard's step counts applied pushes, 2 per
# worker step.
run_case() {
  local name=$1 kill_after=$2; shift 2
  local config="$WORK/$name.pbtxt" dir="$WORK/$name" checkpointed
  write_config "$config" training="eval_every_epoch: false" "$@"
  lengthen_with_cosine "$config" 6
  echo "checkpoint { every_steps: 10 }" >> "$config"
  "$TAMP_BIN" run "$config" --restart_servers=1 --run_dir="$dir" \
    --summary_json="$dir.json" --metrics_file="$dir.metrics" --server_binary="$SERVER_BIN" \
    --worker_binary="$WORKER_BIN" > "$dir.out" 2>&1 &
  local launcher=$!
  STARTED_PIDS+=($launcher)
  for _ in $(seq 1500); do
    checkpointed=$(grep -oE 'checkpoint: step [0-9]+' "$dir/server-1.log" 2>/dev/null |
      tail -1 | grep -oE '[0-9]+$') || true
    [ "${checkpointed:-0}" -ge "$kill_after" ] && break
    sleep 0.02
  done
  local server1 resumed accuracy
  server1=$(pgrep -f -- "--rank=1 .*--port_file=$dir/server-1.port") ||
    { cat "$dir.out" >&2; fail "$name: server 1 not found"; }
  kill -9 "$server1"
  local killed_at
  killed_at=$(grep -c '"worker":0,' "$dir.metrics" || true)
  [ "$killed_at" -lt 300 ] || fail "$name: the run was nearly over (step $killed_at) before server 1 was killed"
  wait "$launcher" || { cat "$dir.out" "$dir"/worker-*.log >&2; fail "$name: tamp run failed after server 1 was killed"; }
  grep -q "server 1 exited while workers were running (killed by SIGKILL); restarting it" \
    "$dir.out" || { cat "$dir.out" >&2; fail "$name: the launcher did not restart server 1"; }
  resumed=$(grep -o 'resumed from .* at step [0-9]*' "$dir/server-1.restart-1.log" |
    grep -o '[0-9]*$') || { cat "$dir/server-1.restart-1.log" >&2; fail "$name: server 1 did not resume"; }
  [ "$resumed" -gt 0 ] || fail "$name: server 1 resumed at step 0"
  grep -q "resynced with shard 1" "$dir"/worker-*.log ||
    { tail -n 5 "$dir"/*.log >&2; fail "$name: no worker resynced with shard 1 (killed after checkpoint $checkpointed)"; }
  grep -qE "\"steps\":$total_steps,.*\"server_restarts\":1," "$dir.json" ||
    fail "$name: expected $total_steps steps and one server restart: $(cat "$dir.json")"
  accuracy=$(grep -oE '"test_accuracy":[0-9.e+-]+' "$dir.json" | grep -oE '[0-9.e+-]+$')
  awk -v a="$accuracy" 'BEGIN { exit !(a > 0.7) }' || fail "$name: test accuracy $accuracy"
  echo "$name: server 1 killed at worker 0's step $killed_at, resumed from its checkpoint at" \
    "step $resumed; $total_steps steps, test accuracy $accuracy"
}

run_case async 120 consistency="mode: ASYNC"
run_case ssp 120 consistency="mode: SSP staleness: 2"
run_case powersgd 60 compression='tensor_overrides {
    pattern: "*"
    compression { push { name: "powersgd" rank: 2 } push_feedback { kind: RESIDUAL } }
  }'
echo PASS
