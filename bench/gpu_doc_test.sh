#!/usr/bin/env bash
# docs/gpu.md's measured block against bench/results/gpu/ (bench/gpu/report.py --check).
set -euo pipefail
python3 bench/gpu/report.py --check
