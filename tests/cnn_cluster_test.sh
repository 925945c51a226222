#!/usr/bin/env bash
# A tiny CNN end to end: 2 servers + 2 workers as separate processes on loopback train
# conv 3x3 4 -> pool -> conv 3x3 8 -> pool -> fc 10 (CnnCpu) for 40 steps of 32 examples,
# top-k 10% push with residual on conv2.weight and fc1.weight (the tensors of 1 KiB and
# more), the rest raw; the chunks are spread over both shards. Checks: the loss
# falls (mean of the last 10 steps < 0.6 x the first 10; measured ~0.42), test accuracy
# > 0.5 (measured ~0.7), and both workers end with bit-identical weights of the CNN's size.
source tests/testlib.sh

config="$WORK/job.pbtxt"
write_config "$config" training="max_steps: 40" compression="min_compress_bytes: 1024" \
  model="kind: CNN conv_channels: [4, 8] kernel_size: 3 init_seed: 3"
grep -q "kind: CNN" "$config" || fail "write_config ignored the model"
run_processes "$WORK/cnn" "$config"
# conv1 4x1x3x3 + 4, conv2 8x4x3x3 + 8, fc1 10x(8*7*7) + 10 floats.
floats=$(( 36 + 4 + 288 + 8 + 10 * 392 + 10 ))
[ "$(stat -c %s "$WORK/cnn/weights0")" -eq $(( floats * 4 )) ] || fail "weights size"

losses=$(step_losses "$WORK/cnn/events0")
steps=$(echo "$losses" | wc -l)
[ "$steps" -eq 40 ] || fail "expected 40 steps, got $steps"
first=$(echo "$losses" | mean_first 10)
last=$(echo "$losses" | mean_last 10)
echo "loss: first 10 steps $first, last 10 steps $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.6 * a) }' || fail "loss did not fall enough"
accuracy=$(final_accuracy "$WORK/cnn/events0")
echo "test accuracy after 40 steps: $accuracy"
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.5) }' || fail "test accuracy $accuracy"
echo PASS
