#!/usr/bin/env bash
# docs/pytorch.md against bench/results/pytorch.json (bench/pytorch/report.py --check).
# Debian's python3: report.py shares bench/peers/peers_common.py, which imports torch.
set -euo pipefail
/usr/bin/python3 bench/pytorch/report.py --check --results bench/results --doc docs/pytorch.md
