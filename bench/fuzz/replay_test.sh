#!/usr/bin/env bash
# Replays the fuzz targets' inputs without libFuzzer (bench/fuzz/replay_main.cc), so every
# suite run (and `bazel test --config=asan`) checks them: the payload seeds and config seeds
# fuzz_seeds writes for every registered codec, examples/*.pbtxt and the checked-in
# regression inputs (bench/fuzz/regressions/TARGET/), each whole and cut short.
set -euo pipefail

work="${TEST_TMPDIR:-$(mktemp -d)}"
mkdir -p "$work/payload" "$work/config"
bench/fuzz_seeds "$work/payload" "$work/config"

# fuzz_seeds writes seeds for every codec (a codec it skipped would go unreplayed).
payload_seeds=$(ls "$work/payload" | wc -l)
config_seeds=$(ls "$work/config" | wc -l)
[ "$payload_seeds" -ge 100 ] || { echo "FAIL: only $payload_seeds payload seeds" >&2; exit 1; }
[ "$config_seeds" -ge 30 ] || { echo "FAIL: only $config_seeds config seeds" >&2; exit 1; }

# A target's regression inputs: bench/fuzz/regressions/TARGET/, when it has any.
regressions() { [ ! -d "bench/fuzz/regressions/$1" ] || echo "bench/fuzz/regressions/$1"; }
bench/payload_fuzzer_replay "$work/payload" $(regressions payload)
bench/config_fuzzer_replay "$work/config" examples/*.pbtxt $(regressions config)
