#!/usr/bin/env bash
# Scaling table on emulated hosts (bench/net/hosts.sh): every server and every worker on a
# host of its own, each host behind its own shaped link, for each number of servers and
# workers asked. Measures the median step time, its split and the bytes per step of each
# worker after --warmup steps, and every process's memory (VmRSS) and CPU time after
# --memory_warmup steps (bench/proc_sample.py), and puts next to them what the performance
# model (`tamp model`) predicts, when it can.
#
#   bench/scaling.sh [--rate 1gbit] [--steps 60] [--warmup 10] [--memory_warmup 30]
#                    [--configs "mlp_none scaling/resnet50_none"]   # under bench/configs/
#                    [--servers "1 2 4"] [--workers "2 4"] | [--points "8x16 4x16"]  # SxW
#                    [--perf SECONDS] [--out docs/scaling.md]
#
# --points runs those (servers x workers) pairs instead of every --servers x --workers pair.
# A config with a compression.automatic block is planned first for each point, at --rate per
# host (`tamp model --auto --topology hosts --write_config`), and its processes run the plan.
# --memory_warmup: a server's heap and gRPC's buffers grow to a step's size in the first
# steps of a raw pull (docs/server_memory.md), which is not growth during the run; memory
# is measured after them, so --steps must pass them.
# --perf records SECONDS of `perf record -a` once warm-up is over, on each config's last
# point, into bench/results/scaling_perf_<config>.txt (CPU time per process and library).
# Merges its rows into bench/results/scaling.json (a rerun of the same config, servers,
# workers, rate and steps replaces the old row) and regenerates the table (bench/scaling_doc.py:
# stdout, and --out, keeping its "## Reading" section). Needs root.
# All processes share this machine's cores: with more workers than cores, compute slows
# down with the worker count, which a real cluster would not see; the doc says so.
set -euo pipefail
command_line="bench/scaling.sh $*"
cd "$(dirname "$0")/.."
rate=1gbit steps=60 warmup=10 memory_warmup=30 configs="mlp_none mlp_topk1_ef_pulltopk1" servers_list="1 2 4"
workers_list="2 4" points="" perf_seconds=0 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --memory_warmup) memory_warmup=$2; shift 2 ;;
    --points) points=$2; shift 2 ;;
    --perf) perf_seconds=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --servers) servers_list=$2; shift 2 ;;
    --workers) workers_list=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "scaling.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$steps" -gt "$((memory_warmup + 10))" ] || {
  echo "scaling.sh: --steps $steps leaves under 10 steps after --memory_warmup $memory_warmup" >&2
  exit 2
}
[ "$(id -u)" -eq 0 ] || { echo "scaling.sh: needs root (network namespaces, tc)" >&2; exit 77; }
source bench/openblas_env.sh

bazel build -c opt //server:tamp_server //worker:tamp_worker //tools/tamp:tamp >&2
bin=$(mktemp -d)
work=$(mktemp -d)
net="tsc$$"
cleanup() { bench/net/hosts.sh down "$net" 2>/dev/null || true; rm -rf "$bin" "$work"; }
trap cleanup EXIT
cp bazel-bin/server/tamp_server bazel-bin/worker/tamp_worker bazel-bin/tools/tamp/tamp "$bin/"

run_started=$(date -u '+%Y-%m-%d %H:%M UTC')
# What was measured: the commit, and whether the tree differed from it when the run began.
run_commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain)" ] || run_commit="$run_commit (with uncommitted changes)"
mkdir -p bench/results
results=bench/results/scaling.jsonl.tmp  # After the look at the tree: not a change of it.
: >"$results"

# The (servers, workers) pairs to run, as SxW words.
pairs() {
  if [ -n "$points" ]; then
    for p in $points; do
      [[ "$p" =~ ^[0-9]+x[0-9]+$ ]] || { echo "scaling.sh: --points wants SxW, got '$p'" >&2; exit 2; }
      echo "$p"
    done
  else
    for S in $servers_list; do for W in $workers_list; do echo "${S}x$W"; done; done
  fi
}
pair_list=$(pairs)

