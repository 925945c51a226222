#!/usr/bin/env bash
# Prints what a seeded run computes, so two builds can be compared to the last digit: for each
# CONFIG, a short run (--steps, default 30) and then every worker's loss and bytes at every
# step and each test accuracy, in full precision. A refactoring that keeps behaviour leaves
# this output unchanged (diff the outputs of the two builds).
#
#   tools/loss_fingerprint.sh [--steps N] [--tamp PATH] [CONFIG ...] > fingerprint.txt
#
# Default CONFIGs: examples/*.pbtxt, bench/configs/mlp_*.pbtxt (every codec in the speed
# table) and bench/configs/recommended/*.pbtxt. Only SYNC runs are deterministic; a config
# in another mode is refused. Uses the tamp, tamp_server and tamp_worker built in bazel-bin
# (build them with -c opt first) unless --tamp is given.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=30 tamp=bazel-bin/tools/tamp/tamp configs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --tamp) tamp=$2; shift 2 ;;
    -*) echo "loss_fingerprint: unknown flag $1" >&2; exit 2 ;;
    *) configs+=("$1"); shift ;;
  esac
done
[ ${#configs[@]} -gt 0 ] || configs=(examples/*.pbtxt bench/configs/mlp_*.pbtxt \
                                     bench/configs/recommended/*.pbtxt)
[ -x "$tamp" ] || { echo "loss_fingerprint: $tamp not built" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for config in "${configs[@]}"; do
  if grep -qE '^\s*mode:\s*(ASYNC|SSP)' "$config"; then
    echo "loss_fingerprint: $config is not SYNC, so its losses are not reproducible" >&2
    exit 2
  fi
  # The run's length replaces the config's own; evaluation every 10 steps.
  grep -v '^\s*training\s*{.*}\s*$' "$config" > "$work/run.pbtxt"
  echo "training { max_steps: $steps eval_every_steps: 10 }" >> "$work/run.pbtxt"
  rm -f "$work/metrics.jsonl"
  if ! "$tamp" run "$work/run.pbtxt" --run_dir="$work/run" \
       --metrics_file="$work/metrics.jsonl" > "$work/out.txt" 2>&1; then
    echo "loss_fingerprint: $config failed:" >&2
    tail -5 "$work/out.txt" >&2
    exit 1
  fi
  echo "== $config"
  /usr/bin/python3 - "$work/metrics.jsonl" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
for r in sorted(rows, key=lambda r: (r.get("step", 0), r.get("worker", -1), "loss" not in r)):
    if "loss" in r:
        print(f'step {r["step"]} worker {r["worker"]} loss {r["loss"]!r} '
              f'pushed {r["bytes_pushed"]} pulled {r["bytes_pulled"]}')
    elif "test_accuracy" in r:
        print(f'step {r.get("step")} worker {r.get("worker")} test_accuracy {r["test_accuracy"]!r}')
EOF
done
