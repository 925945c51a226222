# Link shaping shared by bench/net/shaped.sh and bench/net/hosts.sh (sourced).

# check_rate RATE: exits 2 unless RATE is a tc rate (1gbit, 500mbit, ...) or "unshaped".
check_rate() {
  [[ "$1" == unshaped || "$1" =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$ ]] ||
    { echo "$0: RATE must look like 1gbit, 10gbit, 500mbit or be 'unshaped', got '$1'" >&2; exit 2; }
}

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

# shape NETNS DEV RATE DELAY_MS: egress of DEV in NETNS at RATE (tbf), plus DELAY_MS of
# one-way delay (netem) when it is not 0.
shape() {
  local ns=$1 dev=$2 rate=$3 delay=$4
  if [ "$rate" != "unshaped" ]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst "$(burst_bytes "$rate")" latency 100ms
    [ "$delay" -gt 0 ] && ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "${delay}ms"
  elif [ "$delay" -gt 0 ]; then
    ip netns exec "$ns" tc qdisc add dev "$dev" root netem delay "${delay}ms"
  fi
  return 0
}
