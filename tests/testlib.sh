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

# mean_first N / mean_last N: the mean of the first / last N numbers on stdin (one per
# line), printed with 4 decimals. awk reads all of stdin, so no writer dies of SIGPIPE
# (under pipefail, `producer | head` fails at random when head exits first).
mean_first() { awk -v n="$1" 'NR <= n { s += $1; c++ } END { printf "%.4f", s / c }'; }
mean_last() {
  awk -v n="$1" '{ v[NR] = $1 } END { k = NR < n ? NR : n; for (i = NR - k + 1; i <= NR; i++) s += v[i]; printf "%.4f", s / k }'
}

# Fails if any process still has $WORK on its command line.
expect_no_leftover_processes() {
  sleep 0.2
  if pgrep -f -- "$WORK" >/dev/null; then
    pgrep -af -- "$WORK" >&2
    fail "processes left running"
  fi
}
