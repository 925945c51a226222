#!/usr/bin/env bash
# models/*.layout and *.profile are what models/make_layouts.py writes: none edited by hand.
set -euo pipefail
python3 models/make_layouts.py --check
