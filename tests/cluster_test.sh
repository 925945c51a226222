#!/usr/bin/env bash
# 2 servers + 2 workers as separate processes on loopback: the loss falls and both workers
# end with bit-identical weights.
source tests/testlib.sh

config="$WORK/job.pbtxt"
write_config "$config"
pids=()
cleanup() { for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

for rank in 0 1; do
  "$SERVER_BIN" --config="$config" --rank=$rank --port=0 --port_file="$WORK/port$rank" \
    2> "$WORK/server$rank.log" &
  pids+=($!)
done
for rank in 0 1; do
  for _ in $(seq 100); do [ -s "$WORK/port$rank" ] && break; sleep 0.1; done
  [ -s "$WORK/port$rank" ] || { cat "$WORK/server$rank.log" >&2; fail "server $rank did not start"; }
done
servers="127.0.0.1:$(cat "$WORK/port0"),127.0.0.1:$(cat "$WORK/port1")"

worker_pids=()
for rank in 0 1; do
  "$WORKER_BIN" --config="$config" --rank=$rank --servers="$servers" \
    --dump_weights="$WORK/weights$rank" > "$WORK/events$rank" 2> "$WORK/worker$rank.log" &
  worker_pids+=($!)
  pids+=($!)
done
for rank in 0 1; do
  wait "${worker_pids[$rank]}" || { cat "$WORK/worker$rank.log" >&2; fail "worker $rank failed"; }
done

# Both replicas applied identical bytes from identical starting weights.
[ -s "$WORK/weights0" ] || fail "worker 0 wrote no weights"
cmp "$WORK/weights0" "$WORK/weights1" || fail "worker replicas differ"
# 784*64 + 64 + 64*10 + 10 floats.
[ "$(stat -c %s "$WORK/weights0")" -eq $(( (784*64 + 64 + 640 + 10) * 4 )) ] || fail "weights size"

# Mean loss of the first 10 steps vs the last 10 (2 epochs of 64 steps on each worker).
losses=$(grep '"kind":"STEP"' "$WORK/events0" | grep -o '"loss":[-0-9.e+]*' | cut -d: -f2)
steps=$(echo "$losses" | wc -l)
[ "$steps" -eq 128 ] || fail "expected 128 steps, got $steps"
first=$(echo "$losses" | mean_first 10)
last=$(echo "$losses" | mean_last 10)
echo "loss: first 10 steps $first, last 10 steps $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.6 * a) }' || fail "loss did not fall enough"
accuracy=$(grep '"kind":"DONE"' "$WORK/events0" | grep -o '"testAccuracy":[0-9.e+-]*' | cut -d: -f2)
echo "test accuracy after 2 epochs: $accuracy"
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.6) }' || fail "test accuracy $accuracy"
echo PASS
