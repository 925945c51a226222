#!/usr/bin/env bash
# Speed table: for each config of bench/configs/ and each link, runs the job for a few steps
# inside bench/net/shaped.sh (a network namespace whose loopback is shaped with tc, so all of
# the job's traffic shares one link) and writes docs/speed.md (steps/s, the per-step split
# compute/encode/wire/decode/apply, bytes per step, time to 0.85 test accuracy, the 5x check
# of top-k 1% + error feedback against none at 1 Gbit/s) and bench/results/speed.json
# (format: bench/speed_table.py). Needs root (network namespaces, tc).
#
# Usage: bench/speed_table.sh [--links L] [--configs C] [--steps N] [--warmup W] [--binaries D]
#                             [--json F] [--doc F] [--report_only]
#   --links L     comma-separated tc rates or "unshaped" (default 1gbit,10gbit,unshaped)
#   --configs C   comma-separated names of bench/configs/*.pbtxt (default: all of them)
#   --steps N     steps per run (default 70); --warmup W: first steps not counted (default 20),
#                 the window of the DDP peers (bench/peers/run_peers.sh)
#   --binaries D  use tamp, tamp_server and tamp_worker from folder D instead of building
#                 them (bazel build -c opt) and running a private copy
#   --json F, --doc F  write the results and the doc there instead (default
#                 bench/results/speed.json, docs/speed.md)
#   --report_only run nothing: rewrite docs/speed.md from bench/results/speed.json (e.g.
#                 after bench/speed_reading.md, the doc's hand-written part, changed)
# Time to target needs bench/results/convergence.json (bench/convergence.sh); without it
# that column stays empty. Timing figures depend on machine load: run it on a quiet machine
# (the doc records the load average). 15 configs x 3 links take ~6 minutes on 2 cores.
# Exit status: 0 when every run succeeded, 1 otherwise, 2 on bad usage, 77 without root.
set -euo pipefail

cd "$(dirname "$0")/.."
command_line="bench/speed_table.sh $*"
args=()
binaries=""
while [ $# -gt 0 ]; do
  case "$1" in
    --links|--configs|--steps|--warmup|--json|--doc) args+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --binaries) binaries="${2:?--binaries needs a folder}"; shift 2 ;;
    --report_only) exec python3 bench/speed_table.py --report_only ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "speed_table.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "speed_table.sh: needs root: bench/net/shaped.sh creates network namespaces and shapes them with tc" >&2
  exit 77
fi

# The workers' GEMMs on the CPU's own kernels, not OpenBLAS's SSE3 fallback (4x slower).
# shellcheck source=bench/openblas_env.sh
source bench/openblas_env.sh

if [ -z "$binaries" ]; then
  # The runs use a private copy of the binaries, so that a rebuild in this checkout during
  # the runs cannot change them mid-table. --symlink_prefix=/ leaves bazel-bin alone.
  echo "speed_table.sh: building tamp, tamp_server, tamp_worker (-c opt)" >&2
  bazel build -c opt --symlink_prefix=/ //tools/tamp:tamp //server:tamp_server \
    //worker:tamp_worker >&2
  bin=$(bazel info -c opt bazel-bin 2>/dev/null)
  binaries=$(mktemp -d)
  trap 'rm -rf "$binaries"' EXIT
  cp "$bin/tools/tamp/tamp" "$bin/server/tamp_server" "$bin/worker/tamp_worker" "$binaries/"
fi

python3 bench/speed_table.py --binaries "$binaries" --command "$command_line" "${args[@]}"