# Waits until every worker has logged $warmup steps, then records $perf_seconds of the
# whole machine's CPU time into bench/results/scaling_perf_$1.txt: every process's share
# (this machine is shared), then this job's processes' alone, by library and by function.
record_perf() {
  local name=$1 S=$2 W=$3 config=$4
  shift 4
  until [ "$(for f in "$@"; do grep -c '"STEP"' "$f" || true; done | sort -n | head -1)" -ge "$warmup" ]; do
    sleep 0.5
  done
  local job_pids
  job_pids=$(pgrep -d, -f -- "--config=$config")
  perf record -a -F 499 -o "$work/perf.data" -- sleep "$perf_seconds" 2>"$work/perf.err" >&2
  local report="perf report -i $work/perf.data --stdio"
  {
    echo "# perf record -a -F 499, $perf_seconds s after warm-up, $name with $S servers and $W workers"
    echo "# at $rate per host; bench/scaling.sh $run_started; a shared $(nproc)-core machine."
    echo "# The whole machine, by command (other engineers' processes included):"
    $report --sort comm 2>/dev/null | grep -v '^$' | head -20 || true
    echo "# This job's $((S + W)) processes only (their pids), by command and library:"
    $report --pid "$job_pids" --sort comm,dso 2>/dev/null | grep -v '^$' | head -30 || true
    echo "# This job's processes only, by function:"
    $report --pid "$job_pids" --sort comm,dso,sym 2>/dev/null | grep -v '^$' | head -50 || true
  } >"bench/results/scaling_perf_$name.txt"
}

