#!/usr/bin/env bash
# Tensor fusion (cluster.fusion_bytes), measured: writes bench/results/fusion.json and
# docs/fusion.md.
#
#   bench/fusion/run.sh [--rounds 3] [--tensors "1 16 128 512 2048"] [--elements 1048576]
#                       [--steps 60] [--report-only]
#
# One model of --elements fp32 values split into N equal tensors, no compute
# (client_steps.py), 2 servers and 2 workers on loopback, push codec none and top-k 1% with
# error feedback, each with fusion off (fusion_bytes: 0) and at the default; per round every
# N and codec, the two settings in turn (which goes first swaps each round). Each figure is
# worker 0's median step after 10 warm-up steps; the table gives the median over the rounds.
# Needs `tamp` on the PATH and `import tamp` in /usr/bin/python3 (tools/install_python.sh).
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
rounds=3
tensors="1 16 128 512 2048"
elements=1048576
steps=60
report_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --tensors) tensors=$2; shift 2 ;;
    --elements) elements=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --report-only) report_only=1; shift ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
raw="$repo/bench/results/fusion"
if [[ $report_only == 0 ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  rm -rf "$raw" && mkdir -p "$raw"
  for codec in none topk; do
    if [[ $codec == topk ]]; then
      push='push { name: "topk" ratio: 0.01 } push_feedback { kind: RESIDUAL }'
    else
      push='push { name: "none" }'
    fi
    for fusion in off default; do
      fusion_field=""
      [[ $fusion == off ]] && fusion_field="fusion_bytes: 0"
      cat > "$work/${codec}_$fusion.pbtxt" <<CONFIG
version: 1
name: "fusion_${codec}_$fusion"
cluster { num_servers: 2 num_workers: 2 $fusion_field }
model { kind: REGISTERED }
training { epochs: 1 max_steps: $steps }
optimizer { name: "sgd" learning_rate: 0.01 }
compression {
  partition_bytes: 1048576
  min_compress_bytes: 0
  default_compression { $push pull { name: "none" } }
}
CONFIG
    done
  done
  started=$(date -u +%FT%TZ)
  for round in $(seq 1 "$rounds"); do
    order="off default"
    (( round % 2 == 0 )) && order="default off"
    for n in $tensors; do
      for codec in none topk; do
        for fusion in $order; do
          run_dir="$work/run"
          tamp run "$work/${codec}_$fusion.pbtxt" --run_dir "$run_dir" -- \
            /usr/bin/python3 "$repo/bench/fusion/client_steps.py" "$n" "$elements" "$steps" \
            > /dev/null 2> "$work/console"
          line=$(grep '^RESULT ' "$run_dir/worker-0.log" | tail -1 | cut -c8-)
          [[ -n $line ]] || { cat "$work/console" "$run_dir/worker-0.log" >&2; exit 1; }
          echo "{\"round\": $round, \"codec\": \"$codec\", \"fusion\": \"$fusion\", \"result\": $line}" \
            >> "$raw/runs.jsonl"
          echo "round $round: $n tensors, $codec, fusion $fusion: $line" >&2
        done
      done
    done
  done
  {
    echo "{\"started\": \"$started\", \"ended\": \"$(date -u +%FT%TZ)\","
    echo " \"commit\": \"$(git -C "$repo" rev-parse --short HEAD)\","
    echo " \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')\","
    echo " \"cores\": $(nproc), \"rounds\": $rounds, \"steps\": $steps, \"elements\": $elements,"
    echo " \"default_fusion_bytes\": 262144}"
  } > "$raw/meta.json"
fi
/usr/bin/python3 "$repo/bench/fusion/report.py" "$raw" "$repo/bench/results/fusion.json" \
  "$repo/docs/fusion.md"
