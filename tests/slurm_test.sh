#!/usr/bin/env bash
# Submits a small MLP job through deploy/slurm/tamp.sbatch to a one-machine Slurm cluster
# the test starts itself (deploy/slurm/local_cluster.sh), and checks the job's summary: 2
# servers and 2 workers placed by SLURM_PROCID, trained to a real accuracy; a worker killed
# mid-run restarted by its task and rejoining; and a wrong task count refused with a message
# naming both counts.
source tests/testlib.sh
export PATH="/usr/sbin:/sbin:$PATH"
for tool in slurmctld slurmd munged sbatch; do
  command -v "$tool" >/dev/null || fail "$tool not found: tools/install_deps.sh installs slurm-wlm and munge"
done

# munge's socket path must stay short (sockaddr_un), so not under TEST_TMPDIR.
cluster=$(mktemp -d /tmp/tamp-slurm.XXXXXX)
out="$WORK/slurm-out"
cleanup() { deploy/slurm/local_cluster.sh stop "$cluster" || true; rm -rf "$cluster"; }
trap cleanup EXIT
# Ports of their own, so parallel tests and a real Slurm are left alone, and below Linux's
# ephemeral range (32768 and up), where other tests' connections take their local ports (a
# server base port there failed once with "Address already in use").
export TAMP_SLURM_PORT=$((17000 + $$ % 2000 * 2))
export TAMP_BASE_PORT=$((21000 + $$ % 5000 * 2))
eval "$(deploy/slurm/local_cluster.sh start "$cluster")"

write_config "$WORK/job.pbtxt" cluster="plaintext: true"
export TAMP_BIN_DIR=$PWD TAMP_DEPLOY_DIR=$PWD/deploy/slurm
# The local node has 2 CPUs; --overcommit lets 4 tasks share them.
timeout 240 sbatch --wait --ntasks=4 --overcommit --output="$WORK/job-%j.out" \
  deploy/slurm/tamp.sbatch "$WORK/job.pbtxt" "$out" ||
  { cat "$WORK"/job-*.out >&2; fail "the Slurm job failed"; }
[ -f "$out/summary.json" ] || { cat "$WORK"/job-*.out >&2; fail "no summary.json"; }
cat "$out/summary.json"
grep -q 'placement: slurm' "$WORK"/job-*.out || fail "the tasks did not take their placement from Slurm"
for shard in 0 1; do
  grep -q "shard $shard of 2 .*would listen on [^ ]*:$((TAMP_BASE_PORT + shard))" "$WORK"/job-*.out ||
    fail "shard $shard did not listen on base_port + $shard"
done
python3 - "$out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["format_version"] == 2, s
assert s["name"] == "test", s
# 2 epochs of 4096 examples, batch 32, 2 workers: 64 steps per epoch.
assert s["steps"] == 128, s["steps"]
assert s["test_accuracy"] > 0.6, s["test_accuracy"]
assert s["compression_ratio"] > 5, s["compression_ratio"]
print(f"slurm job: accuracy {s['test_accuracy']:.4f}, {s['steps']} steps, ratio {s['compression_ratio']:.1f}")
PY

# Worker 1 killed (SIGKILL) mid-run: its task starts it again, it rejoins, and the job ends
# with every step; the summary counts the restart. 6 epochs (384 steps), a few seconds.
restarted_out="$WORK/slurm-restart"
sed 's/epochs: 2 /epochs: 6 /' "$WORK/job.pbtxt" > "$WORK/long.pbtxt"
timeout 240 sbatch --wait --ntasks=4 --overcommit --output="$WORK/restart-%j.out" \
  deploy/slurm/tamp.sbatch "$WORK/long.pbtxt" "$restarted_out" &
job=$!
# worker1: the pid of worker 1's tamp_worker (task 3: 2 servers come first), once it has
# taken 50 steps.
worker1() {
  local pid
  [ "$(grep -c '"kind":"STEP"' "$restarted_out/worker-1.events" 2>/dev/null || true)" -ge 50 ] \
    2>/dev/null || return 1
  for pid in $(pgrep -f -- "tamp_worker --config=$WORK/long.pbtxt"); do
    grep -qz '^SLURM_PROCID=3$' "/proc/$pid/environ" 2>/dev/null && echo "$pid" && return 0
  done
  return 1
}
victim=""
for _ in $(seq 1500); do victim=$(worker1) && break; sleep 0.02; done
[ -n "$victim" ] || { cat "$WORK"/restart-*.out >&2; fail "worker 1 of the Slurm job not found"; }
kill -9 "$victim"
wait "$job" || { cat "$WORK"/restart-*.out >&2; fail "the Slurm job failed after worker 1 was killed"; }
grep -q "worker 1 failed (exit 137); restarting it (restart 1 of 2)" "$WORK"/restart-*.out ||
  { cat "$WORK"/restart-*.out >&2; fail "the task did not restart worker 1"; }
python3 - "$restarted_out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["steps"] == 384, s["steps"]
assert s["worker_restarts"] == 1, s
assert s["test_accuracy"] > 0.6, s["test_accuracy"]
print(f"slurm job with worker 1 killed and restarted: accuracy {s['test_accuracy']:.4f}, {s['steps']} steps")
PY

# 3 tasks for a 2 + 2 job: refused, naming both counts.
rm -rf "$out"
if timeout 120 sbatch --wait --ntasks=3 --overcommit --output="$WORK/bad-%j.out" \
     deploy/slurm/tamp.sbatch "$WORK/job.pbtxt" "$out"; then
  fail "a job with 3 tasks for 2 servers + 2 workers succeeded"
fi
grep -q "SLURM_STEP_NUM_TASKS is 3 but the config asks for 2 servers + 2 workers = 4 tasks" "$WORK"/bad-*.out ||
  { cat "$WORK"/bad-*.out >&2; fail "the wrong task count was not named"; }
# A server task that cannot start (a damaged checkpoint) says so, not "neither a server nor
# a worker": task 0 as srun would start it, without Slurm.
mkdir -p "$WORK/damaged"
echo garbage > "$WORK/damaged/shard-0.ckpt"
{ cat "$WORK/job.pbtxt"; echo "checkpoint { dir: \"$WORK/damaged\" }"; } > "$WORK/damaged.pbtxt"
set +e
SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=4 SLURM_STEP_NODELIST="$(hostname)" \
  SLURM_STEP_TASKS_PER_NODE=4 SLURM_DISTRIBUTION=block \
  deploy/slurm/tamp_task.sh "$WORK/damaged.pbtxt" "$WORK/damaged-out" 2> "$WORK/damaged.err"
status=$?
set -e
[ "$status" -eq 1 ] || { cat "$WORK/damaged.err" >&2; fail "a server task with a damaged checkpoint exited $status, not 1"; }
# The server's log lines (a mallopt warning where malloc is replaced) may come first.
grep -q "tamp_task 0: this task is a server, and it cannot start: " "$WORK/damaged.err" &&
  grep -q "tamp_server: $WORK/damaged/shard-0.ckpt: damaged checkpoint" "$WORK/damaged.err" ||
  { cat "$WORK/damaged.err" >&2; fail "the server task did not say why it cannot start"; }
echo PASS
