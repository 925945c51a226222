#!/usr/bin/env bash
# bench/convergence.py's pieces on a real job: the MLP example with top-k 1% + error feedback,
# cut at 20 steps and evaluated every 10, digested into the convergence table's JSON entry
# (bytes per step from topk's wire size, evaluation steps; its files' format version checked
# by bench/tamp_files.py); a run that ends in a non-finite push is recorded as diverged, not
# as a failure; and digests of synthetic metrics (steps to target, accuracy per epoch, an
# epoch cut short by divergence).
source tests/testlib.sh

bin="$WORK/bin"
mkdir -p "$bin"
ln -sf "$TAMP_BIN" "$bin/tamp"
ln -sf "$SERVER_BIN" "$bin/tamp_server"
ln -sf "$WORKER_BIN" "$bin/tamp_worker"

python3 - "$bin" "$WORK" "$DATA_DIR" <<'PY' || fail "convergence.py digest checks failed"
import math, sys
sys.path.insert(0, "bench")
import convergence as c

binaries, work, data_dir = sys.argv[1:]
name, text = c.make_config("mlp", "topk1_ef", 'name: "topk" ratio: 0.01', "RESIDUAL",
                           epochs=1, max_steps=20, eval_every_steps=10)
assert name == "mlp_topk1_ef", name
text = text.replace("data {", f'data {{ dir: "{data_dir}"')
lines, summary, wall = c.run_job(binaries, name, text, work)
entry = c.digest("mlp", "topk1_ef", "RESIDUAL", text, lines, summary, wall)
assert entry["steps"] == 20, entry["steps"]
assert [step for step, _ in entry["accuracy_curve"]] == [10, 20], entry["accuracy_curve"]
assert entry["final_accuracy"] == entry["accuracy_curve"][-1][1]
assert entry["diverged_at_step"] is None
# The weight tensors in near-equal chunks of at most 1 MiB (job/partition.h), each top-k
# 1%: 12 + ceil(k * b / 8) + 4k bytes for k = round(0.01 n), b = ceil(log2 n) index bits;
# the biases go raw (12 + 4n).
chunks = [200704] * 4 + [262144] * 4 + [10240]  # fc1 (784 x 1024), fc2, fc3.
topk = sum(12 + math.ceil(round(0.01 * n) * max(1, math.ceil(math.log2(n))) / 8)
           + 4 * round(0.01 * n) for n in chunks)
raw_bias = sum(12 + 4 * n for n in (1024, 1024, 10))
assert entry["bytes_pushed_per_step"] == topk + raw_bias, (entry["bytes_pushed_per_step"],
                                                          topk + raw_bias)
assert entry["bytes_pulled_per_step"] > 4 * 1863690  # Raw pull: every weight, framed.
print("ok: real run", {k: entry[k] for k in ("steps", "bytes_pushed_per_step",
                                            "compression_ratio", "accuracy_curve")})

# The run's files in the current format (bench/tamp_files.py), whose readers refuse another
# version rather than misread it: here a summary as version 1 wrote it, integers as strings.
import json, os, tamp_files
assert summary["format_version"] == tamp_files.FORMAT_VERSION and summary["steps"] == 20, summary
assert all(l["format_version"] == tamp_files.FORMAT_VERSION for l in lines)
old = os.path.join(work, "v1.summary.json")
with open(old, "w") as f:
    json.dump({"name": name, "steps": "20", "test_accuracy": 0.5}, f)
try:
    tamp_files.read_summary(old)
    raise AssertionError("read_summary took a version 1 summary")
except ValueError as e:
    assert "format_version None, expected 2" in str(e), e
print("ok: format version checked")

# Learning rate 1e6: a push soon holds Inf, a server rejects it, and the run is recorded as
# diverged at the last step any worker finished.
name, text = c.make_config("mlp", "none", 'name: "none"', "NONE", epochs=1, max_steps=20,
                           eval_every_steps=10)
text = text.replace("data {", f'data {{ dir: "{data_dir}"')
text = text.replace("learning_rate: 0.05", "learning_rate: 1e6")
outcome = c.run_job(binaries, name, text, work)
assert outcome is not None and outcome[1] is None, "the run did not end as diverged"
entry = c.digest("mlp", "none", "NONE", text, *outcome)
assert entry["final_accuracy"] is None and 1 <= entry["diverged_at_step"] < 20, entry
print("ok: diverged at step", entry["diverged_at_step"])

# Steps to target and per-epoch accuracy from synthetic metrics lines.
step = {"worker": 0, "bytes_pushed": 100, "bytes_pulled": 400, "raw_bytes_pushed": 1000}
lines = [dict(step, step=s) for s in range(1, 7)] + [
    {"worker": 0, "step": 2, "epoch": 0, "test_accuracy": 0.80},
    {"worker": 0, "step": 3, "epoch": 0, "test_accuracy": 0.86},
    {"worker": 0, "step": 4, "epoch": 1, "test_accuracy": 0.84},
    {"worker": 0, "step": 6, "epoch": 1, "test_accuracy": 0.87}]
entry = c.digest("mlp", "x", "NONE", "", lines, {"final_loss": 0.5}, 1.0)
assert entry["steps_to_target"] == 3, entry["steps_to_target"]
assert entry["accuracy_per_epoch"] == [0.86, 0.87], entry["accuracy_per_epoch"]
assert entry["compression_ratio"] == 10 and entry["bytes_pulled_per_step"] == 400
# Diverged (no summary): no final accuracy, the unfinished epoch left out.
entry = c.digest("mlp", "x", "NONE", "", lines[:5] + lines[6:9], None, 1.0)
assert entry["final_accuracy"] is None and entry["diverged_at_step"] == 5, entry
assert entry["accuracy_per_epoch"] == [0.86], entry["accuracy_per_epoch"]
print("ok: synthetic digests")

# Every codec has recommended settings; a row of settings of its own runs its optimizer, and
# the recommended configs are the exact configs that ran, headed by their result.
import os, re, subprocess
listing = subprocess.run([os.path.join(binaries, "tamp"), "codecs"], capture_output=True,
                         text=True, check=True).stdout
codecs = re.findall(r'^  push \{ name: "(\w+)"', listing, flags=re.M)
assert len(codecs) >= 16 and sorted(c.RECOMMENDED) == sorted(codecs), (codecs, c.RECOMMENDED)
rows = {row for _, row, _, _ in c.all_runs()}
assert all(row in rows for row in c.RECOMMENDED.values()), c.RECOMMENDED
for row, (codec, feedback, optimizer) in c.RECOMMENDED_ROWS.items():
    name, text = c.make_config("mlp", row, codec, feedback, 3, 0, 50)
    assert optimizer + "\n" in text and f"push {{ {codec} }}" in text, text
    assert f"push_feedback {{ kind: {feedback} }}" in text, text
row = c.RECOMMENDED["signsgd"]
entry = dict(c.digest("mlp", row, "NONE", "version: 1\n", lines, {"final_loss": 0.5}, 1.0))
c.write_recommended_configs({f"mlp_{row}": entry}, work + "/recommended")
assert os.listdir(work + "/recommended") == ["signsgd.pbtxt"], os.listdir(work + "/recommended")
written = open(work + "/recommended/signsgd.pbtxt").read()
assert written.endswith("\nversion: 1\n") and "test accuracy 0.8700 and reached 0.85 at step 3" \
    in written, written
print("ok: recommended settings")
PY
echo PASS
