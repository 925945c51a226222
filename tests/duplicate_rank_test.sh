#!/usr/bin/env bash
# Two worker processes started with one rank (a launch mistake), SYNC, 2 servers: the second,
# started mid-run, takes the rank over like a replacement (it rejoins); the first is refused
# at its next push and exits naming the mistake, instead of training on or failing later
# with "already pushed". Worker 0 and the second end at the last step with bit-identical
# replicas. Then a worker killed in step 0 and started again without --resume rejoins.
source tests/testlib.sh

dir="$WORK/duplicate"
config="$WORK/duplicate.pbtxt"
mkdir -p "$dir"
# 4096 examples / 2 workers / batch 32 = 64 steps per epoch; 12 epochs = 768 steps: the
# second worker (a second or two to start) comes well before the end.
write_config "$config" training="eval_every_epoch: false"
lengthen_with_cosine "$config" 12
total_steps=768

start_servers "$dir" "$config" 2
servers=$SERVERS
# start_worker RANK NAME: a worker of rank RANK writing NAME's events, weights and log; its
# pid goes to WORKER_PID.
start_worker() {
  "$WORKER_BIN" --config="$config" --rank="$1" --servers="$servers" \
    --dump_weights="$dir/weights.$2" > "$dir/events.$2" 2> "$dir/worker.$2.log" &
  WORKER_PID=$!
  STARTED_PIDS+=($!)
}
steps_done() { grep -c '"kind":"STEP"' "$dir/events.$1" 2>/dev/null || true; }

start_worker 0 0
first_pid=$WORKER_PID
start_worker 1 first
twin_pid=$WORKER_PID
for _ in $(seq 300); do [ "$(steps_done first)" -ge 20 ] && break; sleep 0.1; done
[ "$(steps_done first)" -ge 20 ] || fail "the first rank-1 worker did not reach step 20"
start_worker 1 second
second_pid=$WORKER_PID

if wait "$twin_pid"; then
  fail "the first rank-1 worker went on after another process took rank 1"
fi
grep -q "two workers were started with rank 1?" "$dir/worker.first.log" ||
  { tail -5 "$dir/worker.first.log" >&2; fail "the first rank-1 worker's error does not name the mistake"; }
taken_at=$(steps_done first)
[ "$taken_at" -lt "$total_steps" ] || fail "the first rank-1 worker finished before the second started"
for pid in "$first_pid" "$second_pid"; do
  wait "$pid" || { tail -n 20 "$dir"/worker.*.log >&2; fail "a worker failed"; }
done
grep -q "worker 1 rejoined at step" "$dir/worker.second.log" || fail "the second did not rejoin"
for name in 0 second; do
  grep '"kind":"DONE"' "$dir/events.$name" | grep -q "\"step\":$total_steps," ||
    fail "worker $name did not reach step $total_steps: $(grep DONE "$dir/events.$name")"
done
cmp "$dir/weights.0" "$dir/weights.second" || fail "the second's replica differs from worker 0's"
echo "the first rank-1 worker stopped after $taken_at steps; its last words:"
tail -1 "$dir/worker.first.log"

# A worker killed in step 0 (it pushed its part and waits for worker 0) and started again
# without --resume: its handshake displaces the dead process, so it rejoins instead of
# pushing step 0 again (refused "already pushed" before), and the job ends normally.
dir="$WORK/step0"
mkdir -p "$dir"
start_servers "$dir" "$config" 2
servers=$SERVERS
start_worker 1 dead
sleep 2
kill -9 "$WORKER_PID"
wait "$WORKER_PID" 2>/dev/null || true
start_worker 1 again
again_pid=$WORKER_PID
start_worker 0 0
for pid in "$again_pid" "$WORKER_PID"; do
  wait "$pid" || { tail -n 5 "$dir"/worker.*.log >&2; fail "step 0: a worker failed"; }
done
# It rejoins because it displaced the dead process, or, when worker 0 completed step 0 with
# the dead one's part first, because the run is past step 0.
grep -q "worker 1 rejoined at step" "$dir/worker.again.log" ||
  { tail -5 "$dir/worker.again.log" >&2; fail "step 0: the restarted worker did not rejoin"; }
for name in 0 again; do
  grep '"kind":"DONE"' "$dir/events.$name" | grep -q "\"step\":$total_steps," ||
    fail "step 0: worker $name did not reach step $total_steps"
done
cmp "$dir/weights.0" "$dir/weights.again" || fail "step 0: the replicas differ"
echo "step 0: $(grep -o 'worker 1: .*; rejoining' "$dir/worker.again.log" | head -1)"
echo PASS
