#!/usr/bin/env bash
# Installs dependencies and runs the whole test suite with Bazel, then runs it again under
# AddressSanitizer + UBSan (--config=asan, its own output tree; TAMP_TEST_SANITIZERS=0
# skips that pass). Extra arguments go to both `bazel test` commands. Ends with one line
# "N passed, N failed" (test targets, both passes summed) and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh || exit 1

total_passed=0
total_failed=0
# run_suite ARGS...: `bazel test ARGS //...`; adds its passed and failed targets to the totals.
run_suite() {
  local log status passed failed
  log=$(mktemp)
  bazel test --test_summary=short --jobs="$(nproc)" "$@" //... 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(PASSED|FLAKY)' "$log")
  failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FAILED TO BUILD)' "$log")
  rm -f "$log"
  if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1  # The build itself failed before any test ran.
  fi
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
}

run_suite "$@"
if [ "${TAMP_TEST_SANITIZERS:-1}" != 0 ]; then
  echo "test.sh: the suite again under AddressSanitizer + UBSan (TAMP_TEST_SANITIZERS=0 skips it)"
  # --symlink_prefix=/ leaves bazel-bin pointing at the normal build. --build_tests_only:
  # binaries no test runs (benchmarks, tools) were built by the normal pass; built again
  # sanitized they would only cost CI's time.
  run_suite --config=asan --symlink_prefix=/ --build_tests_only "$@"
fi
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
