#!/usr/bin/env bash
# Every C++/CUDA source of the layer folders against docs/architecture.md's layer table; and
# the checker itself on a wrong include, so that a checker that passes everything fails here.
set -euo pipefail
sources=$(find -L base bench compress job kernels optim proto protocol python server tools worker \
            -type f \( -name '*.cc' -o -name '*.cu' -o -name '*.cuh' -o -name '*.h' \) | sort)
python3 tests/layers.py docs/architecture.md $sources

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/compress" "$scratch/server" "$scratch/worker" "$scratch/base"
printf '#include "job/config.h"\n' > "$scratch/compress/upward.cc"
printf '#include "worker/client.h"\n' > "$scratch/server/peer.cc"
printf '#include "server/shard.h"\n' > "$scratch/worker/peer_test.cc"
printf '#include "base/philox.h"\n' > "$scratch/base/own.h"
if out=$(python3 tests/layers.py docs/architecture.md "$scratch"/*/*); then
  echo "FAIL: the checker passed an upward and a peer include"; exit 1
fi
grep -q 'compress/upward.cc:1: compress/ (rank 5) includes job/ (rank 6)' <<<"$out" ||
  { echo "FAIL: upward include not named: $out"; exit 1; }
grep -q 'server/peer.cc:1: server/ (rank 8) includes worker/ (rank 8)' <<<"$out" ||
  { echo "FAIL: peer include not named: $out"; exit 1; }
if grep -q 'peer_test.cc\|own.h' <<<"$out"; then
  echo "FAIL: a peer include from a test, or an own-folder include, was refused: $out"; exit 1
fi
echo "PASS"
