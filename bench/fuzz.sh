#!/usr/bin/env bash
# Builds and runs Tamp's libFuzzer targets with clang, AddressSanitizer and UBSan, outside
# Bazel (Bazel 4's toolchain here is gcc; libFuzzer needs clang's -fsanitize=fuzzer):
#   payload  bench/fuzz/payload_fuzzer.cc: every registered codec's Decode/DecodeAdd (and a
#            multi-round codec's DecodeAddRound, and its worker's handling of server
#            answers) on arbitrary payloads; checks the untouched-output-on-error contract
#            and that Decode and DecodeAdd agree
#   config   bench/fuzz/config_fuzzer.cc: ParseConfig -> ApplyDefaults -> ValidateConfig ->
#            BuildJobLayout on arbitrary text
# The sources compiled are those Bazel says the targets depend on (bazel query; a glob of
# compress/, base/, job/, optim/ when bazel is unavailable), so new codecs are fuzzed as soon as
# the registry links them. proto/config.proto is compiled with protoc into the build dir.
# Seeds: valid payloads from each codec's example spec and valid configs (fuzz_seeds), plus
# examples/*.pbtxt; a dictionary of config.proto's field and enum names for the config target.
#
# Usage: bench/fuzz.sh [--seconds N] [--targets "payload config"] [--build_dir DIR]
#                      [--artifacts DIR] [--keep_corpus] [--sequential] [--clean]
#   --seconds N      run each target N seconds (default 60)
#   --targets LIST   which targets (default both)
#   --build_dir DIR  objects, binaries, corpora, logs (default ${TMPDIR:-/tmp}/tamp-fuzz)
#   --artifacts DIR  where crashing inputs are saved (default /tmp/tamp-fuzz-artifacts)
#   --keep_corpus    start from the corpus a previous run grew instead of the seeds alone
#   --sequential     run the targets one after another (default: side by side, one core each)
#   --clean          rebuild every object (objects are reused while their sources and the
#                    project headers they include are unchanged)
# Exit status: 0 when no target crashed, 1 when one did (the crashing input's path is
# printed; reproduce with BUILD_DIR/TARGET_fuzzer INPUT), 2 on a build or usage error.
# Needs clang++ and clang's fuzzer/sanitizer runtimes (Debian: clang, libclang-rt-14-dev;
# installed here with apt-get when missing and running as root), protoc, pkg-config and the
# -dev packages tools/install_deps.sh installs.
set -euo pipefail

cd "$(dirname "$0")/.."
repo=$PWD
seconds=60
targets="payload config"
build_dir="${TMPDIR:-/tmp}/tamp-fuzz"
artifacts=/tmp/tamp-fuzz-artifacts
keep_corpus=0
parallel=1
clean=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --build_dir) build_dir=$2; shift 2 ;;
    --artifacts) artifacts=$2; shift 2 ;;
    --keep_corpus) keep_corpus=1; shift ;;
    --sequential) parallel=0; shift ;;
    --clean) clean=1; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
log() { echo "fuzz.sh: $*" >&2; }
die() { log "$*"; exit 2; }

# ---------------------------------------------------------------------------------------
# Toolchain
CXX=${CXX_FUZZ:-clang++}
toolchain_ok() {
  command -v "$CXX" >/dev/null || return 1
  local probe
  probe=$(mktemp -d)
  {
    echo '#include <cstddef>'
    echo '#include <cstdint>'
    echo 'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }'
  } > "$probe/probe.cc"
  "$CXX" -fsanitize=fuzzer,address,undefined "$probe/probe.cc" -o "$probe/probe" 2>/dev/null
  local ok=$?
  rm -rf "$probe"
  return $ok
}
if ! toolchain_ok; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    log "clang or its fuzzer runtime is missing; installing clang and libclang-rt-14-dev"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq &&
      apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
  fi
  toolchain_ok || die "$CXX cannot link -fsanitize=fuzzer (install clang and libclang-rt-14-dev)"
fi
command -v protoc >/dev/null || die "protoc missing (protobuf-compiler)"
command -v pkg-config >/dev/null || die "pkg-config missing"

