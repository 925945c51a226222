#!/usr/bin/env bash
# README.md's "Measured" block is what bench/readme_figures.py makes of bench/results/: no
# figure there without its result file, none edited by hand or left behind by a rerun.
set -euo pipefail
python3 bench/readme_figures.py --check --readme README.md --results bench/results
