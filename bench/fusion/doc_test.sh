#!/usr/bin/env bash
# docs/fusion.md and bench/results/fusion.json against bench/results/fusion/ (report.py --check).
set -euo pipefail
python3 bench/fusion/report.py --check bench/results/fusion bench/results/fusion.json docs/fusion.md
