#!/usr/bin/env bash
# Server failure and checkpoints (README, "Checkpoints and failures"): the same small job
# runs undisturbed, then with server 1 killed (SIGKILL) mid-run and restarted by hand on
# the same port: it resumes from its last checkpoint (step > 0), the workers reconnect,
# resync and finish with identical replicas and a test accuracy within 1 point of the
# undisturbed run. The same through `tamp run --restart_servers=1`. Then SIGTERM makes each
# server write a final checkpoint at the last step, and a server refuses a damaged one.
source tests/testlib.sh

EVERY=10
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

undisturbed="$WORK/undisturbed"
write_config "$WORK/job.pbtxt" model="kind: MLP hidden: [128] init_seed: 3"
# 8 epochs of 64 steps (512 steps), accuracy on the whole test set, and a cosine schedule:
# the rate falls to 0 at the end, so the final accuracy does not swing from step to step
# (at a constant rate a 2-step disturbance alone moves it by more than a point).
sed -i 's/epochs: 2/epochs: 8/; s/test_limit: 1000/test_limit: 10000/; s/momentum: 0.9 }/momentum: 0.9 schedule { kind: COSINE } }/' \
  "$WORK/job.pbtxt"
grep -q COSINE "$WORK/job.pbtxt" || fail "the job's optimizer block changed; update the sed above"
start=$(date +%s.%N)
run_processes "$undisturbed" "$WORK/job.pbtxt"
undisturbed_seconds=$(seconds_since "$start")
steps=$(step_losses "$undisturbed/events0" | wc -l)
[ "$steps" -eq 512 ] || fail "undisturbed: expected 512 steps, got $steps"

# The same job, checkpointing every $EVERY steps.
dir="$WORK/restart"
mkdir -p "$dir"
cp "$WORK/job.pbtxt" "$WORK/ckpt.pbtxt"
echo "checkpoint { dir: \"$dir/ckpt\" every_steps: $EVERY }" >> "$WORK/ckpt.pbtxt"

# start_server RANK PORT LOG: a server of the checkpointing job on PORT (0: any); sets PID.
start_server() {
  rm -f "$dir/port$1"
  "$SERVER_BIN" --config="$WORK/ckpt.pbtxt" --rank="$1" --port="$2" --port_file="$dir/port$1" \
    2> "$3" &
  PID=$!
  STARTED_PIDS+=($PID)
  for _ in $(seq 100); do [ -s "$dir/port$1" ] && return; sleep 0.1; done
  cat "$3" >&2
  fail "server $1 did not start"
}
start=$(date +%s.%N)
start_server 0 0 "$dir/server0.log"; server0=$PID
start_server 1 0 "$dir/server1.log"; server1=$PID
port1=$(cat "$dir/port1")
servers="127.0.0.1:$(cat "$dir/port0"),127.0.0.1:$port1"
workers=()
for rank in 0 1; do
  "$WORKER_BIN" --config="$WORK/ckpt.pbtxt" --rank=$rank --servers="$servers" \
    --dump_weights="$dir/weights$rank" > "$dir/events$rank" 2> "$dir/worker$rank.log" &
  workers+=($!)
  STARTED_PIDS+=($!)
done

# Kill server 1 mid-run, once it has checkpointed at step >= 200.
checkpointed() { grep -o 'checkpoint: step [0-9]*' "$dir/server1.log" | tail -1 | grep -o '[0-9]*$' || echo 0; }
for _ in $(seq 1500); do [ "$(checkpointed)" -ge 200 ] && break; sleep 0.02; done
# ... and the workers are 5 steps past that checkpoint: those steps of shard 1 are lost.
target=$(( $(checkpointed) + 5 ))
for _ in $(seq 500); do [ "$(grep -c '"kind":"STEP"' "$dir/events0")" -ge "$target" ] && break; sleep 0.01; done
kill -9 "$server1"
wait "$server1" 2>/dev/null || true
killed_at=$(grep -c '"kind":"STEP"' "$dir/events0")
last_checkpoint=$(checkpointed)
echo "killed server 1 with SIGKILL at worker 0's step $killed_at (its last checkpoint: step $last_checkpoint)"
[ "$killed_at" -lt 400 ] || fail "the run was nearly over before server 1 was killed (step $killed_at)"
sleep 1  # The workers notice and retry meanwhile.
start_server 1 "$port1" "$dir/server1-restarted.log"; server1=$PID

for rank in 0 1; do
  wait "${workers[$rank]}" || { cat "$dir/worker$rank.log" >&2; fail "worker $rank failed after the restart"; }
done
disturbed_seconds=$(seconds_since "$start")
cmp "$dir/weights0" "$dir/weights1" || fail "worker replicas differ after the restart"
steps=$(step_losses "$dir/events0" | wc -l)
[ "$steps" -eq 512 ] || fail "restart: expected 512 steps, got $steps"
resumed=$(grep -o 'resumed from .* at step [0-9]*' "$dir/server1-restarted.log" | grep -o '[0-9]*$') ||
  { cat "$dir/server1-restarted.log" >&2; fail "server 1 did not resume from a checkpoint"; }