# ---------------------------------------------------------------------------------------
# Sources
# sources_of LABEL...: the repository's .cc files the labels depend on, as paths.
sources_of() {
  local expr
  expr=$(printf 'deps(%s) union ' "$@")
  expr=${expr% union }
  local listed=""
  if command -v bazel >/dev/null; then
    listed=$(bazel query "kind('source file', $expr)" 2>/dev/null |
      sed -n 's#^//\([^:]*\):\(.*\.cc\)$#\1/\2#p' || true)
  fi
  if [ -z "$listed" ]; then
    log "bazel query failed; compiling every non-test source of compress/, base/, job/, optim/"
    listed=$(ls compress/*.cc compress/internal/*.cc base/*.cc job/*.cc optim/*.cc 2>/dev/null |
      grep -v '_test\.cc$')
  fi
  # A CUDA twin, should one appear in these packages, is not for this host build.
  for file in $listed; do
    grep -qE 'cuda_runtime|__global__' "$file" || echo "$file"
  done | sort -u
}
payload_sources=$(sources_of //compress:registry)
config_sources=$(sources_of //job:config //job:job_layout)
[ -n "$payload_sources" ] && [ -n "$config_sources" ] || die "no sources found"

# ---------------------------------------------------------------------------------------
# Build
[ "$clean" = 1 ] && rm -rf "$build_dir/obj"
mkdir -p "$build_dir/obj" "$build_dir/gen" "$artifacts"
log "building in $build_dir"
# Regenerated files replace the old ones only when they differ, so objects stay up to date.
rm -rf "$build_dir/gen.new" && mkdir -p "$build_dir/gen.new" "$build_dir/gen/proto"
protoc -I. --cpp_out="$build_dir/gen.new" proto/config.proto || die "protoc failed"
for file in "$build_dir"/gen.new/proto/*; do
  cmp -s "$file" "$build_dir/gen/proto/${file##*/}" || cp "$file" "$build_dir/gen/proto/"
done
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all"
CXXFLAGS="-std=c++17 -g -O1 -fno-omit-frame-pointer -Wno-unused-command-line-argument \
  -I$repo -I$build_dir/gen $SAN"
# Constructs gcc builds and clang 14 does not (bench/fuzz/clang_compat.h says which and
# how they are shimmed): probe each, and force-include the shim for those that fail.
probe=$(mktemp -d)
shims=""
printf 'int main() { return __builtin_cpu_supports("f16c"); }\n' > "$probe/f16c.cc"
"$CXX" -c "$probe/f16c.cc" -o "$probe/f16c.o" 2>/dev/null ||
  shims="$shims -DTAMP_FUZZ_SHIM_CPU_SUPPORTS"
printf '%s\n' 'template <int B> __attribute__((target_clones("avx2", "default")))' \
  'int F() { return B; }' 'int main() { return F<1>(); }' > "$probe/clones.cc"
"$CXX" -c "$probe/clones.cc" -o "$probe/clones.o" 2>/dev/null ||
  shims="$shims -DTAMP_FUZZ_SHIM_TARGET_CLONES"
rm -rf "$probe"
if [ -n "$shims" ]; then
  log "$CXX needs bench/fuzz/clang_compat.h:$shims"
  CXXFLAGS="$CXXFLAGS$shims -include $repo/bench/fuzz/clang_compat.h"
fi
LIBS="$(pkg-config --libs protobuf libglog absl_statusor absl_str_format absl_strings \
  absl_flat_hash_map absl_hash absl_synchronization absl_time) -lgflags -pthread"

object_of() { echo "$build_dir/obj/$(echo "${1#"$build_dir"/}" | tr '/' '_').o"; }
objects_of() { for source in "$@"; do object_of "$source"; done; }

# up_to_date OBJECT: it exists and is newer than every file its .d lists (-MMD: the source
# and the project's headers). Compiler flags are not tracked: --clean after changing them.
up_to_date() {
  local object=$1 deps=${1%.o}.d file
  [ -f "$object" ] && [ -f "$deps" ] || return 1
  for file in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$deps"); do
    [ -e "$file" ] && [ ! "$file" -nt "$object" ] || return 1
  done
}

# compile SOURCE EXTRA_FLAGS
compile() {
  local source=$1 flags=$2 object
  object=$(object_of "$source")
  up_to_date "$object" && return 0
  # shellcheck disable=SC2086
  "$CXX" $CXXFLAGS $flags -MMD -MF "${object%.o}.d" -c "$source" -o "$object" ||
    { log "compiling $source failed"; return 1; }
}

# compile_all < "SOURCE|FLAGS" lines: nproc compiles at a time.
compile_all() {
  local failed=0 source flags
  while IFS='|' read -r source flags; do
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || failed=1; done
    compile "$source" "$flags" &
  done
  while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || failed=1; done
  return "$failed"
}

# Coverage instrumentation (fuzzer-no-link) for the code under test only; the harnesses,
# the generated protobuf code and the seed writer get the sanitizers alone, so coverage
# feedback is about Tamp's own branches and the harnesses' O(n) checks run at full speed.
all_sources=$(printf '%s\n' $payload_sources $config_sources | sort -u)
compile_all <<SOURCES || die "build failed"
$(for source in $all_sources; do echo "$source|-fsanitize=fuzzer-no-link"; done)
bench/fuzz/payload_fuzzer.cc|
bench/fuzz/config_fuzzer.cc|
$build_dir/gen/proto/config.pb.cc|
bench/fuzz/fuzz_seeds.cc|
SOURCES

pb_object=$(object_of "$build_dir/gen/proto/config.pb.cc")
# shellcheck disable=SC2046,SC2086
"$CXX" $SAN -fsanitize=fuzzer $(objects_of bench/fuzz/payload_fuzzer.cc $payload_sources) \
  "$pb_object" $LIBS -o "$build_dir/payload_fuzzer" || die "linking payload_fuzzer failed"
# shellcheck disable=SC2046,SC2086
"$CXX" $SAN -fsanitize=fuzzer $(objects_of bench/fuzz/config_fuzzer.cc $config_sources) \
  "$pb_object" $LIBS -o "$build_dir/config_fuzzer" || die "linking config_fuzzer failed"
# shellcheck disable=SC2046,SC2086
"$CXX" $SAN $(objects_of bench/fuzz/fuzz_seeds.cc $payload_sources) "$pb_object" $LIBS \
  -o "$build_dir/fuzz_seeds" || die "linking fuzz_seeds failed"

# ---------------------------------------------------------------------------------------
# Seeds and dictionary
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
rm -rf "$build_dir/seeds-payload" "$build_dir/seeds-config"
mkdir -p "$build_dir/seeds-payload" "$build_dir/seeds-config"
"$build_dir/fuzz_seeds" "$build_dir/seeds-payload" "$build_dir/seeds-config" >&2 ||
  die "fuzz_seeds failed (a codec's own payload crashed it: see above)"
cp examples/*.pbtxt "$build_dir/seeds-config/" 2>/dev/null || true
# Inputs that once crashed a target (bench/fuzz/regressions/TARGET/) seed it too.
for name in payload config; do
  [ ! -d "bench/fuzz/regressions/$name" ] || cp bench/fuzz/regressions/$name/* "$build_dir/seeds-$name/"
done
# Field names, enum values and the text format's punctuation.
{
  sed -n 's/^ *\(optional \|repeated \)\{0,1\}[A-Za-z0-9_.]\+ \([a-z_0-9]\+\) = [0-9]\+;.*/\2/p' \
    proto/config.proto
  sed -n 's/^ *\([A-Z][A-Z_0-9]*\) = [0-9]\+;.*/\1/p' proto/config.proto
} | sort -u | sed 's/.*/"&"/' > "$build_dir/config.dict"
printf '%s\n' '"{"' '"}"' '":"' '"["' '"]"' '"\""' '"#"' '"-1"' '"4294967295"' \
  '"18446744073709551615"' '"1e309"' '"nan"' '"inf"' >> "$build_dir/config.dict"

# ---------------------------------------------------------------------------------------
# Run
# run_target NAME MAX_LEN EXTRA_FLAGS...
run_target() {
  local name=$1 max_len=$2; shift 2
  local corpus="$build_dir/corpus-$name"
  [ "$keep_corpus" = 1 ] || rm -rf "$corpus"
  mkdir -p "$corpus"
  log "running ${name}_fuzzer for $seconds s"
  set +e
  "$build_dir/${name}_fuzzer" -max_total_time="$seconds" -print_final_stats=1 \
    -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -artifact_prefix="$artifacts/$name-" "$@" "$corpus" "$build_dir/seeds-$name" \
    > "$build_dir/$name.log" 2>&1
  echo $? > "$build_dir/$name.rc"
  set -e
}
pids=()
for target in $targets; do
  case "$target" in
    payload) args=(payload 32768) ;;
    config) args=(config 4096 -dict="$build_dir/config.dict") ;;
    *) die "unknown target '$target' (payload, config)" ;;
  esac
  if [ "$parallel" = 1 ]; then
    run_target "${args[@]}" &
    pids+=($!)
  else
    run_target "${args[@]}"
  fi
