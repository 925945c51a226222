#!/usr/bin/env bash
# 2 servers + 2 workers as separate processes on loopback: the loss falls and both workers
# end with bit-identical weights; then the same with a lossy pull codec (top-k 25% with the
# server's residual) and exact-weight resyncs every 8 steps; with servers that only average
# (AGGREGATE: each worker steps the config's optimizer); and test evaluations every few
# steps leave the trained weights unchanged.
source tests/testlib.sh

# run_job NAME [write_config assignments...]: trains NAME's config to the end and checks it.
run_job() {
  local name=$1; shift
  local dir="$WORK/$name" config="$WORK/$name.pbtxt"
  write_config "$config" "$@"
  run_processes "$dir" "$config"
  # 784*64 + 64 + 64*10 + 10 floats.
  [ "$(stat -c %s "$dir/weights0")" -eq $(( (784*64 + 64 + 640 + 10) * 4 )) ] || fail "$name: weights size"

  # Mean loss of the first 10 steps vs the last 10 (2 epochs of 64 steps on each worker).
  local losses steps first last accuracy
  losses=$(step_losses "$dir/events0")
  steps=$(echo "$losses" | wc -l)
  [ "$steps" -eq 128 ] || fail "$name: expected 128 steps, got $steps"
  first=$(echo "$losses" | mean_first 10)
  last=$(echo "$losses" | mean_last 10)
  echo "$name: loss first 10 steps $first, last 10 steps $last"
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.6 * a) }' || fail "$name: loss did not fall enough"
  accuracy=$(final_accuracy "$dir/events0")
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

# server { mode: AGGREGATE }: the servers answer the mean gradient and each tamp_worker steps
# it with the config's optimizer (SGD, momentum 0.9): the training raw_pull's servers do, to
# fp32 rounding (there w + (w' - w) from the servers' w', here w'), so the losses agree
# closely step by step; a worker that took the answer for its weights diverged at once.
write_config "$WORK/aggregate.pbtxt"
echo "server { mode: AGGREGATE }" >> "$WORK/aggregate.pbtxt"
run_processes "$WORK/aggregate" "$WORK/aggregate.pbtxt"
paste <(step_losses "$WORK/raw_pull/events0") <(step_losses "$WORK/aggregate/events0") |
  head -40 | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-3 * $1) { print "step " NR ": " $1 " vs " $2; bad = 1 } }
                  END { exit bad }' || fail "aggregate: losses differ from raw_pull's"
accuracy=$(final_accuracy "$WORK/aggregate/events0")
echo "aggregate: test accuracy $accuracy (raw_pull $(final_accuracy "$WORK/raw_pull/events0"))"
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.6) }' || fail "aggregate: test accuracy $accuracy"

# Test evaluations every 7 steps (training.eval_every_steps) change no weight: worker 0
# evaluates between steps and on its own buffers.
write_config "$WORK/eval_steps.pbtxt" training="eval_every_steps: 7"
run_processes "$WORK/eval_steps" "$WORK/eval_steps.pbtxt"
# 128 steps: 7, 14, ..., 126 (18), and the ends of the 2 epochs (64, 128).
evals=$(grep -c '"kind":"EVAL"' "$WORK/eval_steps/events0")
[ "$evals" -eq 20 ] || fail "eval_every_steps: 7: $evals evaluations, expected 20"
cmp "$WORK/raw_pull/weights0" "$WORK/eval_steps/weights0" ||
  fail "evaluating every 7 steps changed the trained weights"
echo "eval_steps: $evals evaluations, weights identical to raw_pull's"
echo PASS
