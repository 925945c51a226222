#!/usr/bin/env bash
# `tamp run` end to end: a short job writes a complete summary; bad input (a config typo, an
# unknown codec, a server address that does not answer, a missing data file) ends the run
# with an error naming the problem, and no process is left running in any case.
source tests/testlib.sh

# expect_failure NAME CONFIG NEEDLE: `tamp run CONFIG` must fail and print NEEDLE.
expect_failure() {
  local name=$1 config=$2 needle=$3
  local out="$WORK/$name.out"
  if "$TAMP_BIN" run "$config" --run_dir="$WORK/run-$name" --server_binary="$SERVER_BIN" \
      --worker_binary="$WORKER_BIN" > "$out" 2>&1; then
    cat "$out" >&2
    fail "$name: tamp run succeeded"
  fi
  grep -qF -- "$needle" "$out" || { cat "$out" >&2; fail "$name: output lacks '$needle'"; }
  expect_no_leftover_processes
  echo "ok: $name -> $(grep -m1 -F -- "$needle" "$out")"
}

# 0. Help asked for is no failure: the usage on stdout, exit 0; a wrong command exits 2.
for asked in "help" "--help" "run --help" "model -h"; do
  # shellcheck disable=SC2086  # Word-split on purpose: "run --help" is two arguments.
  "$TAMP_BIN" $asked > "$WORK/help.out" 2> "$WORK/help.err" || fail "tamp $asked exited $?"
  grep -q "^usage: tamp" "$WORK/help.out" || { cat "$WORK/help.out" >&2; fail "tamp $asked: no usage"; }
done
status=0; "$TAMP_BIN" nonsense > /dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "tamp nonsense exited $status, expected 2"
# The binaries' --help lists their own flags (Abseil's default matched none of them) on
# stdout and exits 0 (Abseil's exits 1).
for binary in "$SERVER_BIN" "$WORKER_BIN"; do
  status=0; "$binary" --help > "$WORK/help.out" 2> "$WORK/help.err" || status=$?
  [ "$status" -eq 0 ] || { cat "$WORK/help.err" >&2; fail "$(basename "$binary") --help exited $status"; }
  grep -q -- "--config (" "$WORK/help.out" && grep -q -- "--placement (" "$WORK/help.out" ||
    { cat "$WORK/help.out" >&2; fail "$binary --help lists no flags"; }
done

# 1. A short good run with a summary, and test accuracy every 15 steps in the metrics file.
config="$WORK/good.pbtxt"
write_config "$config" training="max_steps: 40 eval_every_steps: 15"
"$TAMP_BIN" run "$config" --summary_json="$WORK/summary.json" --run_dir="$WORK/run-good" \
  --metrics_file="$WORK/metrics.jsonl" --server_binary="$SERVER_BIN" \
  --worker_binary="$WORKER_BIN" > "$WORK/good.out" 2>&1 ||
  { cat "$WORK/good.out" >&2; fail "good run failed"; }
expect_no_leftover_processes
# Steps 15 and 30, then the last step (40; no epoch ends before it), by worker 0 only.
eval_steps=$(grep '"test_accuracy"' "$WORK/metrics.jsonl" | grep '^{"format_version":2,"worker":0,' |
  grep -oE '"step":[0-9]+' | cut -d: -f2 | tr '\n' ' ')
[ "$eval_steps" = "15 30 40 " ] || fail "evaluated at steps '$eval_steps', expected '15 30 40 '"
[ "$(grep -vc '"test_accuracy"' "$WORK/metrics.jsonl")" -eq 80 ] ||
  fail "metrics: not 80 step lines"
summary=$(cat "$WORK/summary.json")
echo "summary: $summary"
for field in test_accuracy steps epochs wall_seconds step_ms_median bytes_pushed bytes_pulled \
    compression_ratio; do
  echo "$summary" | grep -q "\"$field\"" || fail "summary lacks $field"
done
# One JSON style (base/proto_json.h): versioned, snake_case, integers as numbers.
echo "$summary" | grep -q '^{"format_version":2,' || fail "summary lacks format_version 2 first"
echo "$summary" | grep -q '"steps":40,' || fail "summary steps != 40 (as a JSON number)"
ratio=$(echo "$summary" | grep -oE '"compression_ratio":[0-9.e+]+' | grep -oE '[0-9.e+]+$')
# top-k 10% with packed 16-bit indices: about 10 / (1 + 16/32) ~ 6.7x on compressed chunks.
awk -v r="$ratio" 'BEGIN { exit !(r > 3 && r < 10) }' || fail "compression_ratio $ratio"

# 1b. Again on the same --run_dir (as a resumed run is started): the first run's logs and
# events are kept in earlier-1, not overwritten.
"$TAMP_BIN" run "$config" --run_dir="$WORK/run-good" --server_binary="$SERVER_BIN" \
  --worker_binary="$WORKER_BIN" > "$WORK/again.out" 2>&1 ||
  { cat "$WORK/again.out" >&2; fail "the run again on its run_dir failed"; }
