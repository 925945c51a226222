#!/usr/bin/env bash
# Admission and TLS end to end (issue 7, README "Security"). Certificates (tests/gen_certs.sh,
# openssl CLI) and a job token are made here, in TEST_TMPDIR.
#   1. A 2x2 job through `tamp run` over mutual TLS with the token completes.
#   2. Servers with TLS + token, a worker without the token: refused (UNAUTHENTICATED), and a
#      worker with the token then still trains from step 0 (the refused one changed nothing).
#   3. A plaintext worker against the TLS servers: fails.
#   4. A worker without a client certificate while mutual TLS is required: fails.
#   5. A plaintext config on a non-loopback host without `plaintext: true`: refused on load.
source tests/testlib.sh

certs="$WORK/certs"
bash tests/gen_certs.sh "$certs" > "$WORK/gen_certs.log" 2>&1 ||
  { cat "$WORK/gen_certs.log" >&2; fail "could not make certificates"; }
printf '  s3cret-%s\n' "$RANDOM$RANDOM" > "$WORK/token"
tls="tls { cert_file: \"$certs/server.crt\" key_file: \"$certs/server.key\" ca_file: \"$certs/ca.crt\"
  client_cert_file: \"$certs/client.crt\" client_key_file: \"$certs/client.key\"
  require_client_cert: true }"
token="job_token_file: \"$WORK/token\""

# 1. The launcher, mutual TLS and the token.
config="$WORK/tls.pbtxt"
write_config "$config" cluster="$token $tls" training="max_steps: 20"
"$TAMP_BIN" run "$config" --summary_json="$WORK/summary.json" --run_dir="$WORK/run-tls" \
  --server_binary="$SERVER_BIN" --worker_binary="$WORKER_BIN" > "$WORK/tls.out" 2>&1 ||
  { cat "$WORK/tls.out" >&2; fail "TLS + token run failed"; }
grep -q '"steps":20,' "$WORK/summary.json" || { cat "$WORK/summary.json" >&2; fail "steps != 20"; }
grep -rq "mutual TLS, job token required" "$WORK/run-tls" ||
  fail "servers did not log mutual TLS with a token"
expect_no_leftover_processes
echo "ok: 2x2 job over mutual TLS with the job token"

# Servers started by hand with config $config, for workers with other configs.
start_servers "$WORK" "$config" 2
servers=$SERVERS

# expect_worker_failure NAME CONFIG NEEDLE: worker 0 with CONFIG must fail, printing NEEDLE.
expect_worker_failure() {
  local name=$1 worker_config=$2 needle=$3
  if "$WORKER_BIN" --config="$worker_config" --rank=0 --servers="$servers" \
      > /dev/null 2> "$WORK/$name.log"; then
    fail "$name: worker succeeded"
  fi
  grep -qiF -- "$needle" "$WORK/$name.log" || { cat "$WORK/$name.log" >&2; fail "$name: no '$needle'"; }
  echo "ok: $name -> $(grep -m1 -iF -- "$needle" "$WORK/$name.log")"
}

