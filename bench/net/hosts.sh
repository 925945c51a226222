#!/usr/bin/env bash
# Emulated hosts: one network namespace per host, each joined by a veth link to a bridge in a
# "switch" namespace of its own, each link shaped with tc in both directions, so processes
# on different hosts talk across real interfaces at per-host bandwidth, as across a rack.
# Addresses (10.77.0.1 ... 10.77.0.N) exist only inside these namespaces.
#
#   bench/net/hosts.sh up NAME N RATE [--delay MS]   # hosts NAME-h0 ... NAME-h<N-1>
#   bench/net/hosts.sh exec NAME I -- COMMAND...     # run COMMAND on host I
#   bench/net/hosts.sh addr I                         # host I's address
#   bench/net/hosts.sh down NAME
#
# RATE: a tc rate (1gbit, 10gbit, 500mbit) or "unshaped". Needs root (exits 77 without).
set -euo pipefail
usage() {
  sed -n '7,10p' "$0" | sed 's/^#  */usage: /' >&2
  exit 2
}
[ $# -ge 2 ] || usage
action=$1

source "$(dirname "$0")/tc_shape.sh"

addr() { echo "10.77.0.$(($1 + 1))"; }

need_root() {
  [ "$(id -u)" -eq 0 ] || { echo "$0: needs root for network namespaces and tc" >&2; exit 77; }
  command -v ip >/dev/null && command -v tc >/dev/null ||
    { echo "$0: 'ip' and 'tc' are needed: install iproute2" >&2; exit 77; }
}

case "$action" in
  addr)
    [[ "$2" =~ ^[0-9]+$ ]] || usage
    addr "$2" ;;
  up)
    [ $# -ge 4 ] || usage
    need_root
    name=$2 count=$3 rate=$4 delay=0
    shift 4
    if [ "${1:-}" = "--delay" ]; then delay=${2:?--delay needs milliseconds}; fi
    [[ "$count" =~ ^[0-9]+$ ]] && [ "$count" -ge 1 ] && [ "$count" -le 200 ] ||
      { echo "$0: N must be in [1, 200], got '$count'" >&2; exit 2; }
    check_rate "$rate"
    [[ "$delay" =~ ^[0-9]+$ ]] || { echo "$0: --delay must be whole milliseconds" >&2; exit 2; }
    [ ${#name} -le 8 ] || { echo "$0: NAME must be at most 8 characters (interface names)" >&2; exit 2; }
    sw="$name-sw"
    ip netns add "$sw"
    ip netns exec "$sw" ip link set lo up
    ip netns exec "$sw" ip link add br0 type bridge
    ip netns exec "$sw" ip link set br0 up
    for ((i = 0; i < count; i++)); do
      host="$name-h$i"
      ip netns add "$host"
      ip netns exec "$host" ip link set lo up
      # The pair is made in the host's namespace; its peer moves to the switch.
      ip netns exec "$host" ip link add eth0 type veth peer name "p$i"
      ip netns exec "$host" ip link set "p$i" netns "$sw"
      ip netns exec "$host" ip addr add "$(addr "$i")/24" dev eth0
      ip netns exec "$host" ip link set eth0 up
      ip netns exec "$sw" ip link set "p$i" master br0
      ip netns exec "$sw" ip link set "p$i" up
      # Egress of eth0 shapes what the host sends; egress of its switch port, what it receives.
      shape "$host" eth0 "$rate" "$delay"
      shape "$sw" "p$i" "$rate" 0
    done
    echo "$count hosts $name-h0..$name-h$((count - 1)) at $(addr 0)..$(addr $((count - 1))), links $rate" ;;
  exec)
    [ $# -ge 5 ] && [ "$4" = "--" ] || usage
    need_root
    name=$2 index=$3
    shift 4
    exec ip netns exec "$name-h$index" "$@" ;;
  down)
    need_root
    name=$2
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^$name-(h[0-9]+|sw)$" || true); do
      ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "$ns"
    done ;;
  *) usage ;;
esac
