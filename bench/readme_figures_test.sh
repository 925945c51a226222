#!/usr/bin/env bash
# README.md's "Measured" block, the examples' "Measured" comments and docs/dgc.md's table are
# what bench/readme_figures.py makes of bench/results/, and each example's settings are those
# of the runs its figures come from: no figure there without its result file, none edited by
# hand or left behind by a rerun.
set -euo pipefail
python3 bench/readme_figures.py --check --readme README.md --results bench/results