[ "$resumed" -gt 0 ] || fail "server 1 resumed at step 0"
# At most the kill's step: under load the checkpointer (it polls every 20 ms) may write one at
# the very step the kill lands on.
[ "$resumed" -le "$killed_at" ] || fail "server 1 resumed at step $resumed, after the kill at $killed_at"
grep -q "resynced with shard 1" "$dir/worker0.log" || fail "worker 0 did not log its resync"

accuracy=$(final_accuracy "$undisturbed/events0")
restarted_accuracy=$(final_accuracy "$dir/events0")
echo "test accuracy: undisturbed $accuracy, with server 1 killed and restarted $restarted_accuracy"
echo "server 1 resumed at step $resumed; wall time ${undisturbed_seconds}s undisturbed, ${disturbed_seconds}s with the restart"
awk -v a="$accuracy" -v b="$restarted_accuracy" 'BEGIN { d = a - b; exit !(d <= 0.01 && d >= -0.01) }' ||
  fail "accuracy $restarted_accuracy is more than 1 point from the undisturbed $accuracy"

# The launcher's restart policy: `tamp run --restart_servers=1` with checkpoints in its run
# directory (the config names no dir) starts server 1 again when it is killed.
run_dir="$WORK/launcher"
cp "$WORK/job.pbtxt" "$WORK/launcher.pbtxt"
echo "checkpoint { every_steps: $EVERY }" >> "$WORK/launcher.pbtxt"
"$TAMP_BIN" run "$WORK/launcher.pbtxt" --restart_servers=1 --run_dir="$run_dir" \
  --summary_json="$WORK/launcher.json" --server_binary="$SERVER_BIN" \
  --worker_binary="$WORKER_BIN" > "$WORK/launcher.out" 2>&1 &
launcher=$!
STARTED_PIDS+=($launcher)
for _ in $(seq 1500); do
  grep -qE 'checkpoint: step (1[0-9][0-9]|[2-9][0-9][0-9])' "$run_dir/server-1.log" 2>/dev/null && break
  sleep 0.02
done
[ -s "$run_dir/checkpoints/shard-1.ckpt" ] || fail "launcher: no checkpoint in $run_dir/checkpoints"
# Server 1 of this run only: its port file is in this run's directory.
launched_server1=$(pgrep -f -- "--rank=1 .*--port_file=$run_dir/server-1.port") ||
  fail "launcher: server 1 not found"
kill -9 "$launched_server1"
wait "$launcher" || { cat "$WORK/launcher.out" >&2; fail "tamp run failed after server 1 was killed"; }
grep -q "server 1 exited while workers were running (killed by SIGKILL); restarting it" \
  "$WORK/launcher.out" || { cat "$WORK/launcher.out" >&2; fail "the launcher did not restart server 1"; }
launcher_resumed=$(grep -o 'resumed from .* at step [0-9]*' "$run_dir/server-1.restart-1.log" |
  grep -o '[0-9]*$') || fail "launcher: server 1 did not resume from its checkpoint"
launcher_accuracy=$(grep -oE '"test_accuracy":[0-9.e+-]+' "$WORK/launcher.json" | grep -oE '[0-9.e+-]+$')
echo "tamp run --restart_servers=1: server 1 resumed at step $launcher_resumed, test accuracy $launcher_accuracy"
awk -v a="$accuracy" -v b="$launcher_accuracy" 'BEGIN { d = a - b; exit !(d <= 0.01 && d >= -0.01) }' ||
  fail "launcher: accuracy $launcher_accuracy is more than 1 point from the undisturbed $accuracy"

# SIGTERM: each server writes a final checkpoint (at the last step, 512) and exits 0.
kill -TERM "$server0" "$server1"
wait "$server0" || fail "server 0 did not exit 0 on SIGTERM"
wait "$server1" || fail "server 1 did not exit 0 on SIGTERM"
for rank in 0 1; do
  log="$dir/server$rank.log"
  [ "$rank" -eq 1 ] && log="$dir/server1-restarted.log"
  grep -q "checkpoint: step 512 written to $dir/ckpt/shard-$rank.ckpt (final" "$log" ||
    { tail -5 "$log" >&2; fail "server $rank wrote no final checkpoint at step 512 on SIGTERM"; }
  [ -s "$dir/ckpt/shard-$rank.ckpt" ] || fail "no checkpoint file for server $rank"
  [ ! -e "$dir/ckpt/shard-$rank.ckpt.tmp" ] || fail "server $rank left its temporary file"
done

# A final checkpoint that cannot be written (its directory replaced by a file after the
# start-up probe) is logged and the server exits 3, so that a launcher sees the state lost.
mkdir -p "$dir/lost"
sed "s|dir: \"$dir/ckpt\"|dir: \"$dir/lost/ckpt\"|" "$WORK/ckpt.pbtxt" > "$WORK/lost.pbtxt"
grep -q "$dir/lost/ckpt" "$WORK/lost.pbtxt" || fail "no checkpoint dir to replace"
"$SERVER_BIN" --config="$WORK/lost.pbtxt" --rank=0 --port=0 --port_file="$dir/lost/port" \
  2> "$dir/lost/server.log" &
