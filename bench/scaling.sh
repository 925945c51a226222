#!/usr/bin/env bash
# Scaling table on emulated hosts (bench/net/hosts.sh): every server and every worker on a
# host of its own, each host behind its own shaped link, for 1, 2 and 4 servers with 2 and 4
# workers. Measures the median step time and the bytes per step of each worker, and puts
# next to them what the performance model (`tamp model`) predicts, when it can.
#
#   bench/scaling.sh [--rate 1gbit] [--steps 60] [--configs "mlp_none mlp_topk1_ef_pulltopk1"]
#                    [--servers "1 2 4"] [--workers "2 4"] [--out docs/scaling.md]
#
# Writes bench/results/scaling.json and the Markdown table (stdout, and --out, keeping the
# out file's "## Reading" section). Needs root.
# All processes share this machine's cores: with more workers than cores, compute slows
# down with the worker count, which a real cluster would not see; the doc says so.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=1gbit steps=60 configs="mlp_none mlp_topk1_ef_pulltopk1" servers_list="1 2 4"
workers_list="2 4" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --servers) servers_list=$2; shift 2 ;;
    --workers) workers_list=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "scaling.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "scaling.sh: needs root (network namespaces, tc)" >&2; exit 77; }
source bench/openblas_env.sh

bazel build -c opt //server:tamp_server //worker:tamp_worker //tools/tamp:tamp >&2
bin=$(mktemp -d)
work=$(mktemp -d)
net="tsc$$"
cleanup() { bench/net/hosts.sh down "$net" 2>/dev/null || true; rm -rf "$bin" "$work"; }
trap cleanup EXIT
cp bazel-bin/server/tamp_server bazel-bin/worker/tamp_worker bazel-bin/tools/tamp/tamp "$bin/"
mkdir -p bench/results
results=bench/results/scaling.jsonl.tmp
: >"$results"

for config_name in $configs; do
  base=bench/configs/$config_name.pbtxt
  [ -f "$base" ] || { echo "scaling.sh: no $base" >&2; exit 2; }
  for S in $servers_list; do
    for W in $workers_list; do
      config=$work/$config_name-s$S-w$W.pbtxt
      # Same job, this topology, a fixed number of steps; plaintext across the emulated rack.
      sed -e "s/^cluster {.*/cluster { num_servers: $S num_workers: $W plaintext: true }/" \
          -e "s/^training {.*/training { epochs: 3 max_steps: $steps }/" "$base" >"$config"
      bench/net/hosts.sh up "$net" $((S + W)) "$rate" >&2
      addresses=()
      for ((i = 0; i < S; i++)); do addresses+=("$(bench/net/hosts.sh addr "$i"):29500"); done
      servers=$(IFS=,; echo "${addresses[*]}")
      pids=()
      for ((i = 0; i < S; i++)); do
        bench/net/hosts.sh exec "$net" "$i" -- "$bin/tamp_server" --config="$config" --rank="$i" \
          --host="$(bench/net/hosts.sh addr "$i")" --port=29500 2>"$work/server-$i.log" &
        pids+=($!)
      done
      start=$(date +%s.%N)
      worker_pids=()
      for ((j = 0; j < W; j++)); do
        bench/net/hosts.sh exec "$net" $((S + j)) -- "$bin/tamp_worker" --config="$config" \
          --rank="$j" --servers="$servers" >"$work/worker-$j.events" 2>"$work/worker-$j.log" &
        worker_pids+=($!)
      done
      failed=0
      for pid in "${worker_pids[@]}"; do wait "$pid" || failed=1; done
      end=$(date +%s.%N)
      kill "${pids[@]}" 2>/dev/null || true
      wait "${pids[@]}" 2>/dev/null || true
      bench/net/hosts.sh down "$net"
      if [ "$failed" -ne 0 ]; then
        echo "scaling.sh: $config_name S=$S W=$W failed; worker log:" >&2
        tail -5 "$work"/worker-*.log >&2
        exit 1
      fi
      events=()
      for ((j = 0; j < W; j++)); do events+=("$work/worker-$j.events"); done
      "$bin/tamp" summarize "$config" "${events[@]}" --summary_json="$work/summary.json" \
        --wall_seconds="$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" >&2
      prediction=null
      if "$bin/tamp" model "$config" --bandwidth "$rate" --topology hosts --codecs config \
           --json \
           >"$work/model.json" 2>"$work/model.err"; then
        prediction=$(cat "$work/model.json")
      else
        echo "scaling.sh: no model column for $config_name S=$S W=$W:" >&2
        cat "$work/model.err" >&2
      fi
      python3 - "$config_name" "$S" "$W" "$rate" "$work/summary.json" "$prediction" \
        "${events[@]}" >>"$results" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
