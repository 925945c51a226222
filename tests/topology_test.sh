#!/usr/bin/env bash
# `tamp run` on three topologies — 1 server x 1 worker, 2 x 2, and 3 servers x 2 workers
# with a different codec on each shard — each 40 steps of the small MLP: the run succeeds,
# the loss falls, and --metrics_file has one line per step per worker whose per-shard byte
# counts (one per shard, every shard used) add up to the line's totals and, over the run,
# to the summary's bytes_pushed / bytes_pulled.
source tests/testlib.sh

STEPS=40

# run_topology NAME SERVERS WORKERS [write_config assignments...]
run_topology() {
  local name=$1 servers=$2 workers=$3; shift 3
  local config="$WORK/$name.pbtxt" metrics="$WORK/$name.metrics" summary="$WORK/$name.json"
  write_config "$config" servers="$servers" workers="$workers" \
    training="max_steps: $STEPS" "$@"
  "$TAMP_BIN" run "$config" --metrics_file="$metrics" --summary_json="$summary" \
    --run_dir="$WORK/run-$name" --server_binary="$SERVER_BIN" --worker_binary="$WORKER_BIN" \
    > "$WORK/$name.out" 2>&1 || { cat "$WORK/$name.out" >&2; fail "$name: tamp run failed"; }
  expect_no_leftover_processes

  # The launcher showed each shard's load once.
  for ((s = 0; s < servers; s++)); do
    [ "$(grep -c "^tamp: shard $s: [0-9]* chunks\?, " "$WORK/$name.out")" -eq 1 ] ||
      { cat "$WORK/$name.out" >&2; fail "$name: shard $s load not shown once"; }
  done

  # One metrics line per step per worker, besides worker 0's evaluation lines (the only
  # ones with a test_accuracy), which the step checks below must not see.
  local lines
  grep -v '"test_accuracy"' "$metrics" > "$metrics.steps"
  mv "$metrics.steps" "$metrics"
  lines=$(wc -l < "$metrics")
  [ "$lines" -eq $((STEPS * workers)) ] || fail "$name: $lines metrics lines, expected $((STEPS * workers))"
  for ((w = 0; w < workers; w++)); do
    [ "$(grep -c "^{\"format_version\":2,\"worker\":$w,\"step\":" "$metrics")" -eq "$STEPS" ] ||
      fail "$name: worker $w does not have $STEPS metrics lines"
  done
  # Per line: SERVERS per-shard counts, all > 0, summing to the line's bytes; then run totals.
  local totals
  totals=$(awk -v servers="$servers" -v name="$name" '
    function field(key,   m) {
      if (!match($0, "\"" key "\":[^,}]*")) { print name ": no " key > "/dev/stderr"; exit 1 }
      return substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
    }
    function check_shards(key, total,   m, n, parts, sum, i) {
      if (!match($0, "\"" key "\":\\[[0-9,]*\\]")) { print name ": no " key > "/dev/stderr"; exit 1 }
      n = split(substr($0, RSTART + length(key) + 4, RLENGTH - length(key) - 5), parts, ",")
      if (n != servers) { print name ": " key " has " n " shards: " $0 > "/dev/stderr"; exit 1 }
      sum = 0
      for (i = 1; i <= n; i++) {
        if (parts[i] <= 0) { print name ": shard " i - 1 " got no bytes: " $0 > "/dev/stderr"; exit 1 }
        sum += parts[i]
      }
      if (sum != total) { print name ": " key " sum " sum " != " total ": " $0 > "/dev/stderr"; exit 1 }
    }
    {
      pushed = field("bytes_pushed"); pulled = field("bytes_pulled")
      check_shards("shard_bytes_pushed", pushed); check_shards("shard_bytes_pulled", pulled)
      all_pushed += pushed; all_pulled += pulled
    }
    END { printf "%d %d\n", all_pushed, all_pulled }' "$metrics") || fail "$name: bad metrics lines"
  local summary_pushed summary_pulled
  summary_pushed=$(grep -oE '"bytes_pushed":[0-9]+' "$summary" | grep -oE '[0-9]+$')
  summary_pulled=$(grep -oE '"bytes_pulled":[0-9]+' "$summary" | grep -oE '[0-9]+$')
  [ "$totals" = "$summary_pushed $summary_pulled" ] ||
    fail "$name: metrics total bytes '$totals' != summary '$summary_pushed $summary_pulled'"
  # Every line has the time split.
  for key in compute_ms encode_ms wire_ms decode_ms apply_ms comm_hidden_percent; do
    [ "$(grep -c "\"$key\":[0-9.e+-]*[,}]" "$metrics")" -eq "$lines" ] || fail "$name: lines lack $key"
    grep -q "\"${key}_median\"" "$summary" || fail "$name: summary lacks ${key}_median"
  done

  # Worker 0's mean loss over the first 5 steps vs the last 10.
  local first last
  local losses
  losses=$(grep '^{"format_version":2,"worker":0,' "$metrics" | grep -o '"loss":[-0-9.e+]*' | cut -d: -f2)
  first=$(echo "$losses" | mean_first 5)
  last=$(echo "$losses" | mean_last 10)
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' ||
    fail "$name: loss did not fall (first 5 steps $first, last 10 steps $last)"
  echo "ok: $name (${servers}x${workers}): loss $first -> $last, bytes pushed/pulled $totals"
  echo "    $(grep '^tamp: done:' "$WORK/$name.out")"
}

run_topology one 1 1
run_topology two 2 2
# Shard 0 keeps the default (top-k 10% + residual); shard 1 QSGD; shard 2 scaled sign with
# residual.
run_topology mixed 3 2 compression='
  shard_overrides { shards: [1] compression { push { name: "qsgd" levels: 127 bucket_size: 512 } } }
  shard_overrides { shards: [2] compression { push { name: "efsign" } push_feedback { kind: RESIDUAL } } }'
# Compressed overall.
ratio=$(grep -oE '"compression_ratio": *[0-9.e+]+' "$WORK/mixed.json" | grep -oE '[0-9.e+]+$')
awk -v r="$ratio" 'BEGIN { exit !(r > 1) }' || fail "mixed: compression_ratio $ratio"
echo PASS
