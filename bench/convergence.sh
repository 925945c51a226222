#!/usr/bin/env bash
# Convergence table: trains the MLP (3 epochs) and the CNN (1 epoch) of examples/ with
# each push codec of `tamp codecs`, with and without error feedback, evaluating test accuracy
# every few steps, and writes docs/convergence.md (tables, SVG accuracy curves under
# docs/plots/) and bench/results/convergence.json (per config: steps to 0.85, final and
# per-epoch accuracy, bytes per step, compression ratio, accuracy curve, the config itself).
# It also runs each codec at its recommended settings (bench/convergence.py RECOMMENDED; the
# MLP only), tabled first in the doc, and writes each recommended run's exact config, headed
# by its result, to bench/configs/recommended/<codec>.pbtxt.
#
# Usage: bench/convergence.sh [--quick] [--rows ROWS] [--cnn_rows ROWS] [--models M]
#                             [--epochs N] [--cnn_max_steps N] [--rerun] [--report_only]
#   --quick          only the pattern rows (none, topk1 and randomk1 with and without error
#                    feedback) for both models: the published pattern, ~10 runs
#   --rows ROWS      MLP rows: all (default), pattern, recommended (the codecs' rows with
#                    settings of their own, e.g. signsgd_rec), or names such as topk1_ef,fp16
#   --cnn_rows ROWS  CNN rows, as --rows (default all; cnn3 runs only the pattern rows)
#   --models M       comma-separated, of mlp, cnn and cnn3 (the CNN's pattern rows for 3
#                    epochs); default all three
#   --epochs N       every model's epochs (default MLP 3, CNN 1)
#   --cnn_max_steps N  cut the 1-epoch CNN runs at N steps (default 0: no cut)
#   --rerun          rerun runs already in bench/results/convergence.json (by default a run
#                    whose generated config is unchanged is kept, so the script resumes)
#   --report_only    run nothing; rewrite the doc and plots from the JSON
# The reading paragraph of the doc is bench/convergence_reading.md (hand-written).
# Accuracy does not depend on machine load; run time does. On the 2 shared cores an MLP run
# took 100-150 s at load average 5-7 (2026-11-24; 8 to 35 minutes at 13-24), a 1-epoch CNN
# run 64-79 s and a 3-epoch one ~200 s at load ~2 (2026-11-25). So the full set (36 MLP, of
# them 5 recommended rows, 29 CNN and 5 cnn3 runs) takes about 2 h on a quiet machine,
# --quick (15 runs) about 30
# minutes, and a rerun with nothing changed a few seconds (runs whose generated config is
# unchanged are kept).
# Exit status: 0 when every run succeeded, 1 otherwise, 2 on bad usage.
set -euo pipefail

cd "$(dirname "$0")/.."
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) args+=(--rows pattern --cnn_rows pattern); shift ;;
    --rows|--cnn_rows|--models|--epochs|--cnn_max_steps)
      args+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --rerun|--report_only) args+=("$1"); shift ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "convergence.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# The runs use a private copy of the binaries, so that a rebuild in this checkout during the
# (long) runs cannot change them mid-table. --symlink_prefix=/ leaves bazel-bin alone.
echo "convergence.sh: building tamp, tamp_server, tamp_worker (-c opt)" >&2
bazel build -c opt --symlink_prefix=/ //tools/tamp:tamp //server:tamp_server \
  //worker:tamp_worker >&2
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
private=$(mktemp -d)
trap 'rm -rf "$private"' EXIT
cp "$bin/tools/tamp/tamp" "$bin/server/tamp_server" "$bin/worker/tamp_worker" "$private/"

start=$(date +%s)
python3 bench/convergence.py --binaries "$private" "${args[@]}"
echo "convergence.sh: done in $(( $(date +%s) - start )) s" >&2
