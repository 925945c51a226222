#!/usr/bin/env bash
# Python scripts under `tamp run` (the launcher's side of the Python package; python_test
# runs the package's own checks against servers it starts itself): a tamp.torch worker
# killed and restarted by `tamp run --restart_workers` (examples/pytorch/mlp.py), the events
# tamp.torch prints for a script that reports nothing (auto_report_worker.py), the note on
# an override that changes nothing, and a DDP script switched to Tamp
# (examples/pytorch/ddp.py). Debian's /usr/bin/python3 with python3-torch and python3-numpy.
source tests/testlib.sh
source tests/python_testlib.sh
# `tamp run --restart_workers=1 -- python3 examples/pytorch/mlp.py`: worker 1 killed mid-run;
# its successor resumes (TAMP_RESTART) at the other worker's step and the run ends.
dir="$WORK/restart"
mkdir -p "$dir"
write_config "$dir/job.pbtxt" model="kind: MLP hidden: [1024, 1024] init_seed: 3" \
  training="eval_every_epoch: false"
sed -i 's/epochs: 2 /epochs: 3 /' "$dir/job.pbtxt"  # 192 steps.
PATH="/usr/bin:$PATH" "$TAMP_BIN" run "$dir/job.pbtxt" --restart_workers=1 --run_dir="$dir/run" \
  --summary_json="$dir/summary.json" --server_binary="$SERVER_BIN" -- \
  "${PYTHON3_COMMAND[@]}" examples/pytorch/mlp.py > "$dir/out" 2>&1 &
launcher=$!
STARTED_PIDS+=($launcher)
this_jobs_worker_1() {  # PID: worker 1 of this job's config.
  grep -qz '^TAMP_RANK=1$' "/proc/$1/environ" 2>/dev/null &&
    grep -qzF "$dir/job.pbtxt" "/proc/$1/environ" 2>/dev/null
}
kill_mid_run "$dir/out" "step 100/192" "examples/pytorch/mlp.py" this_jobs_worker_1
wait "$launcher" || { cat "$dir/out" "$dir"/run/worker-1*.log >&2; fail "restart: tamp run failed"; }
grep -q "worker 1 failed (killed by SIGKILL); restarting it (restart 1 of 1)" "$dir/out" ||
  { cat "$dir/out" >&2; fail "restart: worker 1 was not restarted"; }
grep -q "worker 1 rejoined at step" "$dir/run/worker-1.restart-1.log" ||
  { cat "$dir/run/worker-1.restart-1.log" >&2; fail "restart: the new worker 1 did not rejoin"; }
grep -q "final test accuracy .* after 192 steps" "$dir/out" ||
  { cat "$dir/out" >&2; fail "restart: worker 0 did not end after 192 steps"; }
# The example reports tamp_worker's events (tamp.torch.report_*): a full summary, not the
# wall time only.
/usr/bin/python3 - "$dir/summary.json" "$dir/out" <<'EOF' || fail "restart: summary incomplete"
import json, re, sys
summary = json.load(open(sys.argv[1]))
accuracy = float(re.search(r"final test accuracy ([0-9.]+) after 192", open(sys.argv[2]).read())[1])
assert summary["steps"] == 192, summary
assert summary["worker_restarts"] == 1, summary
assert abs(summary["test_accuracy"] - accuracy) < 1e-4, (summary, accuracy)
assert summary["bytes_pushed"] > 0 and summary["compression_ratio"] > 0, summary
assert summary["step_ms_median"] > 0 and summary["final_loss"] > 0, summary
EOF
echo "restart: $(grep -o 'worker 1 rejoined at step [0-9]*' "$dir/run/worker-1.restart-1.log");" \
  "$(grep -o 'final test accuracy .*' "$dir/out")"

# A script that reports nothing itself under `tamp run`: tamp.torch prints the events, so the
# summary still says what compression bought (steps, bytes, step time); accuracy and loss
# only where the script gave them (step(closure)'s loss, report_eval()'s accuracy).
for mode in silent closure; do
  dir="$WORK/auto_report_$mode"
  mkdir -p "$dir"
  write_config "$dir/job.pbtxt" model="kind: MLP hidden: [64] init_seed: 3"
  PATH="/usr/bin:$PATH" "$TAMP_BIN" run "$dir/job.pbtxt" --run_dir="$dir/run" \
    --summary_json="$dir/summary.json" --server_binary="$SERVER_BIN" -- \
    "${PYTHON3_COMMAND[@]}" tests/python/auto_report_worker.py "$mode" > "$dir/out" 2>&1 ||
    { cat "$dir/out" >&2; fail "auto reports ($mode): tamp run failed"; }
  /usr/bin/python3 - "$mode" "$dir/summary.json" "$dir/out" <<'EOF' ||