# 2. No token.
write_config "$WORK/notoken.pbtxt" cluster="$tls connect_timeout_ms: 3000" training="max_steps: 20"
expect_worker_failure no_token "$WORK/notoken.pbtxt" "job token"
# 3. Plaintext against TLS.
write_config "$WORK/plain.pbtxt" cluster="$token connect_timeout_ms: 3000" training="max_steps: 20"
expect_worker_failure plaintext "$WORK/plain.pbtxt" "did not answer"
# 4. A client certificate no trusted CA signed (server/tls_test.cc also tries none at all).
write_config "$WORK/rogue.pbtxt" cluster="$token connect_timeout_ms: 3000
  tls { cert_file: \"$certs/rogue_client.crt\" key_file: \"$certs/rogue_client.key\"
        ca_file: \"$certs/ca.crt\" }" training="max_steps: 20"
expect_worker_failure rogue_client_cert "$WORK/rogue.pbtxt" "did not answer"

# 2b. After the refusals, a worker pair with the token trains the servers from step 0: the
# refused calls changed nothing.
worker_pids=()
for rank in 0 1; do
  "$WORKER_BIN" --config="$config" --rank=$rank --servers="$servers" \
    --dump_weights="$WORK/weights$rank" > "$WORK/events$rank" 2> "$WORK/worker$rank.log" &
  worker_pids+=($!)
  STARTED_PIDS+=($!)
done
for rank in 0 1; do
  wait "${worker_pids[$rank]}" || { cat "$WORK/worker$rank.log" >&2; fail "worker $rank failed"; }
done
cmp "$WORK/weights0" "$WORK/weights1" || fail "worker replicas differ"
steps=$(grep -c '"kind":"STEP"' "$WORK/events0")
[ "$steps" -eq 20 ] || fail "expected 20 steps after the refusals, got $steps"
echo "ok: token-holding workers trained 20 steps after the refused ones"
stop_started_processes

# 5. Plaintext on a non-loopback address needs `plaintext: true`: in the config, and in the
# address a server is told to bind.
write_config "$WORK/open.pbtxt" cluster='host: "0.0.0.0"'
if "$TAMP_BIN" run "$WORK/open.pbtxt" --run_dir="$WORK/run-open" --server_binary="$SERVER_BIN" \
    --worker_binary="$WORKER_BIN" > "$WORK/open_run.log" 2>&1; then
  fail "plaintext job on 0.0.0.0 ran without plaintext: true"
fi
grep -qF "cluster.plaintext" "$WORK/open_run.log" || { cat "$WORK/open_run.log" >&2; fail "open run: no reason"; }
write_config "$WORK/local.pbtxt"
if "$SERVER_BIN" --config="$WORK/local.pbtxt" --rank=0 --host=0.0.0.0 2> "$WORK/open.log"; then
  fail "plaintext server on 0.0.0.0 started without plaintext: true"
fi
grep -qF "cluster.plaintext" "$WORK/open.log" || { cat "$WORK/open.log" >&2; fail "open: no reason"; }
echo "ok: non-loopback plaintext refused -> $(grep -m1 -F cluster.plaintext "$WORK/open.log")"

# 6. --check reads what the start would: the token and TLS files, and the plaintext rule. A
# deployment's good config passes; a missing file, or 0.0.0.0 without plaintext, is refused
# (exit 2) naming it.
check() {  # check BINARY CONFIG [FLAGS...]: its --check's exit status; stderr in check.err.
  local binary=$1 config=$2; shift 2
  local status=0
  "$binary" --config="$config" --rank=0 "$@" --check > /dev/null 2> "$WORK/check.err" ||
    status=$?
  echo "$status"
}
workers_at=--servers=127.0.0.1:1,127.0.0.1:2
[ "$(check "$SERVER_BIN" "$config")" -eq 0 ] || { cat "$WORK/check.err" >&2; fail "check: good TLS config refused"; }
[ "$(check "$WORKER_BIN" "$config" "$workers_at")" -eq 0 ] || { cat "$WORK/check.err" >&2; fail "check: good worker refused"; }
sed "s|$WORK/token|$WORK/no-such-token|" "$config" > "$WORK/lost_token.pbtxt"
sed "s|$certs/server.key|$certs/no-such.key|; s|$certs/client.key|$certs/no-such.key|" \
  "$config" > "$WORK/lost_key.pbtxt"  # The server's and the workers' key.
for binary in "$SERVER_BIN" "$WORKER_BIN"; do
  flags=""; [ "$binary" = "$WORKER_BIN" ] && flags=$workers_at
  for case in lost_token:no-such-token lost_key:no-such.key; do
    # shellcheck disable=SC2086  # $flags is one flag or none.
    status=$(check "$binary" "$WORK/${case%%:*}.pbtxt" $flags)
    [ "$status" -eq 2 ] && grep -qF "${case#*:}" "$WORK/check.err" ||
      { cat "$WORK/check.err" >&2; fail "check: $(basename "$binary") ${case%%:*}: exit $status"; }
  done
done
[ "$(check "$SERVER_BIN" "$WORK/local.pbtxt" --host=0.0.0.0)" -eq 2 ] &&
  grep -qF "cluster.plaintext" "$WORK/check.err" ||
  { cat "$WORK/check.err" >&2; fail "check: plaintext on 0.0.0.0 passed"; }
echo "ok: --check refuses a missing token or key file -> $(head -1 "$WORK/check.err")"
echo PASS
