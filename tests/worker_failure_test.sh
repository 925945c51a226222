#!/usr/bin/env bash
# SYNC worker failure (docs/consistency.md, "Worker failure"): 2 servers, 3 workers,
# consistency.worker_timeout_ms 1000. Mid-run worker 2 is stalled (SIGSTOP): both servers
# drop it, the others go on; resumed (SIGCONT), it rejoins by itself. Later worker 1 is
# killed (SIGKILL): dropped again, the others go on, and a replacement with its rank
# rejoins. All three reach the last step with bit-identical weights (a resync follows the
# rejoins) and the accuracy of a normal run.
source tests/testlib.sh

dir="$WORK/failure"
config="$WORK/failure.pbtxt"
mkdir -p "$dir"
# 4096 examples / 3 workers / batch 32 = 42 steps per epoch; 50 epochs = 2100 steps, 10-20 s
# on 2 cores: the replacement (a few seconds to start) joins well before the end.
write_config "$config" servers=2 workers=3 consistency="worker_timeout_ms: 1000" \
  training="resync_steps: 100 eval_every_epoch: false"
# A run long enough to stall and kill workers in (write_config fixes 2 epochs).
sed -i 's/epochs: 2 /epochs: 50 /' "$config"
total_steps=2100

start_servers "$dir" "$config" 2
servers=$SERVERS
# dropped_by_both RANK: both servers logged dropping worker RANK (each decides alone).
dropped_by_both() {
  grep -q "dropped worker $1 from the barrier" "$dir/server0.log" &&
    grep -q "dropped worker $1 from the barrier" "$dir/server1.log"
}

# start_worker RANK NAME: a worker of rank RANK writing NAME's events, weights and log;
# its pid goes to WORKER_PID.
start_worker() {
  "$WORKER_BIN" --config="$config" --rank="$1" --servers="$servers" \
    --dump_weights="$dir/weights.$2" > "$dir/events.$2" 2> "$dir/worker.$2.log" &
  WORKER_PID=$!
  STARTED_PIDS+=($!)
}
# steps_done NAME: the last step NAME's worker reported.
steps_done() {
  local last
  last=$(grep '"kind":"STEP"' "$dir/events.$1" 2>/dev/null | tail -1) || true
  last=$(echo "$last" | grep -o '"step":[0-9]*') || true
  echo "${last##*:}" | sed 's/^$/0/'
}
# wait_for WHAT COMMAND...: polls COMMAND for up to 30 s.
wait_for() {
  local what=$1; shift
  for _ in $(seq 300); do "$@" && return 0; sleep 0.1; done
  fail "timed out waiting for $what"
}
reached() { [ "$(steps_done "$1")" -ge "$2" ]; }

pids=()
for rank in 0 1 2; do start_worker $rank $rank; pids+=("$WORKER_PID"); done

# Stall worker 2 mid-run; the others must get past the drop without it.
wait_for "worker 2 to reach step 40" reached 2 40
kill -STOP "${pids[2]}"
wait_for "the servers to drop worker 2" dropped_by_both 2
stalled_at=$(steps_done 2)
wait_for "worker 0 to go on without worker 2" reached 0 $((stalled_at + 40))
kill -CONT "${pids[2]}"
wait_for "worker 2 to rejoin" grep -q "worker 2 rejoined at step" "$dir/worker.2.log"

# Kill worker 1; a replacement with its rank takes over.
wait_for "worker 1 to reach step 200" reached 1 200
kill -9 "${pids[1]}"
wait "${pids[1]}" 2>/dev/null || true
killed_at=$(steps_done 1)
wait_for "the servers to drop worker 1" dropped_by_both 1
start_worker 1 1b
replacement=$WORKER_PID

for pid in "${pids[0]}" "${pids[2]}" "$replacement"; do
  wait "$pid" || { tail -n 20 "$dir"/worker.*.log >&2; fail "a worker failed"; }
done
grep -q "worker 1 rejoined at step" "$dir/worker.1b.log" || fail "the replacement did not rejoin"
for name in 0 2 1b; do
  grep '"kind":"DONE"' "$dir/events.$name" | grep -q "\"step\":$total_steps," ||
    fail "worker $name did not reach step $total_steps: $(grep DONE "$dir/events.$name")"
done
cmp "$dir/weights.0" "$dir/weights.2" || fail "worker 2's replica differs from worker 0's"
cmp "$dir/weights.0" "$dir/weights.1b" || fail "the replacement's replica differs from worker 0's"

accuracy=$(final_accuracy "$dir/events.0")
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.7) }' || fail "test accuracy $accuracy"
# Step times of worker 0: the median, and the two steps that waited for a drop.
step_ms=$(grep '"kind":"STEP"' "$dir/events.0" | grep -o '"step_ms":[0-9.e+-]*' | cut -d: -f2)
echo "worker 2 stalled at step $stalled_at, worker 1 killed at step $killed_at"
sorted_ms=$(echo "$step_ms" | sort -g)
median_ms=$(echo "$sorted_ms" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
echo "worker 0 step time: median $median_ms ms, slowest two" \
  "$(echo "$sorted_ms" | tail -2 | tr '\n' ' ')ms (worker_timeout_ms 1000)"
echo "test accuracy after $total_steps steps with two failures: $accuracy"
echo PASS
