# Shared helpers for Tamp's shell integration tests (sourced).
set -euo pipefail

SERVER_BIN="$PWD/server/tamp_server"
WORKER_BIN="$PWD/worker/tamp_worker"
TAMP_BIN="$PWD/tools/tamp/tamp"
DATA_DIR="${TAMP_DATA_DIR:-/usr/share/datasets/fashion-mnist}"
WORK="${TEST_TMPDIR:-$(mktemp -d)}"

fail() { echo "FAIL: $*" >&2; exit 1; }

[ -f "$DATA_DIR/train-images-idx3-ubyte.gz" ] ||
  fail "Fashion-MNIST not found in $DATA_DIR (tools/install_deps.sh installs dataset-fashion-mnist)"

# A small, fast job: MLP 784-64-10 on 4096 examples.
# write_config PATH [BLOCK=TEXT ...]: TEXT is added inside block BLOCK (cluster, data,
# training, compression), e.g. write_config job.pbtxt training="max_steps: 40"; for BLOCK
# model it replaces the block's contents (default "kind: MLP hidden: [64] init_seed: 3"),
# e.g. model="kind: CNN conv_channels: [4, 8] kernel_size: 3 init_seed: 3". consistency=TEXT
# adds a `consistency { TEXT }` block (default none: SYNC), e.g. consistency="mode: ASYNC".
# servers=N and workers=N set cluster.num_servers / num_workers (default 2 and 2).
write_config() {
  local path=$1; shift
  local cluster="" data="" training="" compression="" consistency=""
  local model="kind: MLP hidden: [64] init_seed: 3"
  local servers=2 workers=2
  for assignment in "$@"; do
    case "${assignment%%=*}" in
      cluster) cluster="${assignment#*=}" ;;
      data) data="${assignment#*=}" ;;
      training) training="${assignment#*=}" ;;
      compression) compression="${assignment#*=}" ;;
      model) model="${assignment#*=}" ;;
      consistency) consistency="consistency { ${assignment#*=} }" ;;
      servers) servers="${assignment#*=}" ;;
      workers) workers="${assignment#*=}" ;;
      *) fail "write_config: unknown block in '$assignment'" ;;
    esac
  done
  # data.dir is the test data set unless `data` names another.
  local data_dir="dir: \"$DATA_DIR\""
  case "$data" in *dir:*) data_dir="" ;; esac
  cat > "$path" <<CONFIG
version: 1
name: "test"
cluster { num_servers: $servers num_workers: $workers $cluster }
model { $model }
data { $data_dir batch_size: 32 train_limit: 4096 test_limit: 1000 shuffle_seed: 5 $data }
training { epochs: 2 $training }
optimizer { learning_rate: 0.05 momentum: 0.9 }
$consistency
compression {
  partition_bytes: 16384
  seed: 7
  default_compression {
    push { name: "topk" ratio: 0.1 }
    push_feedback { kind: RESIDUAL }
  }
  $compression
}
CONFIG
}

# lengthen_with_cosine PATH EPOCHS: the job at PATH (from write_config) trains EPOCHS epochs and
# its learning rate falls to 0 along a cosine, so the final accuracy settles instead of
# swinging from step to step. Tests that disturb a run (kills, restarts) and then compare its
# accuracy with a normal run's need this: at the constant rate the 6-epoch job ends anywhere
# between 0.74 and 0.81 undisturbed, depending only on the shuffle seed.
lengthen_with_cosine() {
  sed -i "s/epochs: 2 /epochs: $2 /; s/momentum: 0.9 }/momentum: 0.9 schedule { kind: COSINE } }/" \
    "$1"
  grep -q "epochs: $2 " "$1" && grep -q COSINE "$1" ||
    fail "lengthen_with_cosine: the job's training or optimizer block changed; update its sed"
}

# mean_first N / mean_last N: the mean of the first / last N numbers on stdin (one per
# line), printed with 4 decimals. awk reads all of stdin, so no writer dies of SIGPIPE
# (under pipefail, `producer | head` fails at random when head exits first).
mean_first() { awk -v n="$1" 'NR <= n { s += $1; c++ } END { printf "%.4f", s / c }'; }
mean_last() {
  awk -v n="$1" '{ v[NR] = $1 } END { k = NR < n ? NR : n; for (i = NR - k + 1; i <= NR; i++) s += v[i]; printf "%.4f", s / k }'
}

