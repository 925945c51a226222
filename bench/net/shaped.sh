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
source "$(dirname "$0")/tc_shape.sh"
check_rate "$rate"
[[ "$delay_ms" =~ ^[0-9]+$ ]] || { echo "$0: --delay must be whole milliseconds, got '$delay_ms'" >&2; exit 2; }

ns="tamp-shaped-$$"
ip netns add "$ns"
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
ip netns exec "$ns" ip link set lo up
shape "$ns" lo "$rate" "$delay_ms"
ip netns exec "$ns" "$@"
