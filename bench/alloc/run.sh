#!/usr/bin/env bash
# Allocation bench (issue 18): minor page faults, CPU time and step time per step of a whole
# job (2 servers, 2 workers, the launcher), before and after the allocation work, in one
# run with the two alternating. "Before" is the tree of a base revision, exported and built
# in its own Bazel output base; "after" is this checkout. Both run under this checkout's
# launcher. Writes bench/results/alloc.json and docs/alloc.md (format: bench/alloc/alloc_bench.py).
#
# Usage: bench/alloc/run.sh [--base REV] [--reps N] [--steps SHORT,LONG] [--configs C]
#                           [--json F] [--doc F] [--report_only]
#   --base REV     the "before" revision (default: the parent of the commit that added
#                  server/shard_alloc_test.cc, the first fix of issue 18)
#   --reps N       rounds of before/after, alternating which goes first (default 5)
#   --steps S,L    each measurement runs the job for S and for L steps; per-step figures are
#                  the difference over L - S steps, free of start-up (default 50,300)
#   --configs C    comma-separated configs (default bench/configs/mlp_topk1_ef.pbtxt, raw pull,
#                  and bench/configs/mlp_dgc1_ef_pulltopk1.pbtxt, top-k 1% pull)
#   --json F, --doc F  write there instead of bench/results/alloc.json, docs/alloc.md
#   --report_only  run nothing: rewrite the doc from the JSON
# Timing figures depend on machine load (the doc records the load average); fault counts
# do not. About 10 minutes on 2 cores with the defaults.
set -euo pipefail

cd "$(dirname "$0")/../.."
command_line="bench/alloc/run.sh $*"
base=""
report_only=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base="${2:?--base needs a revision}"; shift 2 ;;
    --reps|--steps|--configs|--json|--doc) args+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --report_only) report_only=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "alloc/run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$report_only" -eq 1 ]; then
  exec python3 bench/alloc/alloc_bench.py --report_only "${args[@]}"
fi
if [ -z "$base" ]; then
  first_fix=$(git log --format=%H --diff-filter=A -- server/shard_alloc_test.cc | tail -1)
  if [ -z "$first_fix" ]; then
    echo "alloc/run.sh: server/shard_alloc_test.cc is not in this history; pass --base REV" >&2
    exit 2
  fi
  base="${first_fix}^"
fi
base=$(git rev-parse --verify "$base^{commit}")

# shellcheck source=bench/openblas_env.sh
source bench/openblas_env.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/after" "$work/before" "$work/src"

# After: private copies, so that a rebuild in this checkout cannot change them mid-run.
# --symlink_prefix=/ leaves bazel-bin alone.
echo "alloc/run.sh: building this checkout (-c opt)" >&2
bazel build -c opt --symlink_prefix=/ //tools/tamp:tamp //server:tamp_server \
  //worker:tamp_worker >&2
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
cp "$bin/tools/tamp/tamp" "$bin/server/tamp_server" "$bin/worker/tamp_worker" "$work/after/"

# Before: the base tree in a folder of its own (so its own output base; the shared disk
# cache serves what was built before), removed again afterwards.
echo "alloc/run.sh: building ${base:0:7} (-c opt) in $work/src" >&2
git archive "$base" | tar -x -C "$work/src"
(
  cd "$work/src"
  bazel build -c opt --symlink_prefix=/ //server:tamp_server //worker:tamp_worker >&2
  base_bin=$(bazel info -c opt bazel-bin 2>/dev/null)
  cp "$base_bin/server/tamp_server" "$base_bin/worker/tamp_worker" "$work/before/"
  bazel clean --expunge >&2 2>/dev/null
)

python3 bench/alloc/alloc_bench.py --launcher "$work/after/tamp" --before "$work/before" \
  --after "$work/after" --base "$base" --work "$work" --command "$command_line" "${args[@]}"
