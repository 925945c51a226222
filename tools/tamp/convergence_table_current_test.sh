#!/usr/bin/env bash
# tools/tamp/convergence_table.cc is what make_convergence_table.py makes of
# bench/results/convergence.json: auto's accuracy rule reads the current table.
set -euo pipefail
python3 tools/tamp/make_convergence_table.py --check
