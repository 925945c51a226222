#!/usr/bin/env bash
# Installs dependencies and runs the whole test suite with Bazel. Ends with one line
# "N passed, N failed" (test targets) and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh || exit 1

log=$(mktemp)
bazel test --test_summary=short --jobs="$(nproc)" "$@" //... 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(PASSED|FLAKY)' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FAILED TO BUILD)' "$log")
rm -f "$log"
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  failed=1  # The build itself failed before any test ran.
fi
echo "$passed passed, $failed failed"
[ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