import tamp_files
name, S, W, rate, summary_path, prediction = sys.argv[1:7]
summary = tamp_files.read_summary(summary_path)
step_ms, pushed, pulled = [], [], []
for path in sys.argv[7:]:
    for e in tamp_files.read_events(path):
        if e["kind"] != "STEP" or e["step"] < 10:  # skip warm-up steps
            continue
        step_ms.append(e["step_ms"])
        pushed.append(sum(e["step_shard_bytes_pushed"]))
        pulled.append(sum(e["step_shard_bytes_pulled"]))
row = {"config": name, "servers": int(S), "workers": int(W), "rate": rate,
       "step_ms_median": statistics.median(step_ms),
       "bytes_pushed_per_step": statistics.median(pushed),
       "bytes_pulled_per_step": statistics.median(pulled),
       "compute_ms_median": summary["compute_ms_median"],
       "wire_ms_median": summary["wire_ms_median"],
       "predicted_step_ms": None, "predicted_wire_ms": None}
if prediction != "null":
    # `tamp model --codecs config --json`: rows "none" and "config", the config's own codec.
    config_row = [r for r in json.loads(prediction)["codecs"] if r["codec"] == "config"][0]
    if "error" in config_row:
        sys.exit(f"scaling.sh: tamp model: {config_row['error']}")
    row["predicted_step_ms"] = config_row["step_ms"]
    row["predicted_wire_ms"] = config_row["wire_ms"]
print(json.dumps(row))
PY
      echo "scaling.sh: $config_name S=$S W=$W done" >&2
    done
  done
done

python3 - "$results" "$rate" "$steps" "$out" <<'PY'
import datetime, json, os, subprocess, sys
path, rate, steps, out = sys.argv[1:5]
rows = [json.loads(l) for l in open(path)]
json.dump(rows, open("bench/results/scaling.json", "w"), indent=1)
os.remove(path)
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout.strip()
load = open("/proc/loadavg").read().split()[:3]
lines = [
    "# Scaling on emulated hosts",
    "",
    f"Made by `bench/scaling.sh --rate {rate} --steps {steps}` on {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, "
    f"commit {commit}{' (with uncommitted changes)' if dirty else ''}, load average {' '.join(load)} at the end.",
    "",
    f"Every server and every worker runs on an emulated host of its own (bench/net/hosts.sh: one network "
    f"namespace per host, a veth link to a bridge, each link shaped to {rate} in both directions). "
    f"Step time: median over every worker's steps after the first 10 of {steps}. Bytes per step: one "
    f"worker's push and pull payloads. All hosts share this machine's {os.cpu_count()} cores, so with more "
    f"processes than cores the compute share of a step grows with the worker count, which a real rack "
    f"would not show; compare the wire columns across rows for what the links do.",
    "",
    "| config | servers | workers | step ms | compute ms | wire ms | pushed / step | pulled / step | model ms | model error | model wire ms |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for r in rows:
    model, model_wire = r["predicted_step_ms"], r["predicted_wire_ms"]
    err = f"{(model - r['step_ms_median']) / r['step_ms_median'] * 100:+.0f}%" if model else "-"
    lines.append(
        f"| {r['config']} | {r['servers']} | {r['workers']} | {r['step_ms_median']:.1f} | "
        f"{r['compute_ms_median']:.1f} | {r['wire_ms_median']:.1f} | {r['bytes_pushed_per_step'] / 1e6:.3f} MB | "
        f"{r['bytes_pulled_per_step'] / 1e6:.3f} MB | {f'{model:.1f}' if model else '-'} | {err} | "
        f"{f'{model_wire:.1f}' if model else '-'} |")
text = "\n".join(lines) + "\n"
print(text)
if out:
    # The written reading of the figures (from "## Reading" on) outlives a rerun.
    old = open(out).read() if os.path.exists(out) else ""
    reading = old.find("\n## Reading")
    open(out, "w").write(text + (old[reading:] if reading >= 0 else ""))
PY