# On exit: kills every process in STARTED_PIDS (a test adds those it starts in the
# background; stop_started_processes kills them earlier), then fails the test if any log under $WORK holds a sanitizer report
# (bazel test --config=asan / tsan). Exit statuses alone miss some: the launcher only warns
# when a server stops uncleanly, and some tests expect a process to fail.
STARTED_PIDS=()
stop_started_processes() {
  for pid in "${STARTED_PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  STARTED_PIDS=()
}
SANITIZER_REPORT='ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error: '
finish_test() {
  local status=$? report
  stop_started_processes
  for report in $(grep -rIlE "$SANITIZER_REPORT" "$WORK" 2>/dev/null); do
    echo "FAIL: sanitizer report in $report:" >&2
    grep -E -A40 "$SANITIZER_REPORT" "$report" | head -80 >&2
    status=1
  done
  exit "$status"
}
trap finish_test EXIT

# start_servers DIR CONFIG N: starts servers 0..N-1 of CONFIG on free loopback ports (logs
# DIR/server<rank>.log, ports DIR/port<rank>), waits until each listens, and sets SERVERS to
# their comma-separated host:port list. They die with the test.
start_servers() {
  local dir=$1 config=$2 count=$3 rank
  for ((rank = 0; rank < count; rank++)); do
    "$SERVER_BIN" --config="$config" --rank=$rank --port=0 --port_file="$dir/port$rank" \
      2> "$dir/server$rank.log" &
    STARTED_PIDS+=($!)
  done
  SERVERS=""
  for ((rank = 0; rank < count; rank++)); do
    for _ in $(seq 100); do [ -s "$dir/port$rank" ] && break; sleep 0.1; done
    [ -s "$dir/port$rank" ] ||
      { cat "$dir/server$rank.log" >&2; fail "$(basename "$dir"): server $rank did not start"; }
    SERVERS="$SERVERS${SERVERS:+,}127.0.0.1:$(cat "$dir/port$rank")"
  done
}

# run_processes DIR CONFIG: starts 2 tamp_server and 2 tamp_worker processes for CONFIG (a
# job of 2 servers and 2 workers), waits for the workers and fails unless both end with
# bit-identical weights. Leaves in DIR the workers' JSON events (events0, events1), their
# --dump_weights files (weights0, weights1) and every log. All it starts dies with the test.
run_processes() {
  local dir=$1 config=$2 name
  name=$(basename "$dir")
  mkdir -p "$dir"
  start_servers "$dir" "$config" 2
  local servers=$SERVERS
  local worker_pids=()
  for rank in 0 1; do
    "$WORKER_BIN" --config="$config" --rank=$rank --servers="$servers" \
      --dump_weights="$dir/weights$rank" > "$dir/events$rank" 2> "$dir/worker$rank.log" &
    worker_pids+=($!)
    STARTED_PIDS+=($!)
  done
  for rank in 0 1; do
    wait "${worker_pids[$rank]}" || { cat "$dir/worker$rank.log" >&2; fail "$name: worker $rank failed"; }
  done
  # Both replicas applied identical bytes from identical starting weights.
  [ -s "$dir/weights0" ] || fail "$name: worker 0 wrote no weights"
  cmp "$dir/weights0" "$dir/weights1" || fail "$name: worker replicas differ"
}

# step_losses EVENTS / final_accuracy EVENTS: a worker's per-step losses (one per line) and
# its test accuracy at the end, from its JSON events.
step_losses() { grep '"kind":"STEP"' "$1" | grep -o '"loss":[-0-9.e+]*' | cut -d: -f2; }
final_accuracy() { grep '"kind":"DONE"' "$1" | grep -o '"test_accuracy":[0-9.e+-]*' | cut -d: -f2; }

# Fails if any process still has $WORK on its command line.
expect_no_leftover_processes() {
  sleep 0.2
  if pgrep -f -- "$WORK" >/dev/null; then
    pgrep -af -- "$WORK" >&2
    fail "processes left running"
  fi
}
