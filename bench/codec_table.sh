#!/usr/bin/env bash
# Builds //bench:codec_bench with -c opt, runs it (JSON, 5 repetitions) and prints a Markdown
# table of the medians: per codec and chunk size n, encode and decode GB/s of fp32 input,
# both as a ratio to memcpy of the same 4n bytes in the same run, the payload size, the
# compression ratio 4n / payload, and PASS/FAIL against issue 3's encode targets on one core:
#   elementwise codecs (fp16, bf16, qsgd, terngrad, signsgd, efsign, natural, maxmin):
#                                         encode >= 0.25x memcpy
#   dgc, threshold, randomk, randomblock: encode >= 0.25x memcpy
#   topk (exact top-k):                   encode >= 0.05x memcpy
#   any other codec:                      reported only
# The codecs are whatever compress::ListCodecs() holds when the benchmark runs; the targets
# above only classify the names they know.
#
# Usage: bench/codec_table.sh [--out FILE] [--repetitions N] [--min_time SECONDS]
#                             [--json FILE] [--report_only] [-- EXTRA_BENCHMARK_FLAGS...]
#   --out FILE        also write the document (machine, date, commit, caveats, table) to FILE,
#                     e.g. docs/codec_bench.md; stdout gets it either way
#   --repetitions N   benchmark repetitions (default 5); the table shows medians
#   --min_time S      seconds per repetition of each benchmark (default 0.2)
#   --json FILE       the raw Google Benchmark JSON, with the run's machine, date, commit and
#                     load under "tamp_run" (default bench/results/codec_bench.json)
#   --report_only     run nothing: make the table from --json
# Exit status: 0 when the table was made (FAIL rows included), 1 when building or running
# the benchmark failed. Needs bazel and python3. Runtime: about 2-4 minutes on 2 cores.
set -euo pipefail

cd "$(dirname "$0")/.."
out="" json=bench/results/codec_bench.json repetitions=5 min_time=0.2 report_only=0
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --repetitions) repetitions=$2; shift 2 ;;
    --min_time) min_time=$2; shift 2 ;;
    --report_only) report_only=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "codec_table.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$report_only" = 0 ]; then
  # --symlink_prefix=/ leaves the bazel-bin convenience link alone (it keeps pointing at the
  # fastbuild tree others use); the opt binary is found through `bazel info`.
  echo "codec_table.sh: building //bench:codec_bench (-c opt)" >&2
  bazel build -c opt --symlink_prefix=/ //bench:codec_bench >&2
  binary="$(bazel info -c opt bazel-bin 2>/dev/null)/bench/codec_bench"
  [ -x "$binary" ] || { echo "codec_table.sh: $binary not built" >&2; exit 1; }
  echo "codec_table.sh: running codec_bench ($repetitions repetitions, ${min_time}s each)" >&2
  start=$(date +%s)
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  "$binary" --benchmark_format=json --benchmark_repetitions="$repetitions" \
    --codec_bench_min_time="$min_time" "${extra[@]}" > "$tmp/raw.json"
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "codec_table.sh: benchmark ran $(( $(date +%s) - start )) s" >&2
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
    commit="$commit (with uncommitted changes in the work tree)"
  fi
  cpu=$(lscpu | sed -n 's/^Model name: *//p')  # One line (per socket kind).
  cpu=${cpu%%$'\n'*}
  python3 - "$tmp/raw.json" "$json" "$commit" "$cpu" "$(nproc)" \
    "$(date -u '+%Y-%m-%d %H:%M UTC')" "$repetitions" "$min_time" "$load_before" \
    "$load_after" <<'PYTHON'
import json
import sys

raw, path, commit, cpu, cores, date, repetitions, min_time, before, after = sys.argv[1:]
with open(raw) as f:
    report = json.load(f)
report["tamp_run"] = {"commit": commit, "cpu": cpu, "cores": int(cores), "date": date,
                      "repetitions": int(repetitions), "min_time": float(min_time),
                      "load_before": before, "load_after": after}
with open(path + ".tmp", "w") as f:
    json.dump(report, f, indent=1)
PYTHON
  mv "$json.tmp" "$json"
fi
[ -f "$json" ] || { echo "codec_table.sh: $json: no such file (run without --report_only)" >&2; exit 1; }

python3 - "$json" > "$tmp/table.md" <<'PYTHON'
import json
import statistics
import sys

with open(sys.argv[1]) as f:
    report = json.load(f)
if "tamp_run" not in report:
    sys.exit(f"codec_table.sh: {sys.argv[1]} lacks tamp_run (not written by this script)")
run = report["tamp_run"]
commit, cpu, cores, date = run["commit"], run["cpu"], run["cores"], run["date"]
repetitions, min_time = run["repetitions"], run["min_time"]
load_before, load_after = run["load_before"], run["load_after"]

# Issue 3's encode targets (fraction of memcpy), by codec name; others: report only.
TARGETS = {name: 0.25 for name in
           ("fp16", "bf16", "qsgd", "terngrad", "signsgd", "efsign", "natural", "maxmin",
            "dgc", "threshold", "randomk", "randomblock")}
TARGETS["topk"] = 0.05