done
for pid in "${pids[@]}"; do wait "$pid"; done

# ---------------------------------------------------------------------------------------
# Report
status=0
row='%-8s %8s %12s %8s %7s %7s %7s %8s  %s\n'
# shellcheck disable=SC2059
printf "$row" target seconds execs exec/s cov ft corpus crashes result
for target in $targets; do
  file="$build_dir/$target.log"
  rc=$(cat "$build_dir/$target.rc")
  final_stat() { sed -n "s/^stat::$1: *//p" "$file"; }
  execs=$(final_stat number_of_executed_units)
  rate=$(final_stat average_exec_per_sec)
  # The last status line: "#N  DONE  cov: X ft: Y corp: Z/..." (or pulse/NEW before a crash).
  last=$(grep -E '^#[0-9]+' "$file" | tail -1 || true)
  cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
  corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
  crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$file")
  crash=${crash%%$'\n'*}
  if [ "$rc" = 0 ] && [ -z "$crash" ]; then
    crashes=0 result=ok
  else
    crashes=1 result="CRASH (exit $rc): ${crash:-see $file}"
    status=1
  fi
  # shellcheck disable=SC2059
  printf "$row" "$target" "$seconds" "${execs:--}" \
    "${rate:--}" "${cov:--}" "${ft:--}" "${corp:--}" "$crashes" "$result"
done
if [ "$status" != 0 ]; then
  for target in $targets; do
    [ "$(cat "$build_dir/$target.rc")" = 0 ] && continue
    log "--- $target: the report (from $build_dir/$target.log)"
    grep -E 'ERROR|SUMMARY|payload_fuzzer:|runtime error|Check failed|==[0-9]+==|#[0-9]+ 0x' \
      "$build_dir/$target.log" | head -40 >&2 || true
  done
  log "reproduce: $build_dir/TARGET_fuzzer INPUT"
fi
exit "$status"
