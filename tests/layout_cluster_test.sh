#!/usr/bin/env bash
# model.kind LAYOUT end to end: a tiny layout file (w 64x32, b 64, head 10x64, head_b 10)
# with a profile of 6 ms a step (3 ms as written, scale 2), 2 servers + 2 workers, 12 steps,
# top-k 10% with residual where a chunk holds >= 1 KiB. Checks, with tamp_worker directly:
# both replicas end bit-identical with the layout's size and non-zero biases (which start
# at zero, so the synthetic gradients are not zeros); every step took at least the profile's
# time. With `tamp run`: the summary says synthetic and prints no accuracy.
source tests/testlib.sh

cat > "$WORK/tiny.layout" <<'LAYOUT'
tamp-layout 1
# name dimensions...
w 64 32
b 64
head 10 64
head_b 10
LAYOUT
cat > "$WORK/tiny.profile" <<'PROFILE'
tamp-profile 1
scale 2
layer 0.5 1.0 w b
layer 0.5 1.0 head*
PROFILE
config="$WORK/job.pbtxt"
write_config "$config" training="max_steps: 12 epochs: 1" \
  compression="min_compress_bytes: 1024" \
  model="kind: LAYOUT layout_file: \"tiny.layout\" profile_file: \"tiny.profile\" init_seed: 3"
sed -i 's/epochs: 2 //' "$config"  # LAYOUT runs one epoch.

run_processes "$WORK/layout" "$config"
floats=$(( 64 * 32 + 64 + 640 + 10 ))
[ "$(stat -c %s "$WORK/layout/weights0")" -eq $(( floats * 4 )) ] || fail "weights size"
nonzero_biases=$(od -An -v -f -j $(( 64 * 32 * 4 )) -N $(( 64 * 4 )) "$WORK/layout/weights0" |
  tr -s ' ' '\n' | grep -cv '^-\?0*\(\.0*\)\?$' || true)
echo "non-zero entries of b after 12 steps: $nonzero_biases of 64"
[ "$nonzero_biases" -ge 32 ] || fail "the biases barely moved: zero gradients?"
steps=$(grep -c '"kind":"STEP"' "$WORK/layout/events0")
[ "$steps" -eq 12 ] || fail "expected 12 steps, got $steps"
grep '"kind":"STEP"' "$WORK/layout/events0" | grep -o '"step_ms":[0-9.e+-]*' | cut -d: -f2 |
  awk '$1 < 6 { bad++ } END { exit bad > 0 }' || fail "a step took less than the profile's 6 ms"
grep -q '"kind":"EVAL"' "$WORK/layout/events0" && fail "a LAYOUT worker evaluated"
grep '"kind":"DONE"' "$WORK/layout/events0" | grep -q '"synthetic":true' ||
  fail "DONE does not say synthetic"

"$TAMP_BIN" run "$config" --summary_json="$WORK/summary.json" --run_dir="$WORK/run" \
  --server_binary="$SERVER_BIN" --worker_binary="$WORKER_BIN" > "$WORK/run.out" 2>&1 ||
  { cat "$WORK/run.out" >&2; fail "tamp run failed"; }
cat "$WORK/run.out"
grep -q "done: no test accuracy (model.kind LAYOUT: synthetic gradients), 12 steps" \
  "$WORK/run.out" || fail "the summary line does not say there is no accuracy"
grep -q '"synthetic":true' "$WORK/summary.json" || fail "summary.json does not say synthetic"
grep -q "test accuracy [0-9]" "$WORK/run.out" && fail "printed a test accuracy"

# A bad profile is refused at load, naming the file and the line.
printf 'tamp-profile 1\nscale 1\nlayer 1 x w b head*\n' > "$WORK/bad.profile"
sed 's/tiny.profile/bad.profile/' "$config" > "$WORK/bad.pbtxt"
if "$WORKER_BIN" --config="$WORK/bad.pbtxt" --rank=0 --servers=127.0.0.1:1 \
    > /dev/null 2> "$WORK/bad.log"; then
  fail "a bad profile was accepted"
fi
grep -q "bad.profile:3: layer: backward ms 'x' is not a number" "$WORK/bad.log" ||
  { cat "$WORK/bad.log" >&2; fail "the refusal does not name the file's line"; }
echo PASS
