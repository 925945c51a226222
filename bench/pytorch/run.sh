#!/usr/bin/env bash
# PyTorch through Tamp, measured: writes bench/results/pytorch.json and docs/pytorch.md.
#
#   bench/pytorch/run.sh [--rounds 3] [--frontend-rounds 3] [--frontend-steps 150]
#                        [--timed-steps 50] [--links "1gbit 10gbit unshaped"] [--eval-every 50]
#                        [--skip-full] [--report-only]
#
# 1. Front ends (--frontend-rounds rounds, unshaped): the C++ trainer (`tamp run CONFIG`) and
#    the Python example of the config's model (`tamp run CONFIG -- /usr/bin/python3
#    examples/pytorch/mlp.py`, or cnn.py) on the same config, cut at --frontend-steps steps,
#    for examples/mlp_fashion.pbtxt, Tamp's best config and examples/cnn_fashion.pbtxt (shown,
#    not judged: torch's convolutions are not the C++ worker's); the two alternate (which goes
#    first swaps each round). Per-step medians after 20 warm-up steps (step_times.py).
# 2. The same script (bench/pytorch/same_script.py) under DDP over gloo (no hook, fp16 hook,
#    PowerSGD hook, rank 2, one bucket) and through Tamp (TAMP_BEST_CONFIG and mlp_none):
#    --rounds rounds; in each, every link, and at each link every contender in turn, a timed
#    run of --timed-steps steps (the first 20 not timed) inside bench/net/shaped.sh LINK.
#    Then one full run (3 epochs, test accuracy every --eval-every steps) per contender,
#    unshaped, for steps to 0.85 (--skip-full reuses the last ones).
# --report-only runs nothing and rewrites the doc and pytorch.json from the raw results in
# bench/results/pytorch/. About 30 minutes on 2 shared cores with the defaults (half of it
# the full runs); fewer timed steps and rounds than bench/peers to stay near that.
# Needs root (network namespaces; apt for bench/peers/install.sh).
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
rounds=3
frontend_rounds=3
frontend_steps=150
timed_steps=50
links="1gbit 10gbit unshaped"
eval_every=50
skip_full=0
report_only=0
readonly skip_steps=20          # Warm-up, as bench/peers (PowerSGD compresses from step 10).
readonly best_config=mlp_dgc1_ef_pulltopk1  # Tamp's fastest to 0.85 at 1 Gbit/s (docs/peers.md).
readonly frontend_configs="examples/mlp_fashion.pbtxt bench/configs/$best_config.pbtxt examples/cnn_fashion.pbtxt"
# Shown, not judged against the 10% target: their compute differs between the front ends
# (the C++ worker's CPU convolutions against torch's).
readonly frontend_unjudged="examples/cnn_fashion.pbtxt"
readonly contenders="ddp_none ddp_fp16 ddp_powersgd tamp_$best_config tamp_mlp_none"
usage() { sed -n 2,24p "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="${2:?--rounds needs a number}"; shift 2 ;;
    --frontend-rounds) frontend_rounds="${2:?--frontend-rounds needs a number}"; shift 2 ;;
    --frontend-steps) frontend_steps="${2:?--frontend-steps needs a number}"; shift 2 ;;
    --timed-steps) timed_steps="${2:?--timed-steps needs a number}"; shift 2 ;;
    --links) links="${2:?--links needs a list}"; shift 2 ;;
    --eval-every) eval_every="${2:?--eval-every needs a number}"; shift 2 ;;
    --skip-full) skip_full=1; shift ;;
    --report-only) report_only=1; shift ;;
    -h|--help) usage ;;
    *) echo "$0: unknown argument '$1'" >&2; usage ;;
  esac
done
for number in "$rounds" "$frontend_rounds" "$frontend_steps" "$timed_steps" "$eval_every"; do
  [[ "$number" =~ ^[1-9][0-9]*$ ]] || { echo "$0: counts must be positive integers, got '$number'" >&2; exit 2; }
