#!/usr/bin/env bash
# compression.automatic through `tamp run`: a tiny layout (w 256x256 and three small tensors)
# on a 100 Mbit/s link, candidates none and top-k 1% with memory. The launcher prints the
# plan, writes the resolved config to the run directory (top-k for w, the most bytes), and the
# job runs with it: servers and workers read the same overrides. A candidate the convergence
# table shows losing more than a point is refused before anything starts.
source tests/testlib.sh

printf 'tamp-layout 1\nw 256 256\nb 256\nhead 10 256\nhead_b 10\n' > "$WORK/tiny.layout"
printf 'tamp-profile 1\nscale 1\nlayer 1 2 w b\nlayer 0.5 1 head*\n' > "$WORK/tiny.profile"
write_auto() {
  cat > "$1" <<CONFIG
version: 1
cluster { num_servers: 2 num_workers: 2 }
model { kind: LAYOUT layout_file: "tiny.layout" profile_file: "tiny.profile" }
training { max_steps: 10 }
optimizer { learning_rate: 0.05 momentum: 0.9 }
compression {
  partition_bytes: 65536
  automatic {
    bandwidth: "100mbit"
    candidates { push { name: "none" } }
    $2
  }
}
CONFIG
}
write_auto "$WORK/auto.pbtxt" \
  'candidates { push { name: "topk" ratio: 0.01 } push_feedback { kind: RESIDUAL } }'
"$TAMP_BIN" run "$WORK/auto.pbtxt" --run_dir="$WORK/run" --server_binary="$SERVER_BIN" \
  --worker_binary="$WORKER_BIN" > "$WORK/run.out" 2>&1 ||
  { cat "$WORK/run.out" >&2; fail "tamp run failed"; }
cat "$WORK/run.out"
grep -q "^auto on 100mbit: predicted step" "$WORK/run.out" || fail "no plan printed"
grep -qE '^w +\[256, 256\] +0.262 +1$' "$WORK/run.out" || fail "w is not on top-k (candidate 1)"
[ -s "$WORK/run/auto.pbtxt" ] || fail "no resolved config in the run directory"
head -1 "$WORK/run/auto.pbtxt" | grep -qE "^# compression.automatic resolved by tamp run on [0-9a-z.]+, one shared link" ||
  fail "the resolved config's first line does not name the link: $(head -1 "$WORK/run/auto.pbtxt")"
grep -q "automatic {" "$WORK/run/auto.pbtxt" && fail "the resolved config still has automatic"
grep -q 'name: "topk"' "$WORK/run/auto.pbtxt" || fail "the resolved config has no top-k"
# The unresolved config is refused by a server's and a worker's --check (exit 2), as their
# start refuses it; the resolved one passes.
for binary in "$SERVER_BIN" "$WORKER_BIN"; do
  servers=()
  [ "$binary" = "$WORKER_BIN" ] && servers=(--servers=127.0.0.1:1,127.0.0.1:2)
  for config in "$WORK/auto.pbtxt" "$WORK/run/auto.pbtxt"; do
    status=0
    "$binary" --config="$config" --rank=0 "${servers[@]}" --check > /dev/null 2> "$WORK/check.err" ||
      status=$?
    expected=0; [ "$config" = "$WORK/auto.pbtxt" ] && expected=2
    [ "$status" -eq "$expected" ] ||
      { cat "$WORK/check.err" >&2; fail "$(basename "$binary") --check $config: exit $status"; }
  done
done
# So does a server's for a REGISTERED model, whose layout only comes at the first handshake.
sed 's/kind: LAYOUT/kind: REGISTERED/' "$WORK/auto.pbtxt" > "$WORK/auto_registered.pbtxt"
status=0
"$SERVER_BIN" --config="$WORK/auto_registered.pbtxt" --rank=0 --check > /dev/null \
  2> "$WORK/check.err" || status=$?
[ "$status" -eq 2 ] && grep -q "compression.automatic: .tamp run. resolves it" "$WORK/check.err" ||
  { cat "$WORK/check.err" >&2; fail "tamp_server --check took REGISTERED with automatic ($status)"; }
grep -q "done: no test accuracy (model.kind LAYOUT: synthetic gradients), 10 steps" \
  "$WORK/run.out" || fail "the job did not finish its 10 steps"

# Top-k without memory loses 1.74 points on the MLP: refused, nothing started.
write_auto "$WORK/lossy.pbtxt" 'candidates { push { name: "topk" ratio: 0.01 } }'
if "$TAMP_BIN" run "$WORK/lossy.pbtxt" --run_dir="$WORK/lossy" --server_binary="$SERVER_BIN" \
    --worker_binary="$WORKER_BIN" > "$WORK/lossy.out" 2>&1; then
  fail "a lossy candidate was accepted"
fi
grep -q "compression.automatic.candidates\[1\].*loses 1.74 points" "$WORK/lossy.out" ||
  { cat "$WORK/lossy.out" >&2; fail "the refusal does not name the candidate and its loss"; }
[ ! -e "$WORK/lossy/server-0.log" ] || fail "a server started for a refused plan"
expect_no_leftover_processes
echo PASS
