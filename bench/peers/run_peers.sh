#!/usr/bin/env bash
# PyTorch DDP peers of Tamp's reference MLP job on the same links: trains the MLP with DDP
# over gloo (2 ranks) with no hook, the fp16 hook and the PowerSGD hook, each inside
# bench/net/shaped.sh at every link, and writes bench/results/peers.json and docs/peers.md.
#
#   bench/peers/run_peers.sh [--links "1gbit 10gbit unshaped"] [--hooks "none fp16 powersgd"]
#                            [--timed-steps 70] [--eval-every 50] [--powersgd-rank 2]
#                            [--head-to-head 5] [--tamp-config mlp_dgc1_ef_pulltopk1]
#                            [--skip-full] [--report-only]
#
# Per hook: one short timed run at each link (steps/s, bytes on the link) and one full
# 3-epoch run unshaped with test accuracy every --eval-every steps (accuracy curve, steps to
# 0.85). Training is synchronous, so the trajectory does not depend on the link:
# time to 0.85 at a link = steps to 0.85 (full run) x median step time at that link.
# --powersgd-rank: the PowerSGD hook's rank (default 2, as in Tamp's
# bench/configs/mlp_powersgd2_ef.pbtxt; the hook's own default is 1).
# --head-to-head R: then R rounds, unshaped, each a timed run of Tamp's --tamp-config
# (bench/speed_table.sh, the same steps and warm-up) followed by one of DDP without a hook,
# so both see the same machine, round by round; the doc compares their medians (0: none).
# Tamp's binaries are built as for bench/speed_table.sh.
# --skip-full reuses the full runs already in bench/results/peers/ (reruns timing only);
# --report-only runs nothing and rewrites the doc and peers.json from the raw results, e.g.
# once bench/results/speed.json and convergence.json (Tamp's figures) exist.
# Raw per-run results: bench/results/peers/HOOK_LINK.json and HOOK_full.json.
# Needs root (network namespaces; apt for bench/peers/install.sh). Idempotent.
set -euo pipefail

repo="$(cd "$(dirname "$0")/../.." && pwd)"
links="1gbit 10gbit unshaped"
hooks="none fp16 powersgd"
timed_steps=70
eval_every=50
powersgd_rank=2
head_to_head=5
tamp_config=mlp_dgc1_ef_pulltopk1
skip_full=0
report_only=0
usage() { sed -n 2,25p "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --links) links="${2:?--links needs a list}"; shift 2 ;;
    --hooks) hooks="${2:?--hooks needs a list}"; shift 2 ;;
    --timed-steps) timed_steps="${2:?--timed-steps needs a number}"; shift 2 ;;
    --eval-every) eval_every="${2:?--eval-every needs a number}"; shift 2 ;;
    --powersgd-rank) powersgd_rank="${2:?--powersgd-rank needs a number}"; shift 2 ;;
    --head-to-head) head_to_head="${2:?--head-to-head needs a number}"; shift 2 ;;
    --tamp-config) tamp_config="${2:?--tamp-config needs a name}"; shift 2 ;;
    --skip-full) skip_full=1; shift ;;
    --report-only) report_only=1; shift ;;
    -h|--help) usage ;;
    *) echo "$0: unknown argument '$1'" >&2; usage ;;
  esac
done
for number in "$timed_steps" "$eval_every" "$powersgd_rank"; do
  [[ "$number" =~ ^[1-9][0-9]*$ ]] || { echo "$0: step counts must be positive integers, got '$number'" >&2; exit 2; }
done
[[ "$head_to_head" =~ ^[0-9]+$ ]] || { echo "$0: --head-to-head takes a number of rounds, got '$head_to_head'" >&2; exit 2; }
[ "$head_to_head" -eq 0 ] || [ -f "$repo/bench/configs/$tamp_config.pbtxt" ] ||
  { echo "$0: --tamp-config: no bench/configs/$tamp_config.pbtxt" >&2; exit 2; }
# Step times leave out the first 20 steps: warm-up, and PowerSGD starts compressing at 10.
readonly skip_steps=20
[ "$timed_steps" -gt "$skip_steps" ] || { echo "$0: --timed-steps must exceed $skip_steps (warm-up)" >&2; exit 2; }

# shellcheck source=bench/openblas_env.sh
source "$repo/bench/openblas_env.sh"  # The kernels Tamp's workers use in bench/speed_table.sh.
raw="$repo/bench/results/peers"
report() {
  /usr/bin/python3 "$repo/bench/peers/report.py" --raw-dir "$raw" --results "$repo/bench/results" \
    --doc "$repo/docs/peers.md"
}
if [ "$report_only" -eq 1 ]; then report; exit; fi