done
for steps in "$timed_steps" "$frontend_steps"; do
  [ "$steps" -gt "$skip_steps" ] || { echo "$0: step counts must exceed $skip_steps (warm-up)" >&2; exit 2; }
done

raw="$repo/bench/results/pytorch"
report() {
  /usr/bin/python3 "$repo/bench/pytorch/report.py" --raw-dir "$raw" --results "$repo/bench/results" \
    --doc "$repo/docs/pytorch.md"
}
if [ "$report_only" -eq 1 ]; then report; exit; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "$0: needs root: bench/net/shaped.sh creates network namespaces" >&2
  exit 77
fi

# shellcheck source=bench/openblas_env.sh
source "$repo/bench/openblas_env.sh"  # The same OpenBLAS kernels for every process.
blas="$("$repo/bench/peers/install.sh")"
echo "$blas" >&2

# A private copy of the binaries and of the Python package, so a rebuild in this checkout
# during the runs cannot change them; -c opt as bench/speed_table.sh.
echo "run.sh: building tamp, tamp_server, tamp_worker and the Python package (-c opt)" >&2
(cd "$repo" && bazel build -c opt --symlink_prefix=/ //tools/tamp:tamp //server:tamp_server \
  //worker:tamp_worker //python:tamp >&2)
bin=$(cd "$repo" && bazel info -c opt bazel-bin 2>/dev/null)
private=$(mktemp -d)
trap 'rm -rf "$private"' EXIT
mkdir -p "$private/bin" "$private/python/tamp"
cp "$bin/tools/tamp/tamp" "$bin/server/tamp_server" "$bin/worker/tamp_worker" "$private/bin/"
cp "$repo"/python/tamp/*.py "$bin/python/tamp/_tamp.so" "$private/python/tamp/"
export TAMP_SERVER_BINARY="$private/bin/tamp_server" TAMP_WORKER_BINARY="$private/bin/tamp_worker"
export PYTHONPATH="$private/python"
tamp="$private/bin/tamp"
logs="$private/logs"
mkdir -p "$logs" "$raw"

# CONFIG cut at STEPS steps (training.max_steps), as a file in $private.
cut_config() {
  local out="$private/$(basename "${1%.pbtxt}")_$2.pbtxt"
  sed "s/^training { epochs: 3 }$/training { epochs: 3 max_steps: $2 }/" "$repo/$1" > "$out"
  grep -q "max_steps: $2" "$out" || { echo "$0: $1 has no 'training { epochs: 3 }' line to cut" >&2; exit 1; }
  echo "$out"
}

# One bounded command in a namespace shaped to LINK; its output goes to LOG.
shaped() {  # LIMIT_S LINK LOG COMMAND...
  local limit="$1" link="$2" log="$3"; shift 3
  timeout -k 10 "$limit" "$repo/bench/net/shaped.sh" "$link" -- "$@" > "$log" 2>&1 ||
    { echo "run.sh: failed ($log):" >&2; tail -5 "$log" >&2; return 1; }
}

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
started=$SECONDS
# What was measured: the commit, and whether the tree differed from it when the run began
# (afterwards this run's own results differ).
run_commit="$(git -C "$repo" rev-parse --short HEAD)"
git -C "$repo" diff --quiet HEAD || run_commit="$run_commit (with uncommitted changes)"

# --- 1. C++ trainer against the Python example, same config, alternating ---------------
rm -f "$raw"/frontend_*.json
frontend_run() {  # FRONTEND CONFIG ROUND
  local frontend="$1" config="$2" round="$3" name
  name="$(basename "${config%.pbtxt}")"
  local script=mlp.py  # The example of the config's model.
  [[ "$name" == cnn_* ]] && script=cnn.py
  local cut out="$raw/frontend_${name}_${frontend}_$round.json" log="$logs/frontend_${name}_${frontend}_$round.log"
  cut="$(cut_config "$config" "$frontend_steps")"
  echo "== front ends, round $round: $frontend, $name" >&2
  if [ "$frontend" = cpp ]; then
    shaped 600 unshaped "$log" "$tamp" run "$cut" --metrics_file="$private/metrics.jsonl" \
      --summary_json="$private/summary.json"
    /usr/bin/python3 "$repo/bench/pytorch/step_times.py" cpp "$private/metrics.jsonl" \
      --skip "$skip_steps" --label "$name round $round" --output "$out" >&2
  else
    rm -rf "$private/timing" && mkdir "$private/timing"
    shaped 600 unshaped "$log" "$tamp" run "$cut" --summary_json="$private/summary.json" -- \
      /usr/bin/python3 "$repo/examples/pytorch/$script" --timing "$private/timing"
    /usr/bin/python3 "$repo/bench/pytorch/step_times.py" python "$private/timing" \
      --skip "$skip_steps" --label "$name round $round" --output "$out" >&2
  fi
}
for round in $(seq 1 "$frontend_rounds"); do
  order="cpp python"
  [ $((round % 2)) -eq 0 ] && order="python cpp"
  for config in $frontend_configs; do
    for frontend in $order; do frontend_run "$frontend" "$config" "$round"; done
  done
done

# --- 2. The same script over DDP and through Tamp -----------------------------------------
contender_run() {  # CONTENDER LINK OUTPUT LIMIT_S ARGS...
  local contender="$1" link="$2" out="$3" limit="$4"; shift 4
  local log="$logs/$(basename "${out%.json}").log" script="$repo/bench/pytorch/same_script.py"
  echo "== $link: $contender $*" >&2
  case "$contender" in
    ddp_powersgd)
      shaped "$limit" "$link" "$log" /usr/bin/python3 "$script" --backend ddp --hook powersgd \
        --powersgd-rank 2 --one-bucket --output "$out" --skip-steps "$skip_steps" "$@" ;;
    ddp_*)
      shaped "$limit" "$link" "$log" /usr/bin/python3 "$script" --backend ddp \
        --hook "${contender#ddp_}" --output "$out" --skip-steps "$skip_steps" "$@" ;;
    tamp_*)
      shaped "$limit" "$link" "$log" "$tamp" run "$repo/bench/configs/${contender#tamp_}.pbtxt" \
        --summary_json="$private/summary.json" -- \
        /usr/bin/python3 "$script" --backend tamp --output "$out" --skip-steps "$skip_steps" "$@" ;;
  esac || [ -s "$out" ] ||  # A failed run's own JSON says why; else the log's last line.
    printf '{"error": "run failed: %s"}\n' "$(tail -1 "$log" | tr -d '"\\')" > "$out"
}
rm -f "$raw"/timed_*.json
for round in $(seq 1 "$rounds"); do
  for link in $links; do
    for contender in $contenders; do
      contender_run "$contender" "$link" "$raw/timed_${contender}_${link}_$round.json" 300 \
        --max-steps "$timed_steps"
    done
  done
done
if [ "$skip_full" -eq 0 ]; then
  for contender in $contenders; do
    contender_run "$contender" unshaped "$raw/full_$contender.json" 900 --eval-every "$eval_every"
  done
fi
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

# What report.py needs to know about this run besides the runs' own JSON.
/usr/bin/python3 -c 'import json, sys
json.dump(dict(zip(sys.argv[2::2], sys.argv[3::2])), open(sys.argv[1], "w"), indent=1)' \
  "$raw/run.json" date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
  commit "$run_commit" \
  cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" \
  cores "$(getconf _NPROCESSORS_ONLN)" \
  blas "$blas" load_average_start "$load_start" load_average_end "$load_end" \
  runtime_s "$((SECONDS - started))" links "$links" contenders "$contenders" \
  best_config "$best_config" rounds "$rounds" timed_steps "$timed_steps" skip_steps "$skip_steps" \
  eval_every "$eval_every" full_runs_reused "$skip_full" frontend_rounds "$frontend_rounds" \
  frontend_steps "$frontend_steps" frontend_configs "$frontend_configs" \
  frontend_unjudged "$frontend_unjudged"
report
