#!/usr/bin/env bash
# `bazel test --config=tsan` runs each test under this (.bazelrc: --run_under): it adds
# tools/tsan.supp, by absolute path, to TSAN_OPTIONS, which the test and every process it
# starts inherit. The test runs in its runfiles root, where this target's data lies.
set -euo pipefail
export TSAN_OPTIONS="${TSAN_OPTIONS:-}${TSAN_OPTIONS:+:}suppressions=$PWD/tools/tsan.supp"
exec "$@"
