#!/usr/bin/env bash
# tools/tamp/perf_model.cc holds the transport ceiling bench/fit_transport.py fitted to the
# speed table (bench/results/transport_fit.json).
set -euo pipefail
python3 bench/fit_transport.py --check