import json, sys
mode, summary, out = sys.argv[1], json.load(open(sys.argv[2])), open(sys.argv[3]).read()
assert summary["steps"] == 20, summary
assert summary["bytes_pushed"] > 0 and summary["compression_ratio"] > 5, summary
assert summary["step_ms_median"] > 0, summary
assert "step 20/20 (100%)" in out, out
if mode == "silent":
    assert "test_accuracy" not in summary and "final_loss" not in summary, summary
    assert "done: no test accuracy reported, 20 steps" in out, out
    assert "| loss " not in out, out
else:
    assert summary["test_accuracy"] == 0.625 and summary["final_loss"] > 0, summary
    assert "| loss " in out and "done: test accuracy 62.50%, 20 steps" in out, out
EOF
    { cat "$dir/out" >&2; fail "auto reports ($mode): the summary is not the events'"; }
  echo "auto reports ($mode): $(grep -o 'done: .*' "$dir/out")"
done

# An override that changes nothing (fc2.bias is below min_compress_bytes) on a REGISTERED
# model, whose layout only the workers know: worker 0 says so on the progress display, once.
dir="$WORK/override_note"
mkdir -p "$dir"
write_config "$dir/job.pbtxt" model="kind: REGISTERED" compression='min_compress_bytes: 1024
  tensor_overrides { pattern: "fc2.bias" compression { push { name: "fp16" } push_feedback { } } }'
PATH="/usr/bin:$PATH" "$TAMP_BIN" run "$dir/job.pbtxt" --run_dir="$dir/run" \
  --server_binary="$SERVER_BIN" -- \
  "${PYTHON3_COMMAND[@]}" tests/python/auto_report_worker.py silent > "$dir/out" 2>&1 ||
  { cat "$dir/out" >&2; fail "override note: tamp run failed"; }
[ "$(grep -c "warning: tamp: .*'fc2.bias') changes nothing" "$dir/out")" -eq 1 ] &&
  grep -q "^\[worker 0\] warning: tamp: .*changes nothing" "$dir/out" ||
  { cat "$dir/out" >&2; fail "override note: not said once, by worker 0"; }
echo "override note: $(grep -o "warning: tamp: .*changes nothing" "$dir/out" | cut -c1-90)"

# A DDP script switched to Tamp (examples/pytorch/ddp.py: the comm hook, AGGREGATE mode):
# its gloo process group comes from the torchrun variables `tamp run` sets (env://).
dir="$WORK/ddp_example"
mkdir -p "$dir"
write_config "$dir/job.pbtxt" model="kind: REGISTERED" training="max_steps: 20"
echo "server { mode: AGGREGATE }" >> "$dir/job.pbtxt"
PATH="/usr/bin:$PATH" "$TAMP_BIN" run "$dir/job.pbtxt" --run_dir="$dir/run" \
  --summary_json="$dir/summary.json" --server_binary="$SERVER_BIN" -- \
  "${PYTHON3_COMMAND[@]}" examples/pytorch/ddp.py > "$dir/out" 2>&1 ||
  { cat "$dir/out" "$dir"/run/worker-*.log >&2; fail "ddp example: tamp run failed"; }
/usr/bin/python3 - "$dir/summary.json" "$dir/out" <<'EOF' ||
import json, re, sys
summary, out = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
accuracy = float(re.search(r"final test accuracy ([0-9.]+) after 20 steps", out)[1])
assert summary["steps"] == 20 and abs(summary["test_accuracy"] - accuracy) < 1e-4, summary
assert summary["compression_ratio"] > 5, summary  # top-k 10% of the pushes.
EOF
  { cat "$dir/out" >&2; fail "ddp example: the summary is not the run's"; }
echo "ddp example: $(grep -o 'done: .*' "$dir/out")"
echo "PASS"
