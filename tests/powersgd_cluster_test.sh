#!/usr/bin/env bash
# PowerSGD end to end: 2 servers + 2 workers as separate processes on loopback, every tensor
# pushed with powersgd rank 2 and residual error feedback, so every chunk of every step
# takes two rounds (P, then Q) through the real gRPC service. Two layouts:
#   chunked  partition_bytes 16384 (testlib's): fc1.weight [64, 784] splits into 13 chunks
#            of ~3860 values (partial rows of 784, zero-padded to 5-6 rows), spread over
#            both shards; thin matrices, so little compression.
#   whole    partition_bytes 4 MiB: every tensor is one chunk, fc1.weight the full 64 x 784
#            matrix as in the paper.
# Biases are vectors (near-square views); fc2.weight [10, 64] is one 10 x 64 chunk in both.
# Each run checks: the loss falls (mean of the last 10 steps < 0.6 x the first 10), test
# accuracy > 0.6 after 2 epochs, both workers end with bit-identical weights, and fewer
# bytes are pushed than raw fp32 would take. Prints the loss figures and the push
# compression ratio.
source tests/testlib.sh

# run_job NAME PARTITION_BYTES
run_job() {
  local name=$1 partition_bytes=$2
  local dir="$WORK/$name"
  mkdir -p "$dir"
  local config="$dir/job.pbtxt"
  write_config "$config" compression='tensor_overrides {
      pattern: "*"
      compression { push { name: "powersgd" rank: 2 } push_feedback { kind: RESIDUAL } }
    }'
  sed -i "s/^  partition_bytes: 16384$/  partition_bytes: $partition_bytes/" "$config"
  grep -q "partition_bytes: $partition_bytes\$" "$config" || fail "no partition_bytes line to replace"

  run_processes "$dir" "$config"

  local losses steps first last
  losses=$(step_losses "$dir/events0")
  steps=$(echo "$losses" | wc -l)
  [ "$steps" -eq 128 ] || fail "$name: expected 128 steps, got $steps"
  first=$(echo "$losses" | mean_first 10)
  last=$(echo "$losses" | mean_last 10)
  echo "$name: powersgd rank 2: loss first 10 steps $first, last 10 steps $last"
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.6 * a) }' || fail "$name: loss did not fall enough"

  local done_line accuracy pushed raw
  done_line=$(grep '"kind":"DONE"' "$dir/events0")
  number() { echo "$done_line" | grep -oE "\"$1\":[0-9.e+-]+" | grep -oE '[0-9.e+-]+$' || echo 0; }
  accuracy=$(number test_accuracy)
  pushed=$(number bytes_pushed)
  raw=$(number raw_bytes_pushed)
  echo "$name: test accuracy after 2 epochs: $accuracy"
  [ "$(number epoch)" = 1 ] || fail "$name: DONE says epoch $(number epoch), its last step's is 1"
  awk -v a="$accuracy" 'BEGIN { exit !(a > 0.6) }' || fail "$name: test accuracy $accuracy"
  echo "$name: bytes pushed by worker 0: $pushed (raw fp32: $raw)"
  awk -v p="$pushed" -v r="$raw" -v n="$name" \
    'BEGIN { printf "%s: push compression ratio: %.2f\n", n, r / p; exit !(p > 0 && p < r) }' ||
    fail "$name: powersgd pushed $pushed bytes, raw fp32 is $raw"
}

run_job chunked 16384
run_job whole 4194304
echo PASS