logs="${TMPDIR:-/tmp}/tamp_peers_logs"  # The ranks' stderr, for an aborting hook's message.
mkdir -p "$raw" "$logs"
blas="$("$repo/bench/peers/install.sh")"
echo "$blas" >&2

# PowerSGD runs with one DDP bucket: with DDP's default buckets it aborts under gloo
# (recorded by the powersgd_default_buckets run below).
hook_flags() {
  if [ "$1" = powersgd ]; then echo --one-bucket --powersgd-rank "$powersgd_rank"; fi
}

# Every run is bounded: a short timed run by 300 s, a full run by 1800 s (each takes well under
# a third of that on 2 cores). PowerSGD with DDP's default buckets has been seen to hang
# instead of aborting; `timeout` then kills the run's whole process group (both ranks) and
# the run's JSON records the hang.
train() {  # LIMIT_S LINK OUTPUT ARGS...: one ddp_mlp.py run inside a namespace shaped to LINK.
  local limit="$1" link="$2" output="$3"; shift 3
  echo "== $link: $*" >&2
  local status=0
  timeout -k 10 "$limit" "$repo/bench/net/shaped.sh" "$link" -- \
    /usr/bin/python3 "$repo/bench/peers/ddp_mlp.py" --output "$output" --skip-steps "$skip_steps" "$@" \
    2> "$logs/$(basename "${output%.json}").stderr" || status=$?
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    printf '{\n "hook": "%s",\n "error": "hung: killed after %s s without finishing",\n "torch_version": "%s"\n}\n' \
      "$(sed -n 's/.*--hook \([a-z0-9]*\).*/\1/p' <<< "$*")" "$limit" \
      "$(/usr/bin/python3 -c 'import torch; print(torch.__version__)')" > "$output"
  fi
  [ "$status" -eq 0 ] || echo "run_peers.sh: that run failed; its error is in $output" >&2
}

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
started=$SECONDS
# What was measured: the commit, and whether the tree differed from it when the run began
# (afterwards this run's own results differ).
run_commit="$(git -C "$repo" rev-parse --short HEAD)"
git -C "$repo" diff --quiet HEAD || run_commit="$run_commit (with uncommitted changes)"
for hook in $hooks; do
  for link in $links; do
    # shellcheck disable=SC2046
    train 300 "$link" "$raw/${hook}_${link}.json" --hook "$hook" $(hook_flags "$hook") --max-steps "$timed_steps"
  done
done
if [[ " $hooks " == *" powersgd "* ]]; then
  train 300 unshaped "$raw/powersgd_default_buckets.json" --hook powersgd \
    --powersgd-rank "$powersgd_rank" --max-steps "$timed_steps"
fi
if [ "$skip_full" -eq 0 ]; then
  for hook in $hooks; do
    # shellcheck disable=SC2046
    train 1800 unshaped "$raw/${hook}_full.json" --hook "$hook" $(hook_flags "$hook") --eval-every "$eval_every"
  done
fi
rm -f "$raw"/head_to_head_*.json
for round in $(seq 1 "$head_to_head"); do
  echo "== head to head, round $round of $head_to_head: Tamp $tamp_config, then DDP without a hook" >&2
  "$repo/bench/speed_table.sh" --configs "$tamp_config" --links unshaped --steps "$timed_steps" \
    --warmup "$skip_steps" --json "$raw/head_to_head_tamp_$round.json" \
    --doc "$logs/head_to_head_tamp_$round.md" > "$logs/head_to_head_tamp_$round.log" 2>&1 ||
    { echo "run_peers.sh: Tamp's run failed: $logs/head_to_head_tamp_$round.log" >&2; exit 1; }
  train 300 unshaped "$raw/head_to_head_ddp_$round.json" --hook none --max-steps "$timed_steps"
done
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

# What report.py needs to know about this run besides the runs' own JSON.
/usr/bin/python3 -c 'import json, sys
json.dump(dict(zip(sys.argv[2::2], sys.argv[3::2])), open(sys.argv[1], "w"), indent=1)' \
  "$raw/run.json" date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
  commit "$run_commit" \
  cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" \
  cores "$(getconf _NPROCESSORS_ONLN)" \
  links "$links" hooks "$hooks" blas "$blas" load_average_start "$load_start" \
  load_average_end "$load_end" runtime_s "$((SECONDS - started))" timed_steps "$timed_steps" \
  skip_steps "$skip_steps" eval_every "$eval_every" full_runs_reused "$skip_full" \
  head_to_head_rounds "$head_to_head" head_to_head_tamp_config "$tamp_config"
report
