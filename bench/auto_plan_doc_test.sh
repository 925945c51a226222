#!/usr/bin/env bash
# docs/auto.md's generated table is what bench/auto_plan.py makes of bench/results/auto_plan.json.
set -euo pipefail
python3 bench/auto_plan.py --check
