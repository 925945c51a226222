#!/usr/bin/env bash
# examples/cpp/softmax_regression under `tamp run`: a program's own model through the public
# C++ client trains to >= 0.85 on its synthetic task, both workers end with the same weights
# (one replica), and its events make tamp run's summary (steps, bytes, accuracy).
set -euo pipefail
work="${TEST_TMPDIR:-$(mktemp -d)}"
"$PWD/tools/tamp/tamp" run examples/cpp/softmax_regression.pbtxt --run_dir="$work/run" \
  --summary_json="$work/summary.json" --server_binary="$PWD/server/tamp_server" -- \
  "$PWD/examples/cpp/softmax_regression" > "$work/out" 2>&1 ||
  { cat "$work/out" "$work"/run/worker-*.log >&2; echo "FAIL: tamp run failed" >&2; exit 1; }
checksums=$(grep -ho "weight checksum .*" "$work"/run/worker-0.log "$work"/run/worker-1.log)
[ "$(echo "$checksums" | wc -l)" -eq 2 ] && [ "$(echo "$checksums" | sort -u | wc -l)" -eq 1 ] ||
  { echo "FAIL: the workers' weights differ: $checksums" >&2; exit 1; }
/usr/bin/python3 - "$work/summary.json" <<'PY' || { cat "$work/out" >&2; exit 1; }
import json, sys
summary = json.load(open(sys.argv[1]))
assert summary["steps"] == 300, summary
assert summary["test_accuracy"] >= 0.85, summary
assert summary["compression_ratio"] > 5, summary  # top-k 10% of w's pushes.
PY
grep -o "done: .*" "$work/out"
echo PASS
