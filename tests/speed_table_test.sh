#!/usr/bin/env bash
# bench/speed_table.py end to end: mlp_none and mlp_topk1_ef_pulltopk1 (bench/configs/) for
# 6 steps each on a 1 Gbit/s shaped link; checks the JSON's figures against what the configs
# must send, the link's rate and the given steps to target, and the doc's 5x verdict.
source tests/testlib.sh

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (bench/net/shaped.sh creates a network namespace and shapes it with tc)"
  exit 0
fi

bin="$WORK/bin"
mkdir -p "$bin"
ln -sf "$TAMP_BIN" "$bin/tamp"
ln -sf "$SERVER_BIN" "$bin/tamp_server"
ln -sf "$WORKER_BIN" "$bin/tamp_worker"
echo '{"runs": {"mlp_none": {"steps_to_target": 500, "final_accuracy": 0.88}}}' \
  > "$WORK/convergence.json"

python3 bench/speed_table.py --binaries "$bin" --links 1gbit \
  --configs mlp_none,mlp_topk1_ef_pulltopk1 --steps 6 --warmup 2 \
  --json "$WORK/speed.json" --doc "$WORK/speed.md" --convergence "$WORK/convergence.json" ||
  fail "speed_table.py failed"

python3 - "$WORK/speed.json" <<'EOF' || fail "speed.json does not hold the expected figures"
import json, os, sys
results = {r["name"]: r for r in json.load(open(sys.argv[1]))["results"]}
assert sorted(results) == ["mlp_none", "mlp_topk1_ef_pulltopk1"], sorted(results)
none, topk = results["mlp_none"], results["mlp_topk1_ef_pulltopk1"]
for r in results.values():
    assert (r["link"], r["num_servers"], r["num_workers"], r["steps_measured"]) == ("1gbit", 2, 2, 4), r
    assert abs(r["steps_per_s"] * r["step_ms_median"] - 1000) < 1e-6, r
    assert r["link_bytes_per_step"] == 2 * (r["bytes_pushed_per_step"] + r["bytes_pulled_per_step"]), r
    assert abs(r["link_ms"] - r["link_bytes_per_step"] * 8 / 1e9 * 1000) < 1e-6, r
# The MLP's 1,863,690 fp32 parameters, raw both ways, plus a 12-byte header per chunk.
raw = 1863690 * 4
assert raw < none["bytes_pushed_per_step"] < raw + 12 * 64, none
assert none["bytes_pulled_per_step"] == none["bytes_pushed_per_step"], none
assert abs(none["compression_ratio"] - 1) < 1e-3, none
# The shaper holds the link to 1 Gbit/s: no step is shorter than the link needs.
assert none["step_ms_median"] >= 0.9 * none["link_ms"], none
assert abs(none["time_to_target_s"] - 500 * none["step_ms_median"] / 1000) < 1e-9, none
assert none["final_accuracy"] == 0.88, none
assert topk["steps_to_target"] is None and topk["time_to_target_s"] is None, topk
assert topk["compression_ratio"] > 50, topk
assert topk["bytes_pulled_per_step"] < 256 * 1024, topk
# Under ThreadSanitizer (bazel test --config=tsan sets TSAN_OPTIONS) compute runs 5-15x
# slower and top-k's encoding, not the link, sets the step time: no speed-up to check.
if "TSAN_OPTIONS" not in os.environ:
    assert topk["steps_per_s"] > none["steps_per_s"], (topk, none)
EOF

grep -q '^## 1gbit' "$WORK/speed.md" || fail "speed.md has no 1gbit table"
grep -Eq '^\*\*(PASS|FAIL)\*\*: at 1gbit, `mlp_topk1_ef_pulltopk1`' "$WORK/speed.md" ||
  fail "speed.md has no 5x verdict"
grep -q '^| mlp_none | ' "$WORK/speed.md" || fail "speed.md has no mlp_none row"
echo PASS
