#!/usr/bin/env bash
# Server failure and checkpoints in ASYNC and SSP (README "Checkpoints and failures"): `tamp
# run --restart_servers=1` with checkpoints every 10 steps; server 1 is killed (SIGKILL) once
# it has checkpointed mid-run, resumes from its checkpoint (each worker's count of pushes
# with it), the workers resync and push again, and the job ends with every step and the
# accuracy of a normal run.
source tests/testlib.sh

# 4096 examples / 2 workers / batch 32 = 64 steps per epoch; 6 epochs = 384 steps. The shard's
# step counts applied pushes in these modes: 2 per worker step.
total_steps=384
for mode in "mode: ASYNC" "mode: SSP staleness: 2"; do
  name=$(echo "$mode" | awk '{ print tolower($2) }')
  config="$WORK/$name.pbtxt"
  write_config "$config" consistency="$mode" training="eval_every_epoch: false"
  # A cosine schedule: the rate falls to 0 at the end, so the final accuracy does not swing
  # from step to step (at a constant rate these jobs end between 0.72 and 0.76 undisturbed).
  sed -i 's/epochs: 2 /epochs: 6 /; s/momentum: 0.9 }/momentum: 0.9 schedule { kind: COSINE } }/' \
    "$config"
  grep -q COSINE "$config" || fail "the job's optimizer block changed; update the sed above"
  echo "checkpoint { every_steps: 10 }" >> "$config"
  dir="$WORK/$name"
  "$TAMP_BIN" run "$config" --restart_servers=1 --run_dir="$dir" \
    --summary_json="$dir.json" --server_binary="$SERVER_BIN" \
    --worker_binary="$WORKER_BIN" > "$dir.out" 2>&1 &
  launcher=$!
  STARTED_PIDS+=($launcher)
  # Server 1 has checkpointed past 200 pushes (about step 100 of 384).
  for _ in $(seq 1500); do
    grep -qE 'checkpoint: step (2[0-9][0-9]|[3-9][0-9][0-9])' "$dir/server-1.log" 2>/dev/null && break
    sleep 0.02
  done
  server1=$(pgrep -f -- "--rank=1 .*--port_file=$dir/server-1.port") ||
    { cat "$dir.out" >&2; fail "$name: server 1 not found"; }
  kill -9 "$server1"
  wait "$launcher" || { cat "$dir.out" "$dir"/worker-*.log >&2; fail "$name: tamp run failed after server 1 was killed"; }
  grep -q "server 1 exited while workers were running (killed by SIGKILL); restarting it" \
    "$dir.out" || { cat "$dir.out" >&2; fail "$name: the launcher did not restart server 1"; }
  resumed=$(grep -o 'resumed from .* at step [0-9]*' "$dir/server-1.restart-1.log" |
    grep -o '[0-9]*$') || { cat "$dir/server-1.restart-1.log" >&2; fail "$name: server 1 did not resume"; }
  [ "$resumed" -gt 0 ] || fail "$name: server 1 resumed at step 0"
  grep -q "resynced with shard 1" "$dir"/worker-*.log || fail "$name: no worker resynced with shard 1"
  grep -qE "\"steps\":$total_steps,.*\"server_restarts\":1," "$dir.json" ||
    fail "$name: expected $total_steps steps and one server restart: $(cat "$dir.json")"
  accuracy=$(grep -oE '"test_accuracy":[0-9.e+-]+' "$dir.json" | grep -oE '[0-9.e+-]+$')
  awk -v a="$accuracy" 'BEGIN { exit !(a > 0.7) }' || fail "$name: test accuracy $accuracy"
  echo "$name: server 1 killed, resumed from its checkpoint at $resumed pushes; $total_steps steps, test accuracy $accuracy"
done
echo PASS
