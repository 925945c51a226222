#!/usr/bin/env bash
# One task of a Tamp job under Slurm: every task of one `srun -n S+W` step runs this script
# with the same arguments, and it becomes the server or the worker its SLURM_PROCID makes it
# (tasks 0..S-1 are the shards; job/placement.h has the rules).
#
#   srun --ntasks=$((S+W)) --distribution=block --kill-on-bad-exit=1 \
#     deploy/slurm/tamp_task.sh CONFIG OUT_DIR
#
# --kill-on-bad-exit=1: a worker task that fails for good (its restarts spent, a binary
# missing) never writes its done marker, and the servers would wait for it forever.
#
# OUT_DIR must be on a file system every node shares. Workers write their events there
# (worker-<rank>.events; worker-<rank>.restart-<n>.events for a restarted one) and a
# worker-<rank>.done marker with the job step's id and their exit status when they end (the
# servers count only this step's, so an OUT_DIR reused by another step does not stop them). A worker that dies is
# started again up to $TAMP_RESTART_WORKERS times (default 2) with --resume, and rejoins the
# run at the other workers' step (SYNC); servers stop (SIGTERM, so they write a final checkpoint when configured) once every
# worker is done. Shard i listens on port $TAMP_BASE_PORT + i (default 29500) of its node.
# Binaries: $TAMP_BIN_DIR/tamp_server and tamp_worker (default: bazel-bin of the directory
# the job was submitted from).
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: srun -n S+W $0 CONFIG OUT_DIR" >&2
  exit 2
fi
config=$1 out=$2
bin=${TAMP_BIN_DIR:-${SLURM_SUBMIT_DIR:-.}/bazel-bin}
server_bin=$bin/tamp_server worker_bin=$bin/tamp_worker
[ -x "$bin/server/tamp_server" ] && server_bin=$bin/server/tamp_server
[ -x "$bin/worker/tamp_worker" ] && worker_bin=$bin/worker/tamp_worker
for b in "$server_bin" "$worker_bin"; do
  [ -x "$b" ] || {
    name=$(basename "$b")
    echo "tamp_task: $name not found in $bin or $bin/${name#tamp_}: set TAMP_BIN_DIR to the" \
      "directory holding both binaries (or bazel-bin, holding server/ and worker/)" >&2
    exit 2
  }
done
base_port=${TAMP_BASE_PORT:-29500}
step_id="${SLURM_JOB_ID:-}.${SLURM_STEP_ID:-}"  # This step's done markers.
mkdir -p "$out"

# The binaries resolve the placement themselves; --check asks which one this task is. It
# exits 1 for a server task that could not start (its checkpoint damaged or held by another
# server, a TLS file missing): that is the reason to give, not "neither".
server_check=$("$server_bin" --config="$config" --placement=slurm --base_port="$base_port" --check 2>&1)
server_check_status=$?
if [ "$server_check_status" -eq 1 ]; then
  echo "tamp_task ${SLURM_PROCID:-?}: this task is a server, and it cannot start: $server_check" >&2
  exit 1
fi
if [ "$server_check_status" -eq 0 ]; then
  echo "tamp_task $SLURM_PROCID: $server_check" >&2
  num_workers=$(sed -n 's/.* for \([0-9]*\) workers.*/\1/p' <<<"$server_check")
  "$server_bin" --config="$config" --placement=slurm --base_port="$base_port" &
  server=$!
  # Stop the shard once every worker has ended (or when it dies by itself).
  while kill -0 "$server" 2>/dev/null; do
    done_count=$(cat "$out"/worker-*.done 2>/dev/null | awk -v id="$step_id" '$1 == id' | wc -l)
    if [ "$done_count" -ge "$num_workers" ]; then
      kill -TERM "$server"
      break
    fi
    sleep 1
  done
  wait "$server"
  status=$?
  # 143: ended by our SIGTERM after the workers finished, which is success.
  [ "$status" -eq 143 ] && status=0
  # 3: its final checkpoint was not written. The run itself finished, so, as `tamp run`
  # does, a warning: failing the task would make --kill-on-bad-exit end the step before
  # tamp.sbatch writes the summary.
  if [ "$status" -eq 3 ]; then
    echo "tamp_task $SLURM_PROCID: warning: the server's final checkpoint was not written" \
      "(exit 3; see its log above): its state since the last checkpoint is lost" >&2
    status=0
  fi
  exit "$status"
fi
if worker_check=$("$worker_bin" --config="$config" --placement=slurm --base_port="$base_port" --check 2>&1); then
  echo "tamp_task $SLURM_PROCID: $worker_check" >&2
  rank=$(sed -n 's/.*worker \([0-9]*\) of.*/\1/p' <<<"$worker_check")
  # A worker that dies is started again, up to $restarts times, and rejoins the run at the
  # other workers' step (--resume; SYNC). Each process writes its own events file.
  restarts=${TAMP_RESTART_WORKERS:-2}
  events="$out/worker-$rank.events"
  restart=0
  while :; do
    resume=()
    [ "$restart" -gt 0 ] && resume=(--resume)
    "$worker_bin" --config="$config" --placement=slurm --base_port="$base_port" "${resume[@]}" \
      >"$events"
    status=$?
    [ "$status" -eq 0 ] || [ "$restart" -ge "$restarts" ] && break
    restart=$((restart + 1))
    echo "tamp_task $SLURM_PROCID: worker $rank failed (exit $status); restarting it" \
      "(restart $restart of $restarts), it rejoins the run" >&2
    events="$out/worker-$rank.restart-$restart.events"
  done
  echo "$step_id $status" >"$out/worker-$rank.done"
  exit "$status"
fi
echo "tamp_task ${SLURM_PROCID:-?}: neither a server nor a worker:" >&2
echo "  as a server: $server_check" >&2
echo "  as a worker: $worker_check" >&2
exit 2