# name: "encode/topk/1048576/min_time:0.200" -> per (op, codec, n): list of repetitions.
runs = {}
errors = {}
specs = {}
order = []
for bench in report["benchmarks"]:
    if bench.get("run_type", "iteration") != "iteration":
        continue
    parts = bench.get("run_name", bench["name"]).split("/")
    if parts[0] == "memcpy":
        op, codec, n = "memcpy", "memcpy", int(parts[1])
    else:
        op, codec, n = parts[0], parts[1], int(parts[2])
    key = (op, codec, n)
    if codec != "memcpy" and (codec, n) not in order:
        order.append((codec, n))
    if bench.get("label"):
        specs.setdefault(codec, bench["label"])
    if bench.get("error_occurred"):
        errors[key] = bench.get("error_message", "error")
        continue
    runs.setdefault(key, []).append(bench)

def median(key, field):
    values = [run[field] for run in runs.get(key, []) if field in run]
    return statistics.median(values) if values else None

def gbps(key):
    value = median(key, "bytes_per_second")
    return None if value is None else value / 1e9

def fmt(value, spec):
    return "-" if value is None else format(value, spec)

ctx = report.get("context", {})
print("# Codec throughput (CPU, one core)")
print()
print("Made by `bench/codec_table.sh --out docs/codec_bench.md` (Google Benchmark "
      "`//bench:codec_bench`, built with `-c opt`) from bench/results/codec_bench.json; rerun "
      "it to refresh this file.")
print()
print(f"- Machine: {cpu}, {cores} cores ({ctx.get('num_cpus', '?')} CPUs at "
      f"{ctx.get('mhz_per_cpu', '?')} MHz as the library saw them)")
print(f"- Date: {date}; load average (1, 5, 15 min) {load_before} before the run, "
      f"{load_after} after")
print(f"- Commit: {commit}")
print(f"- Repetitions: {repetitions} of >= {min_time} s each; every figure is the median")
print("- Data: gradient-like fp32, sigma 0.004 normal with 0.1% outliers x30, fixed seed "
      "(see bench/codec_bench.cc); each codec's `example` spec from the registry")
print("- GB/s: 10^9 bytes of fp32 input (4n) per second of CPU time, for encode and decode "
      "alike; ratios are to memcpy of the same 4n bytes in the same run")
print()
print("Caveats: CPU frequency scaling, turbo, other load on the machine and cache state move "
      "these numbers by 10-30% between runs; compare ratios to memcpy rather than raw GB/s, "
      "and compare raw GB/s only between runs on the same machine. memcpy of 4 MiB "
      "(n = 2^20) runs mostly in cache and of 64 MiB (n = 2^24) in DRAM, so the ratios at the "
      "two sizes differ. randomk and randomblock read only the k values they send, so "
      "their encode GB/s (of the 4n-byte input) exceed memcpy's by far. The benchmark is "
      "single-threaded: the targets are per core. A load average near or above the core "
      "count means other processes shared the cores and the memory bus during the run; "
      "CPU time (not wall time) is used to soften that, but not cache and bandwidth "
      "contention.")
if ctx.get("library_build_type") == "debug":
    print()
    print("Debian's libbenchmark reports itself built as DEBUG; that affects only the "
          "harness, not the code measured (built with -c opt).")
print()
print("Targets (issue 3, encode, one core): elementwise codecs (fp16, bf16, qsgd, terngrad, "
      "signsgd, efsign, natural, maxmin) and dgc, threshold, randomk, randomblock >= 0.25x "
      "memcpy; exact topk >= 0.05x memcpy; other codecs are reported only.")
print()
print("| codec | n | encode GB/s | decode GB/s | encode/memcpy | decode/memcpy | payload bytes "
      "| compression | target | result |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
counts = {"PASS": 0, "FAIL": 0}
for n in sorted({n for _, n in order}):
    memcpy = gbps(("memcpy", "memcpy", n))
    log2 = n.bit_length() - 1
    size = f"2^{log2}" if n == 1 << log2 else str(n)
    print(f"| memcpy | {size} | {fmt(memcpy, '.2f')} | {fmt(memcpy, '.2f')} | 1.00 | 1.00 "
          f"| {4 * n} | 1.00 | | |")
    for codec, n2 in order:
        if n2 != n:
            continue
        enc, dec = gbps(("encode", codec, n)), gbps(("decode", codec, n))
        error = errors.get(("encode", codec, n)) or errors.get(("decode", codec, n))
        enc_ratio = enc / memcpy if enc is not None and memcpy else None
        dec_ratio = dec / memcpy if dec is not None and memcpy else None
        payload = median(("encode", codec, n), "payload_bytes")
        ratio = 4 * n / payload if payload else None
        target = TARGETS.get(codec)
        if error is not None:
            result = "ERROR: " + error.replace("|", "/")
            if target is not None:
                counts["FAIL"] += 1
        elif target is None:
            result = "report only"
        else:
            result = "PASS" if enc_ratio is not None and enc_ratio >= target else "FAIL"
            counts[result] += 1
        target_text = f"enc >= {target:g}x" if target is not None else "-"
        print(f"| {codec} | {size} | {fmt(enc, '.2f')} | {fmt(dec, '.2f')} "
              f"| {fmt(enc_ratio, '.3f')} | {fmt(dec_ratio, '.3f')} "
              f"| {fmt(payload, '.0f')} | {fmt(ratio, '.1f')} | {target_text} | {result} |")
print()
print(f"Targets: {counts['PASS']} PASS, {counts['FAIL']} FAIL.")
if specs:
    print()
    print("Example specs measured (compress/registry.cc):")
    print()
    for codec, spec in specs.items():
        print(f"- {codec}: `{spec}`")
PYTHON

cat "$tmp/table.md"
if [ -n "$out" ]; then
  cp "$tmp/table.md" "$out.tmp.$$" && mv "$out.tmp.$$" "$out"
  echo "codec_table.sh: wrote $out" >&2
fi
