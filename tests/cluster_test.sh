#!/usr/bin/env bash
# 2 servers + 2 workers as separate processes on loopback: the loss falls and both workers
# end with bit-identical weights; then the same with a lossy pull codec (top-k 25% with the
# server's residual) and exact-weight resyncs every 8 steps.
source tests/testlib.sh

pids=()
cleanup() { for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# run_job NAME [write_config assignments...]: trains NAME's config to the end and checks it.
run_job() {
  local name=$1; shift
  local dir="$WORK/$name" config="$WORK/$name.pbtxt"
  mkdir -p "$dir"
  write_config "$config" "$@"
  for rank in 0 1; do
    "$SERVER_BIN" --config="$config" --rank=$rank --port=0 --port_file="$dir/port$rank" \
      2> "$dir/server$rank.log" &
    pids+=($!)
  done
  for rank in 0 1; do
    for _ in $(seq 100); do [ -s "$dir/port$rank" ] && break; sleep 0.1; done
    [ -s "$dir/port$rank" ] || { cat "$dir/server$rank.log" >&2; fail "$name: server $rank did not start"; }
  done
  local servers="127.0.0.1:$(cat "$dir/port0"),127.0.0.1:$(cat "$dir/port1")"

  local worker_pids=()
  for rank in 0 1; do
    "$WORKER_BIN" --config="$config" --rank=$rank --servers="$servers" \
      --dump_weights="$dir/weights$rank" > "$dir/events$rank" 2> "$dir/worker$rank.log" &
    worker_pids+=($!)
    pids+=($!)
  done
  for rank in 0 1; do
    wait "${worker_pids[$rank]}" || { cat "$dir/worker$rank.log" >&2; fail "$name: worker $rank failed"; }
  done

  # Both replicas applied identical bytes from identical starting weights.
  [ -s "$dir/weights0" ] || fail "$name: worker 0 wrote no weights"
  cmp "$dir/weights0" "$dir/weights1" || fail "$name: worker replicas differ"
  # 784*64 + 64 + 64*10 + 10 floats.
  [ "$(stat -c %s "$dir/weights0")" -eq $(( (784*64 + 64 + 640 + 10) * 4 )) ] || fail "$name: weights size"

  # Mean loss of the first 10 steps vs the last 10 (2 epochs of 64 steps on each worker).
  local losses steps first last accuracy
  losses=$(grep '"kind":"STEP"' "$dir/events0" | grep -o '"loss":[-0-9.e+]*' | cut -d: -f2)
  steps=$(echo "$losses" | wc -l)
  [ "$steps" -eq 128 ] || fail "$name: expected 128 steps, got $steps"
  first=$(echo "$losses" | mean_first 10)
  last=$(echo "$losses" | mean_last 10)
  echo "$name: loss first 10 steps $first, last 10 steps $last"
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.6 * a) }' || fail "$name: loss did not fall enough"
  accuracy=$(grep '"kind":"DONE"' "$dir/events0" | grep -o '"testAccuracy":[0-9.e+-]*' | cut -d: -f2)
  echo "$name: test accuracy after 2 epochs: $accuracy"
  awk -v a="$accuracy" 'BEGIN { exit !(a > 0.6) }' || fail "$name: test accuracy $accuracy"
}

run_job raw_pull
run_job lossy_pull_resync training="resync_steps: 8" compression='
  shard_overrides {
    shards: [0, 1]
    compression {
      push { name: "topk" ratio: 0.1 } push_feedback { kind: RESIDUAL }
      pull { name: "topk" ratio: 0.25 } pull_feedback { kind: RESIDUAL }
    }
  }'
echo PASS
