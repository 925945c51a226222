#!/usr/bin/env bash
# Installs dependencies, builds Tamp and trains an example locally (servers + workers on
# loopback). Usage: tools/train_example.sh [CONFIG] [extra `tamp run` flags]
# Default CONFIG: examples/mlp_fashion.pbtxt. The run's figures land in runs/summary.json.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
config="${1:-examples/mlp_fashion.pbtxt}"
shift || true
bazel build -c opt //tools/tamp:tamp //server:tamp_server //worker:tamp_worker
mkdir -p runs
exec bazel-bin/tools/tamp/tamp run "$config" --summary_json=runs/summary.json "$@"
