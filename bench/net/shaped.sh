#!/usr/bin/env bash
# Runs one command inside a private network namespace whose loopback is shaped to RATE, so
# every process the command starts (servers, workers, peers) shares that one link.
# Nothing leaves the machine: the namespace has only its own loopback.
#
#   bench/net/shaped.sh RATE [--delay MS] -- COMMAND [ARGS...]
#
# RATE: a tc rate such as 1gbit, 10gbit, 500mbit, or "unshaped" (namespace, no qdisc).
# --delay MS adds a one-way delay with netem (0 by default). Needs root (ip netns, tc).
set -euo pipefail

usage() { echo "usage: $0 RATE [--delay MS] -- COMMAND [ARGS...]" >&2; exit 2; }
[ $# -ge 3 ] || usage
rate="$1"; shift
delay_ms=0
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --delay) delay_ms="${2:?--delay needs milliseconds}"; shift 2 ;;
    *) echo "$0: unknown option '$1'" >&2; usage ;;
  esac
done
[ "${1:-}" = "--" ] || usage
shift
[ $# -ge 1 ] || usage

if [ "$(id -u)" -ne 0 ]; then
  echo "$0: needs root to create a network namespace and shape it with tc (run as root, or under sudo)" >&2
  exit 77
fi
for tool in ip tc; do
  command -v "$tool" >/dev/null || { echo "$0: '$tool' not found: install iproute2" >&2; exit 77; }
done
if [ "$rate" != "unshaped" ] && ! [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$ ]]; then
  echo "$0: RATE must look like 1gbit, 10gbit, 500mbit or be 'unshaped', got '$rate'" >&2
  exit 2
fi
[[ "$delay_ms" =~ ^[0-9]+$ ]] || { echo "$0: --delay must be whole milliseconds, got '$delay_ms'" >&2; exit 2; }

# Token-bucket size for RATE: 2 ms of traffic at the rate, and at least 128 KiB (two
# loopback-MTU packets), so the shaper itself does not hold a fast link below its rate.
burst_bytes() {
  awk -v rate="$1" 'BEGIN {
    n = rate + 0; unit = rate; sub(/^[0-9.]+/, "", unit)
    scale = (unit == "gbit") ? 1e9 : (unit == "mbit") ? 1e6 : (unit == "kbit") ? 1e3 : 1
    b = n * scale * 0.002 / 8; if (b < 131072) b = 131072
    printf "%d", b
  }'
}

ns="tamp-shaped-$$"
ip netns add "$ns"
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
ip netns exec "$ns" ip link set lo up
if [ "$rate" != "unshaped" ]; then
  ip netns exec "$ns" tc qdisc add dev lo root handle 1: tbf rate "$rate" burst "$(burst_bytes "$rate")" latency 100ms
  if [ "$delay_ms" -gt 0 ]; then
    ip netns exec "$ns" tc qdisc add dev lo parent 1:1 handle 10: netem delay "${delay_ms}ms"
  fi
elif [ "$delay_ms" -gt 0 ]; then
  ip netns exec "$ns" tc qdisc add dev lo root netem delay "${delay_ms}ms"
fi
ip netns exec "$ns" "$@"
