#!/usr/bin/env bash
# A one-machine Slurm cluster (slurmctld + slurmd + munge) in a private directory, for tests
# and for trying deploy/slurm/tamp.sbatch without a real cluster. Needs root and Debian's
# slurm-wlm and munge packages.
#
#   deploy/slurm/local_cluster.sh start DIR   # prints "export SLURM_CONF=DIR/slurm.conf"
#   deploy/slurm/local_cluster.sh stop DIR
#
# Everything (key, socket, state, logs, pid files) lives in DIR; the daemons use their own
# ports (TAMP_SLURM_PORT, default 16817, and the next one), so a real Slurm or munge on the
# machine is left alone.
set -euo pipefail
usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1 dir=$2

stop() {
  for pidfile in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  sleep 1
  for pidfile in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [ -f "$pidfile" ] && kill -9 "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

case "$action" in
  stop) stop; exit 0 ;;
  start) ;;
  *) usage ;;
esac

[ "$(id -u)" -eq 0 ] || { echo "$0: needs root (slurmd runs jobs as their users)" >&2; exit 77; }
for tool in munged slurmctld slurmd sinfo; do
  command -v "$tool" >/dev/null || { echo "$0: '$tool' not found: apt-get install slurm-wlm munge" >&2; exit 77; }
done
mkdir -p "$dir"/state "$dir"/spool
dir=$(cd "$dir" && pwd)
port=${TAMP_SLURM_PORT:-16817}
node=$(hostname -s)

# munge: a fresh key and a private socket.
head -c 1024 /dev/urandom >"$dir/munge.key"
chmod 400 "$dir/munge.key"
munged --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munged.seed"

cat >"$dir/slurm.conf" <<CONF
ClusterName=tamp-local
SlurmctldHost=$node
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=tamp Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 60); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed)'; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 1
done
echo "$0: the node did not become idle within 60 s; logs: $dir/slurmctld.log $dir/slurmd.log" >&2
sinfo >&2 || true
stop
exit 1
