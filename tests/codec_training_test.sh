#!/usr/bin/env bash
# Every codec the registry holds trains end to end. For each codec `tamp codecs` lists, the
# small test job (testlib.sh write_config: MLP 784-64-10 on 4096 examples, 2 servers,
# 2 workers) runs MAX_STEPS steps through `tamp run`, with that codec's example spec as the
# push codec of every tensor (residual error feedback), and must
#   - succeed, with MAX_STEPS STEP events from worker 0,
#   - have a finite loss on every step that falls: mean of the last 10 < mean of the first
#     10, and below ln(10) = 2.303, the loss of guessing among the 10 classes,
#   - report summary.compression_ratio > 1; >= 1.9 for the 16-bit codecs fp16 and bf16;
#     none (raw fp32 plus headers) must be in (0.95, 1].
# It prints one line per codec: codec, ratio, mean loss of the first and last 10 steps, test
# accuracy, seconds.
#
# The codec list and the example specs come from the "In a config" section of `tamp codecs`
# (compress/registry.cc's `example` rows), so a codec added to the registry is covered
# without touching this test.
#
# Optimizer: SGD with lr 0.01 and momentum 0.5 instead of write_config's lr 0.05 with
# momentum 0.9. With 1%-sparse codecs (topk, dgc, randomk, randomblock) the residual
# releases accumulated gradient in bursts, and server momentum 0.9 at lr 0.05 turns those
# into divergence within 60 steps (DGC's momentum correction exists for this); sign codecs
# move every weight by lr per step whatever the gradient's size. One moderate setting
# lets every codec family train from the same config.
#
# Per-step losses: `tamp run` keeps only the summary, so the workers are started through a
# wrapper (--worker_binary) that runs the real tamp_worker and tees its event lines to a
# file. Runtime: about 1-5 s per codec on 2 cores.
source tests/testlib.sh

MAX_STEPS=${CODEC_TRAINING_STEPS:-60}
OPTIMIZER="learning_rate: 0.01 momentum: 0.5"

# "name: \"topk\" ratio: 0.01" lines, one per codec, in registry order.
specs=$("$TAMP_BIN" codecs | sed -n '/^In a config/,$ s/^  push { \(.*\) }$/\1/p')
[ -n "$specs" ] || { "$TAMP_BIN" codecs >&2; fail "no example specs in \`tamp codecs\` output"; }

wrapper="$WORK/worker_tee.sh"
cat > "$wrapper" <<WRAPPER
#!/usr/bin/env bash
rank=0
for arg in "\$@"; do case "\$arg" in --rank=*) rank="\${arg#--rank=}" ;; esac; done
"$WORKER_BIN" "\$@" | tee "\$EVENTS_DIR/events\$rank"
exit "\${PIPESTATUS[0]}"
WRAPPER
chmod +x "$wrapper"

# summary_number FIELD: a number field of $summary (every field is there, as a JSON number).
summary_number() {
  echo "$summary" | grep -oE "\"$1\":[-0-9.eE+]+" | grep -oE '[-0-9.eE+]+$' || true
}

failures=()
printf '%-12s %8s %10s %10s %9s %7s\n' codec ratio first10 last10 accuracy seconds
while IFS= read -r spec; do
  name=$(echo "$spec" | sed -n 's/.*name: "\([^"]*\)".*/\1/p')
  [ -n "$name" ] || fail "cannot read the codec name in '$spec'"
  dir="$WORK/$name"
  mkdir -p "$dir"
  override="push { $spec } push_feedback { kind: RESIDUAL }"
  write_config "$dir/job.pbtxt" training="max_steps: $MAX_STEPS" \
    compression="tensor_overrides { pattern: \"*\" compression { $override } }"
  sed -i "s/^optimizer {.*}$/optimizer { $OPTIMIZER }/" "$dir/job.pbtxt"
  grep -qF "optimizer { $OPTIMIZER }" "$dir/job.pbtxt" ||
    fail "write_config wrote no optimizer line to replace"
  start=$(date +%s.%N)
  if ! EVENTS_DIR="$dir" "$TAMP_BIN" run "$dir/job.pbtxt" --summary_json="$dir/summary.json" \
      --run_dir="$dir/run" --server_binary="$SERVER_BIN" --worker_binary="$wrapper" \
      > "$dir/out" 2>&1; then
    tail -20 "$dir/out" >&2
    failures+=("$name: tamp run failed")
    printf '%-12s run failed\n' "$name"
    expect_no_leftover_processes
    continue
  fi
  seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
  summary=$(cat "$dir/summary.json")
  ratio=$(summary_number compression_ratio)
  accuracy=$(summary_number test_accuracy)
  losses=$(grep '"kind":"STEP"' "$dir/events0" | grep -o '"loss":[^,}]*' | cut -d: -f2 | tr -d '"')
  steps=$(echo "$losses" | grep -c . || true)
  if [ "$steps" -lt 10 ]; then
    failures+=("$name: $steps STEP events with a loss, expected $MAX_STEPS")
    continue
  fi
  first=$(echo "$losses" | mean_first 10)
  last=$(echo "$losses" | mean_last 10)
  printf '%-12s %8.2f %10s %10s %9s %7s\n' "$name" "$ratio" "$first" "$last" "$accuracy" "$seconds"

  [ "$steps" -eq "$MAX_STEPS" ] || failures+=("$name: $steps STEP events, expected $MAX_STEPS")
  # Every loss a finite number (NaN/Infinity arrive as JSON strings, or as nan/inf).
  echo "$losses" |
    awk '!($1 ~ /^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/) { bad = 1 } END { exit bad }' ||
    failures+=("$name: non-finite loss")
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a && b < log(10)) }' ||
    failures+=("$name: loss did not fall below the first steps' and ln(10) ($first -> $last)")
  case "$name" in
    none) ratio_ok='r > 0.95 && r <= 1'; want='in (0.95, 1]' ;;  # raw fp32 plus headers
    fp16|bf16) ratio_ok='r >= 1.9'; want='>= 1.9' ;;          # 2x less the headers
    *) ratio_ok='r > 1'; want='> 1' ;;
  esac
  awk -v r="$ratio" "BEGIN { exit !($ratio_ok) }" ||
    failures+=("$name: compression_ratio $ratio, want $want")
  expect_no_leftover_processes
done <<< "$specs"

if [ ${#failures[@]} -ne 0 ]; then
  printf 'FAIL: %s\n' "${failures[@]}" >&2
  exit 1
fi
echo PASS