grep -qF "an earlier run's logs and events moved to $WORK/run-good/earlier-1" "$WORK/again.out" ||
  { cat "$WORK/again.out" >&2; fail "the second run did not say where the first's logs went"; }
for name in server-0.log server-1.log worker-0.log worker-1.log worker-0.events; do
  [ -e "$WORK/run-good/earlier-1/$name" ] || fail "earlier-1/$name missing"
  [ -e "$WORK/run-good/$name" ] || fail "the second run wrote no $name"
done
[ "$(grep -c '"kind":"DONE"' "$WORK/run-good/earlier-1/worker-0.events")" -eq 1 ] &&
  [ "$(grep -c '"kind":"DONE"' "$WORK/run-good/worker-0.events")" -eq 1 ] ||
  fail "each run's events should hold its own DONE"

# 1e. --summary_json in a directory not made yet: made; a directory itself: refused (exit 2)
# before anything starts, where the summary was lost after the whole run.
"$TAMP_BIN" run "$config" --summary_json="$WORK/new/dir/summary.json" --run_dir="$WORK/run-new" \
  --server_binary="$SERVER_BIN" --worker_binary="$WORKER_BIN" > "$WORK/new.out" 2>&1 ||
  { cat "$WORK/new.out" >&2; fail "summary in a new directory: the run failed"; }
[ -s "$WORK/new/dir/summary.json" ] || fail "summary in a new directory: not written"
status=0
"$TAMP_BIN" run "$config" --summary_json="$WORK/new" --run_dir="$WORK/run-dir-summary" \
  --server_binary="$SERVER_BIN" --worker_binary="$WORKER_BIN" > "$WORK/dir.out" 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -qF -- "--summary_json: $WORK/new is a directory, not a file" "$WORK/dir.out" ||
  { cat "$WORK/dir.out" >&2; fail "summary as a directory: exit $status"; }
[ ! -e "$WORK/run-dir-summary/server-0.log" ] || fail "summary as a directory: a server started"
# An AGGREGATE config without an optimizer cannot run the built-in trainer: refused (exit 2)
# before anything starts.
grep -v "^optimizer" "$config" > "$WORK/no_optimizer.pbtxt"
echo "server { mode: AGGREGATE }" >> "$WORK/no_optimizer.pbtxt"
status=0
"$TAMP_BIN" run "$WORK/no_optimizer.pbtxt" --run_dir="$WORK/run-no-optimizer" \
  --server_binary="$SERVER_BIN" --worker_binary="$WORKER_BIN" > "$WORK/no_optimizer.out" 2>&1 ||
  status=$?
[ "$status" -eq 2 ] && grep -qF "optimizer: missing: with server.mode AGGREGATE" \
  "$WORK/no_optimizer.out" || { cat "$WORK/no_optimizer.out" >&2; fail "no optimizer: exit $status"; }
[ ! -e "$WORK/run-no-optimizer/server-0.log" ] || fail "no optimizer: a server started"

# 1f. A run_dir another run holds (its lock taken here with flock(1)) is refused (exit 2)
# before anything starts: two runs would mix their logs, events and checkpoints.
status=0
flock "$WORK/run-good/.tamp-run.lock" "$TAMP_BIN" run "$config" --run_dir="$WORK/run-good" \
  --server_binary="$SERVER_BIN" --worker_binary="$WORKER_BIN" > "$WORK/locked.out" 2>&1 ||
  status=$?
[ "$status" -eq 2 ] && grep -qF "$WORK/run-good is in use by another tamp run" "$WORK/locked.out" ||
  { cat "$WORK/locked.out" >&2; fail "a locked run_dir: exit $status"; }

# 1d. A run resumed from its checkpoints goes on at the checkpoint's step, none skipped: 30
# steps checkpointed, then the run lengthened to 60 on the same run_dir trains steps 31..60.
write_config "$WORK/resume.pbtxt" training="max_steps: 30"
echo "checkpoint { every_steps: 10 }" >> "$WORK/resume.pbtxt"
"$TAMP_BIN" run "$WORK/resume.pbtxt" --run_dir="$WORK/run-resume" --server_binary="$SERVER_BIN" \
  --worker_binary="$WORKER_BIN" > "$WORK/resume1.out" 2>&1 ||
  { cat "$WORK/resume1.out" >&2; fail "resume: the first 30 steps failed"; }
sed -i 's/max_steps: 30/max_steps: 60/' "$WORK/resume.pbtxt"
"$TAMP_BIN" run "$WORK/resume.pbtxt" --run_dir="$WORK/run-resume" --server_binary="$SERVER_BIN" \
  --worker_binary="$WORKER_BIN" --summary_json="$WORK/resume.json" > "$WORK/resume2.out" 2>&1 ||
  { cat "$WORK/resume2.out" >&2; fail "resume: the resumed run failed"; }
grep -q '"steps":60,' "$WORK/resume.json" && grep -q '"start_step":30' "$WORK/resume.json" ||
  fail "resume: the summary is not 60 steps from step 30: $(cat "$WORK/resume.json")"
