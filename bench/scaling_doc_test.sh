#!/usr/bin/env bash
# docs/scaling.md's tables are what bench/scaling_doc.py makes of bench/results/scaling.json
# (no figure edited by hand or left behind by a rerun), and bench/proc_sample.py's memory
# window is the run's.
set -euo pipefail
python3 bench/scaling_doc.py --check --out docs/scaling.md
python3 bench/proc_sample_test.py
