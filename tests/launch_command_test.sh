#!/usr/bin/env bash
# `tamp run CONFIG -- COMMAND`: real servers and W copies of a user's program as workers.
#   1. A python3 program: each rank runs once, with its arguments (--help among them: the
#      COMMAND's, not tamp's), TAMP_CONFIG (absolute), TAMP_RANK, TAMP_NUM_WORKERS,
#      TAMP_LOCAL_RANK and TAMP_SERVERS (the servers tamp started, which it can connect
#      to); its WorkerEvent lines make the summary, its print()s go to its log.
#   2. tamp_worker itself as the COMMAND, without --rank or --servers: it trains, placed by
#      the TAMP_* variables alone (job/placement.h).
#   3. A program that prints no events ends cleanly with the wall time in the summary.
#   4. Rank 1 exiting 3 stops the job, naming worker 1; a COMMAND that cannot be executed
#      and a "--" without a COMMAND are named errors. Nothing is left running.
source tests/testlib.sh

cat > "$WORK/train.py" <<'PY'
import json, os, socket, sys

rank = os.environ["TAMP_RANK"]
with open(os.path.join(sys.argv[1], "rank-" + rank), "a") as out:
    out.write("argv=%s\n" % " ".join(sys.argv[2:]))
    for name in sorted(os.environ):
        if name.startswith("TAMP_"):
            out.write("%s=%s\n" % (name, os.environ[name]))
    for address in os.environ["TAMP_SERVERS"].split(","):
        host, port = address.rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=5).close()
        out.write("connected %s\n" % address)
print("plain print from rank", rank, flush=True)
print({"loss": 0.5}, flush=True)
for step in (1, 2, 3):
    print(json.dumps({"kind": "STEP", "step": str(step), "totalSteps": "3",
                      "loss": 1.0 / step}), flush=True)
if rank == os.environ.get("FAIL_RANK"):
    sys.exit(3)
print(json.dumps({"kind": "DONE", "step": "3", "bytesPushed": "10", "bytesPulled": "20",
                  "stepMsMedian": 2.0}), flush=True)
PY

# json_field FILE FIELD: FIELD's value in the summary FILE (quotes stripped).
json_field() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# servers_of RUN_DIR: the addresses of the two servers tamp started there.
servers_of() { echo "127.0.0.1:$(cat "$1/server-0.port"),127.0.0.1:$(cat "$1/server-1.port")"; }

# 1. Three python3 workers.
write_config "$WORK/job.pbtxt" servers=2 workers=3
mkdir -p "$WORK/env"
(cd "$WORK" && "$TAMP_BIN" run job.pbtxt --run_dir="$WORK/run-py" \
  --server_binary="$SERVER_BIN" --summary_json="$WORK/py.json" \
  -- python3 "$WORK/train.py" "$WORK/env" --lr 0.1 --help) \
  > "$WORK/py.out" 2>&1 || { cat "$WORK/py.out" >&2; fail "python3 workers failed"; }
expect_no_leftover_processes
servers=$(servers_of "$WORK/run-py")
for rank in 0 1 2; do
  expected="argv=--lr 0.1 --help
