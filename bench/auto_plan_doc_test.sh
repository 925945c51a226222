#!/usr/bin/env bash
# docs/auto.md's generated tables are what bench/auto_plan.py and bench/auto_vs.py make of
# bench/results/auto_plan.json and auto_vs.json.
set -euo pipefail
python3 bench/auto_plan.py --check
python3 bench/auto_vs.py --check