lost_server=$!
for _ in $(seq 100); do [ -s "$dir/lost/port" ] && break; sleep 0.1; done
[ -s "$dir/lost/port" ] || { cat "$dir/lost/server.log" >&2; fail "lost: the server did not start"; }
rm -rf "$dir/lost/ckpt" && touch "$dir/lost/ckpt"
kill -TERM "$lost_server"
status=0
wait "$lost_server" || status=$?
[ "$status" -eq 3 ] || fail "a final checkpoint not written: exit status $status, expected 3"
grep -q "checkpoint: the final checkpoint was not written: cannot" "$dir/lost/server.log" ||
  { tail -5 "$dir/lost/server.log" >&2; fail "the lost checkpoint was not logged"; }

# A damaged checkpoint is refused, never loaded: the server names it and exits 1.
printf '\xa5\x5a\xa5\x5a' | dd of="$dir/ckpt/shard-0.ckpt" bs=1 seek=100 conv=notrunc status=none
status=0
"$SERVER_BIN" --config="$WORK/ckpt.pbtxt" --rank=0 --port=0 2> "$dir/damaged.log" || status=$?
[ "$status" -eq 1 ] || fail "a damaged checkpoint: exit status $status, expected 1"
grep -q "shard-0.ckpt: damaged checkpoint" "$dir/damaged.log" ||
  { cat "$dir/damaged.log" >&2; fail "the damaged checkpoint was not named"; }
# --check refuses what the start refuses: the damaged file, a checkpoint dir it cannot write.
status=0
"$SERVER_BIN" --config="$WORK/ckpt.pbtxt" --rank=0 --check 2> "$dir/check_damaged.log" || status=$?
[ "$status" -eq 1 ] && grep -q "shard-0.ckpt: damaged checkpoint" "$dir/check_damaged.log" ||
  { cat "$dir/check_damaged.log" >&2; fail "--check took the damaged checkpoint ($status)"; }
status=0
"$SERVER_BIN" --config="$WORK/lost.pbtxt" --rank=0 --check 2> "$dir/check_lost.log" || status=$?
[ "$status" -eq 1 ] && grep -q "cannot" "$dir/check_lost.log" ||
  { cat "$dir/check_lost.log" >&2; fail "--check took an unwritable checkpoint dir ($status)"; }
# Under an engine's placement (Slurm here) a --port that says otherwise is refused (exit 2).
status=0
SLURM_PROCID=1 SLURM_NTASKS=4 SLURM_STEP_NODELIST=localhost SLURM_STEP_TASKS_PER_NODE=4 \
  "$SERVER_BIN" --config="$WORK/job.pbtxt" --check --port=1234 2> "$dir/check_slurm.log" || status=$?
[ "$status" -eq 2 ] && grep -q -- "--port=1234 contradicts the slurm placement, which listens on localhost:29501" \
  "$dir/check_slurm.log" || { cat "$dir/check_slurm.log" >&2; fail "a contradicting --port ($status)"; }
# Without --port a server listens where the config lists it; another --port is warned of.
listed="$WORK/listed.pbtxt"
sed 's/^cluster {\(.*\)}$/cluster {\1 server_addresses: ["127.0.0.1:41090", "127.0.0.1:41091"] }/' \
  "$WORK/job.pbtxt" > "$listed"
grep -q "41091" "$listed" || fail "no cluster line to add server_addresses to"
"$SERVER_BIN" --config="$listed" --rank=1 --check > "$dir/check_listed.out" 2>&1 ||
  { cat "$dir/check_listed.out" >&2; fail "--check of a config with server_addresses failed"; }
grep -q "would listen on 127.0.0.1:41091" "$dir/check_listed.out" ||
  { cat "$dir/check_listed.out" >&2; fail "the server does not take its listed port"; }
"$SERVER_BIN" --config="$listed" --rank=1 --port=41095 --check > "$dir/check_port.out" 2>&1 ||
  fail "--check with --port failed"
grep -q "warning: --port=41095, but .* lists server 1 as 127.0.0.1:41091" "$dir/check_port.out" ||
  { cat "$dir/check_port.out" >&2; fail "another --port than the listed one was not warned of"; }
# So does a server of model.kind REGISTERED, which learns its job only at the first
# handshake: a damaged file is damaged for any job.
sed 's/^model {.*}$/model { kind: REGISTERED }/' "$WORK/ckpt.pbtxt" > "$WORK/ckpt_registered.pbtxt"
grep -q "kind: REGISTERED" "$WORK/ckpt_registered.pbtxt" || fail "no model line to replace"
status=0
timeout 20 "$SERVER_BIN" --config="$WORK/ckpt_registered.pbtxt" --rank=0 --port=0 \
  2> "$dir/damaged_registered.log" || status=$?
[ "$status" -eq 1 ] || fail "a damaged checkpoint, REGISTERED: exit status $status, expected 1"
grep -q "shard-0.ckpt: damaged checkpoint" "$dir/damaged_registered.log" ||
  { cat "$dir/damaged_registered.log" >&2; fail "REGISTERED: the damaged checkpoint was not named"; }
echo "PASS"