TAMP_CONFIG=$WORK/job.pbtxt
TAMP_LOCAL_RANK=$rank
TAMP_NUM_WORKERS=3
TAMP_RANK=$rank
TAMP_SERVERS=$servers
connected ${servers%,*}
connected ${servers#*,}"
  [ "$(cat "$WORK/env/rank-$rank")" = "$expected" ] ||
    fail "rank $rank saw:
$(cat "$WORK/env/rank-$rank")
expected:
$expected"
  grep -qx "plain print from rank $rank" "$WORK/run-py/worker-$rank.log" ||
    fail "worker $rank's print() is not in its log"
  ! grep -q '"kind"' "$WORK/run-py/worker-$rank.log" || fail "events in worker $rank's log"
done
[ ! -e "$WORK/env/rank-3" ] || fail "a rank 3 ran"
[ "$(json_field "$WORK/py.json" steps)" = 3 ] || fail "summary steps != 3"
[ "$(json_field "$WORK/py.json" bytes_pushed)" = 30 ] || fail "summary bytes_pushed != 30"
[ "$(json_field "$WORK/py.json" bytes_pulled)" = 60 ] || fail "summary bytes_pulled != 60"
grep -q "step 3/3 (100%)" "$WORK/py.out" || fail "no progress line"
echo "ok: python3 workers -> $(grep -m1 'tamp: done' "$WORK/py.out")"

# 2. tamp_worker placed by the environment alone: --check prints its placement (a line that
# goes to its log), then it trains.
write_config "$WORK/train.pbtxt" training="max_steps: 20"
worker="$WORKER_BIN --config=$WORK/train.pbtxt"
"$TAMP_BIN" run "$WORK/train.pbtxt" --run_dir="$WORK/run-worker" --server_binary="$SERVER_BIN" \
  --summary_json="$WORK/worker.json" -- sh -c "$worker --check && exec $worker" \
  > "$WORK/worker.out" 2>&1 ||
  { cat "$WORK/worker.out" >&2; fail "tamp_worker as COMMAND failed"; }
expect_no_leftover_processes
[ "$(json_field "$WORK/worker.json" steps)" = 20 ] || fail "tamp_worker run: steps != 20"
servers=$(servers_of "$WORK/run-worker")
grep -qF "worker 1 of 2 (placement: tamp); servers: $servers" "$WORK/run-worker/worker-1.log" ||
  { cat "$WORK/run-worker/worker-1.log" >&2; fail "worker 1 was not placed by TAMP_*"; }
echo "ok: tamp_worker as COMMAND -> $(grep -m1 'tamp: done' "$WORK/worker.out")"

# 3. A program that reports nothing.
"$TAMP_BIN" run "$WORK/job.pbtxt" --run_dir="$WORK/run-silent" --server_binary="$SERVER_BIN" \
  --summary_json="$WORK/silent.json" -- python3 -c pass > "$WORK/silent.out" 2>&1 ||
  { cat "$WORK/silent.out" >&2; fail "a silent COMMAND failed the run"; }
expect_no_leftover_processes
grep -q "tamp: done in " "$WORK/silent.out" || fail "silent run: no wall time line"
awk -v s="$(json_field "$WORK/silent.json" wall_seconds)" 'BEGIN { exit !(s > 0) }' ||
  fail "silent run: no wall time in the summary"
echo "ok: silent COMMAND -> $(grep -m1 'tamp: done' "$WORK/silent.out")"

# expect_exit NAME CODE NEEDLE ARGS...: `tamp run ARGS` must exit CODE and print NEEDLE.
expect_exit() {
  local name=$1 code=$2 needle=$3 status=0
  shift 3
  "$TAMP_BIN" run "$@" > "$WORK/$name.out" 2>&1 || status=$?
  [ "$status" = "$code" ] || { cat "$WORK/$name.out" >&2; fail "$name: exit $status, not $code"; }
  grep -qF -- "$needle" "$WORK/$name.out" ||
    { cat "$WORK/$name.out" >&2; fail "$name: output lacks '$needle'"; }
  expect_no_leftover_processes
  echo "ok: $name -> $(grep -m1 -F -- "$needle" "$WORK/$name.out")"
}

# 4. Failures.
rm -rf "$WORK/env" && mkdir -p "$WORK/env"
FAIL_RANK=1 expect_exit failing_rank 1 "tamp: worker 1 failed (exit status 3)" \
  "$WORK/job.pbtxt" --run_dir="$WORK/run-fail" --server_binary="$SERVER_BIN" \
  -- python3 "$WORK/train.py" "$WORK/env"
expect_exit not_found 2 "tamp: cannot execute no-such-trainer: not found in PATH" \
  "$WORK/job.pbtxt" --run_dir="$WORK/run-nf" --server_binary="$SERVER_BIN" -- no-such-trainer
expect_exit no_command 2 '"--" must be followed by a COMMAND' "$WORK/job.pbtxt" --
echo PASS
