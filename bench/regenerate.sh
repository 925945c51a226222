#!/usr/bin/env bash
# Regenerates every benchmark table and plot in docs/ from fresh runs, in dependency order:
#   1. docs/codec_bench.md    bench/codec_table.sh                  codec throughput (~3 min)
#   2. docs/convergence.md    bench/convergence.sh                  accuracy per codec, plots
#                                                                   (~1 h 45; --quick ~30 min)
#   3. docs/speed.md          bench/speed_table.sh                  steps/s on shaped links (~5 min)
#   4. docs/peers.md          bench/peers/run_peers.sh              PyTorch DDP peers (~15 min)
#   5. docs/perf_model.md     bench/model_vs_measured.py --calibration_job   model vs speed table (~3 min)
#   6. docs/scaling.md        bench/scaling.sh                      emulated hosts (~5 min)
#   7. docs/pytorch.md        bench/pytorch/run.sh                  one PyTorch script over DDP or
#                                                                   Tamp; Python against C++ (~20 min)
# then rewrites the speed and peers docs once more, so that each shows the others' latest
# figures (time to target needs the convergence runs; peers compare with Tamp's rows), and
# README.md's "Measured" figures from all of them (bench/readme_figures.py).
#
#   bench/regenerate.sh [--quick] [--only "codec convergence speed peers model scaling pytorch"]
#
# --quick runs the convergence pattern rows only and reuses the peers' and bench/pytorch's
# full accuracy runs (timing runs are redone). Needs root (network namespaces, tc, apt for
# the peers' torch).
# Run on an otherwise idle machine: every figure but accuracy depends on load, and each doc
# records the load average it saw.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 only="codec convergence speed peers model scaling pytorch"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "regenerate.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "regenerate.sh: needs root (network namespaces, tc)" >&2; exit 77; }
wants() { [[ " $only " == *" $1 "* ]]; }
step() { echo; echo "=== regenerate: $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"; }

if wants codec; then step codec; bench/codec_table.sh --out docs/codec_bench.md >/dev/null; fi
if wants convergence; then
  step convergence
  if [ "$quick" -eq 1 ]; then bench/convergence.sh --quick; else bench/convergence.sh; fi
fi
if wants speed; then step speed; bench/speed_table.sh; fi
if wants peers; then
  step peers
  bench/peers/install.sh
  if [ "$quick" -eq 1 ]; then bench/peers/run_peers.sh --skip-full; else bench/peers/run_peers.sh; fi
fi
if wants model; then step model; bench/model_vs_measured.py --calibration_job; fi
if wants scaling; then step scaling; bench/scaling.sh --out docs/scaling.md >/dev/null; fi
if wants pytorch; then
  step pytorch
  if [ "$quick" -eq 1 ]; then bench/pytorch/run.sh --skip-full; else bench/pytorch/run.sh; fi
fi
step "cross-references"
bench/speed_table.sh --report_only
bench/peers/run_peers.sh --report-only
bench/readme_figures.py
echo "regenerate: done; docs/*.md, README.md's figures and bench/results/ rewritten"