for rank in 0 1; do
  steps=$(grep -o '"kind":"STEP","worker":[0-9]*,"step":[0-9]*' "$WORK/run-resume/worker-$rank.events" |
    grep -o '[0-9]*$' | tr '\n' ' ')
  [ "$steps" = "$(seq -s ' ' 31 60) " ] || fail "resume: worker $rank trained steps $steps"
done
echo "ok: resumed at step 30 -> $(grep -o 'resumed at step [^)]*' "$WORK/resume2.out")"

# 1c. What a valid config says that has no effect is named (job/config_notes.h) by the
# launcher, the servers and the workers, and the run goes on: an override meant to change
# fc1.weight's pull leaves out the default's push.
write_config "$WORK/note.pbtxt" training="max_steps: 5" \
  compression='tensor_overrides { pattern: "fc1.weight" compression { pull { name: "bf16" } } }'
note="compression.tensor_overrides[0] (pattern 'fc1.weight') leaves out what default_compression sets (push topk, push_feedback RESIDUAL)"
"$TAMP_BIN" run "$WORK/note.pbtxt" --run_dir="$WORK/run-note" --server_binary="$SERVER_BIN" \
  --worker_binary="$WORKER_BIN" > "$WORK/note.out" 2>&1 ||
  { cat "$WORK/note.out" >&2; fail "the run with a noted override failed"; }
grep -qF "tamp: warning: $WORK/note.pbtxt: $note" "$WORK/note.out" ||
  { cat "$WORK/note.out" >&2; fail "tamp run did not name the override that leaves out the push"; }
for binary in "$SERVER_BIN" "$WORKER_BIN"; do
  servers=""; [ "$binary" = "$WORKER_BIN" ] && servers=--servers=127.0.0.1:1,127.0.0.1:2
  "$binary" --config="$WORK/note.pbtxt" --rank=0 $servers --check > /dev/null 2> "$WORK/note.err" ||
    { cat "$WORK/note.err" >&2; fail "$(basename "$binary") --check refused the config"; }
  grep -qF "$(basename "$binary"): warning: $WORK/note.pbtxt: $note" "$WORK/note.err" ||
    { cat "$WORK/note.err" >&2; fail "$(basename "$binary") --check did not name the override"; }
done

# 2. A typo in the config: nothing starts.
printf 'version: 1\ntraining { epohcs: 3 }\n' > "$WORK/typo.pbtxt"
expect_failure typo "$WORK/typo.pbtxt" 'no field named "epohcs"'

# 3. An unknown codec.
write_config "$WORK/codec.pbtxt" \
  compression='tensor_overrides { pattern: "fc1.*" compression { push { name: "topkk" } } }'
expect_failure codec "$WORK/codec.pbtxt" "unknown codec 'topkk'"

# 4. A server address that does not answer (a port nobody listens on).
write_config "$WORK/dead.pbtxt" \
  cluster='server_addresses: ["127.0.0.1:9", "127.0.0.1:10"] connect_timeout_ms: 1500'
expect_failure dead_server "$WORK/dead.pbtxt" "did not answer within 1500 ms"

# 5. A missing data file.
mkdir -p "$WORK/empty_data"
write_config "$WORK/nodata.pbtxt" data="dir: \"$WORK/empty_data\""
expect_failure missing_data "$WORK/nodata.pbtxt" "train-images-idx3-ubyte.gz"
# 6. A chunk its codec cannot take (powersgd rank 4 on fc2.bias, 10 values): refused as a
# config (exit 2) by tamp run before any process starts, and by --check.
write_config "$WORK/rank.pbtxt" \
  compression='tensor_overrides { pattern: "fc2.*" compression { push { name: "powersgd" rank: 4 } } }'
needle="rank.pbtxt: chunk 15 (fc2.bias): push: codec 'powersgd': rank 4 needs a matrix of at least 4 x 4"
expect_failure rank "$WORK/rank.pbtxt" "$needle"
[ ! -e "$WORK/run-rank/server-0.log" ] || fail "rank: a server was started"
status=0
"$TAMP_BIN" run "$WORK/rank.pbtxt" --run_dir="$WORK/run-rank" --server_binary="$SERVER_BIN" \
  --worker_binary="$WORKER_BIN" > /dev/null 2>&1 || status=$?
[ "$status" -eq 2 ] || fail "rank: tamp run exited $status, expected 2 (a bad config)"
for binary in "$SERVER_BIN" "$WORKER_BIN"; do
  servers=""; [ "$binary" = "$WORKER_BIN" ] && servers=--servers=127.0.0.1:1,127.0.0.1:2
  status=0
  "$binary" --config="$WORK/rank.pbtxt" --rank=0 $servers --check > /dev/null 2> "$WORK/rank.err" ||
    status=$?
  [ "$status" -eq 2 ] && grep -qF "$needle" "$WORK/rank.err" ||
    { cat "$WORK/rank.err" >&2; fail "$(basename "$binary") --check: exit $status, not the refusal"; }
done
echo PASS