for config_name in $configs; do
  base=bench/configs/$config_name.pbtxt
  [ -f "$base" ] || { echo "scaling.sh: no $base" >&2; exit 2; }
  name=$(basename "$config_name")
  base_dir=$(cd "$(dirname "$base")" && pwd)
  # A LAYOUT model runs max_steps steps in one epoch; the data models get 3 epochs of room.
  if grep -q "kind: LAYOUT" "$base"; then training="training { max_steps: $steps }"
  else training="training { epochs: 3 max_steps: $steps }"; fi
  last_pair=$(echo "$pair_list" | tail -1)
  for pair in $pair_list; do
    S=${pair%x*} W=${pair#*x}
    config=$work/$name-s$S-w$W.pbtxt
    # Same job, this topology, a fixed number of steps; plaintext across the emulated rack;
    # layout and profile paths made absolute (they are relative to the config's folder).
    sed -e "s/^cluster {.*/cluster { num_servers: $S num_workers: $W plaintext: true }/" \
        -e "s/^training {.*/$training/" \
        -e "s#\(layout_file\|profile_file\): \"\([^/\"][^\"]*\)\"#\1: \"$base_dir/\2\"#g" \
        "$base" >"$config"
    if grep -q "automatic {" "$config"; then
      # compression.automatic, planned for this cluster at $rate per host, as `tamp run`
      # would plan it; the processes run the resolved config.
      "$bin/tamp" model "$config" --auto --bandwidth "$rate" --topology hosts \
        --write_config "$config.resolved" >"$work/$name-s$S-w$W.plan" 2>&1 ||
        { cat "$work/$name-s$S-w$W.plan" >&2; exit 1; }
      head -1 "$work/$name-s$S-w$W.plan" >&2
      mv "$config.resolved" "$config"
    fi
    bench/net/hosts.sh up "$net" $((S + W)) "$rate" >&2
    addresses=()
    for ((i = 0; i < S; i++)); do addresses+=("$(bench/net/hosts.sh addr "$i"):29500"); done
    servers=$(IFS=,; echo "${addresses[*]}")
    events=()
    for ((j = 0; j < W; j++)); do events+=("$work/worker-$j.events"); : >"$work/worker-$j.events"; done
    python3 bench/proc_sample.py sample "$config" "$work/procs.jsonl" "${events[@]}" &
    sampler=$!
    perf_pid=""
    if [ "$perf_seconds" -gt 0 ] && [ "$pair" = "$last_pair" ]; then
      record_perf "$name" "$S" "$W" "$config" "${events[@]}" &
      perf_pid=$!
    fi
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
    [ -z "$perf_pid" ] || wait "$perf_pid" || true
    # The servers' last samples are taken before they are stopped.
    kill -TERM "$sampler"; wait "$sampler" || true
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
    bench/net/hosts.sh down "$net"
    if [ "$failed" -ne 0 ]; then
      echo "scaling.sh: $name S=$S W=$W failed; worker log:" >&2
      tail -5 "$work"/worker-*.log >&2
      exit 1
    fi
    "$bin/tamp" summarize "$config" "${events[@]}" --summary_json="$work/summary.json" \
      --wall_seconds="$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" >&2
    prediction=null
    if "$bin/tamp" model "$config" --bandwidth "$rate" --topology hosts --codecs config \
         --json \
         >"$work/model.json" 2>"$work/model.err"; then
      prediction=$(cat "$work/model.json")
    else
      echo "scaling.sh: no model column for $name S=$S W=$W:" >&2
      cat "$work/model.err" >&2
    fi
    python3 - "$name" "$S" "$W" "$rate" "$steps" "$warmup" "$memory_warmup" "$work/summary.json" \
      "$work/procs.jsonl" "$prediction" "${events[@]}" >>"$results" <<'PY'
import json, statistics, sys
sys.path.insert(0, "bench")
import proc_sample, tamp_files
name, S, W, rate, steps, warmup, memory_warmup, summary_path, procs_path, prediction = sys.argv[1:11]
summary = tamp_files.read_summary(summary_path)
step_ms, pushed, pulled = [], [], []
split = {k: [] for k in ("encode_ms", "decode_ms", "apply_ms")}
for path in sys.argv[11:]:
    for e in tamp_files.read_events(path):
        if e["kind"] != "STEP" or e["step"] < int(warmup):
            continue
        step_ms.append(e["step_ms"])
        pushed.append(sum(e["step_shard_bytes_pushed"]))
        pulled.append(sum(e["step_shard_bytes_pulled"]))
        for k in split:
            split[k].append(e.get(k, 0.0))
row = {"config": name, "servers": int(S), "workers": int(W), "rate": rate,
       "step_ms_median": statistics.median(step_ms),
       # The median leaves out a few slow steps (stalls on the shared cores); the mean not.
       "step_ms_mean": statistics.mean(step_ms),
       "bytes_pushed_per_step": statistics.median(pushed),
       "bytes_pulled_per_step": statistics.median(pulled),
       "compute_ms_median": summary["compute_ms_median"],
       "wire_ms_median": summary["wire_ms_median"],
       "predicted_step_ms": None, "predicted_wire_ms": None}
row.update({f"{k}_median": statistics.median(v) for k, v in split.items()})
if prediction != "null":
    # `tamp model --codecs config --json`: rows "none" and "config", the config's own codec.
    config_row = [r for r in json.loads(prediction)["codecs"] if r["codec"] == "config"][0]
    if "error" in config_row:
        sys.exit(f"scaling.sh: tamp model: {config_row['error']}")
    row["predicted_step_ms"] = config_row["step_ms"]
    row["predicted_wire_ms"] = config_row["wire_ms"]
    # The timeline through the links alone, and the bound the model puts on the CPU work
    # of every process of the job sharing this machine's cores.
    row["predicted_link_ms"] = config_row["timeline_ms"]
    row["predicted_cpu_bound_ms"] = config_row["cpu_bound_ms"]
    row["predicted_bound"] = config_row["bound"]
# Memory and CPU of every process from the first sample after the memory warm-up to its last.
row["processes"] = proc_sample.summarize(procs_path, int(memory_warmup))
print(json.dumps(row))
PY
    echo "scaling.sh: $name S=$S W=$W done" >&2
  done
done

python3 - "$results" "$steps" "$warmup" "$memory_warmup" "$run_started" "$run_commit" "$command_line" <<'PY'
import json, os, sys
path, steps, warmup, memory_warmup, started, commit, command = sys.argv[1:8]
run = {"started": started, "commit": commit, "command": command, "steps": int(steps), "warmup": int(warmup),
       "memory_warmup": int(memory_warmup),
       "cores": os.cpu_count(), "load_end": " ".join(open("/proc/loadavg").read().split()[:3])}
rows = [dict(json.loads(l), run=run) for l in open(path)]
os.remove(path)
out = "bench/results/scaling.json"
key = lambda r: (r["config"], r["servers"], r["workers"], r["rate"], r["run"]["steps"])
fresh = {key(r) for r in rows}
kept = [r for r in json.load(open(out)) if key(r) not in fresh] if os.path.exists(out) else []
with open(out, "w") as f:
    json.dump(kept + rows, f, indent=1)
    f.write("\n")
PY
python3 bench/scaling_doc.py ${out:+--out "$out"}
