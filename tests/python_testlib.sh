# Helpers for the Python package's shell tests (sourced after tests/testlib.sh): Debian's
# python3 with the package from runfiles.

export PYTHONPATH="$PWD/python"

# run_python3 ARGS...: Debian's python3. Under --config=asan the extension carries
# AddressSanitizer and UBSan, whose runtimes must be loaded before anything else: they are
# preloaded, with leak checking off (the interpreter and torch keep their allocations).
# PYTHON3_COMMAND is that command, for a launcher to start (`tamp run CONFIG -- ...`).
SANITIZER_RUNTIMES=$(ldd python/tamp/_tamp.so | awk '/lib(asan|ubsan)\.so/ { print $3 }' | tr '\n' ' ')
PYTHON3_COMMAND=(/usr/bin/python3)
if [ -n "$SANITIZER_RUNTIMES" ]; then
  PYTHON3_COMMAND=(env "LD_PRELOAD=$SANITIZER_RUNTIMES"
                   "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" /usr/bin/python3)
fi
run_python3() { "${PYTHON3_COMMAND[@]}" "$@"; }

# write_exact_config PATH [WORKERS [TEXT]]: the MLP 784-64-10, WORKERS workers (default 1),
# codec none both ways, SGD at 0.125 without momentum on the servers, so that one step
# moves the weights by exactly -0.125 * gradient; TEXT is added at the top level (e.g.
# "server { mode: AGGREGATE }").
write_exact_config() {
  cat > "$1" <<CONFIG
version: 1
name: "python_exact"
cluster { num_servers: 2 num_workers: ${2:-1} }
model { kind: MLP hidden: [64] init_seed: 3 }
data { dir: "$DATA_DIR" batch_size: 32 }
training { epochs: 2 }
optimizer { learning_rate: 0.125 momentum: 0 }
compression {
  partition_bytes: 16384
  seed: 7
  default_compression { push { name: "none" } pull { name: "none" } }
}
${3:-}
CONFIG
}

# run_python_workers DIR SCRIPT [ARGS...]: tests/python/SCRIPT as workers 0 and 1 of the job
# DIR/job.pbtxt whose servers SERVERS are, each with ARGS where '@' becomes its rank; waits
# for both (logs DIR/worker<rank>.log, printed) and fails if either fails.
run_python_workers() {
  local dir=$1 script=$2; shift 2
  local pids=() rank arg args
  for rank in 0 1; do
    args=()
    for arg in "$@"; do args+=("${arg//@/$rank}"); done
    TAMP_CONFIG="$dir/job.pbtxt" TAMP_SERVERS="$SERVERS" TAMP_RANK=$rank \
      run_python3 "tests/python/$script" "${args[@]}" > "$dir/worker$rank.log" 2>&1 &
    pids+=($!)
    STARTED_PIDS+=($!)
  done
  # Both logs on a failure: one worker's error often shows up as the other's lost connection.
  local failed=""
  for rank in 0 1; do
    wait "${pids[$rank]}" || failed="$failed $rank"
  done
  for rank in 0 1; do
    if [ -n "$failed" ]; then echo "--- worker $rank:" >&2; cat "$dir/worker$rank.log" >&2
    else cat "$dir/worker$rank.log"; fi
  done
  [ -z "$failed" ] || fail "$script: worker(s)$failed failed"
}

# kill_mid_run OUT PROGRESS PATTERN IS_VICTIM: once OUT (a `tamp run` output) matches the
# extended regex PROGRESS, SIGKILLs the process among `pgrep -f PATTERN` for which the
# command IS_VICTIM PID succeeds (other jobs may run the same programs at the same time);
# fails, printing OUT, when none is found within 60 s.
kill_mid_run() {
  local out=$1 progress=$2 pattern=$3 is_victim=$4 victim="" pid
  for _ in $(seq 3000); do
    if grep -qE "$progress" "$out" 2>/dev/null; then
      for pid in $(pgrep -f -- "$pattern"); do
        "$is_victim" "$pid" && victim=$pid
      done
      [ -n "$victim" ] && break
    fi
    sleep 0.02
  done
  [ -n "$victim" ] || { cat "$out" >&2; fail "no $pattern process of this job found mid-run"; }
  kill -9 "$victim"
}
