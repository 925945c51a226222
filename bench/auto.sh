#!/usr/bin/env bash
# docs/auto.md's evidence in one command (issue 19 item 3): the plans and their decision
# time (bench/auto_plan.py), auto against none and the best hand-picked config on one shared
# link per model and rate (bench/auto_vs.py: the MLP, the CNN and the ResNet-50, BERT-base
# and GPT-2 small layouts at 1 Gbit/s, 10 Gbit/s and unshaped), and with a link per host
# (bench/scaling.sh on emulated hosts: the ResNet-50 layout's none, top-k 1% and auto), then
# both generated tables of docs/auto.md and docs/scaling.md. Needs root (network namespaces).
#
#   bench/auto.sh [--reps N] [--models mlp,cnn,...] [--hosts_points "2x4"]
#                 [--hosts_rates "1gbit 10gbit"] [--skip_vs] [--skip_hosts]
#
# On this 2-core machine the whole set takes about an hour: BERT and GPT-2 without
# compression run 28-32 s steps at 1 Gbit/s (8 steps each), and a job of either holds ~20 GB
# (4 workers and 2 servers of 110-124M parameters); run nothing else meanwhile. On 24 GB,
# GPT-2's 10 Gbit/s `auto` run was OOM-killed (2026-11-26): leave it out with --models.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=2 models="mlp,cnn,resnet50,bert_base,gpt2_small" hosts_points="2x4"
hosts_rates="1gbit 10gbit" skip_vs=0 skip_hosts=0
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --hosts_points) hosts_points=$2; shift 2 ;;
    --hosts_rates) hosts_rates=$2; shift 2 ;;
    --skip_vs) skip_vs=1; shift ;;
    --skip_hosts) skip_hosts=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "auto.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "auto.sh: needs root (network namespaces, tc)" >&2; exit 77; }

python3 bench/auto_plan.py
[ "$skip_vs" -eq 1 ] || python3 bench/auto_vs.py --models "$models" --reps "$reps"
if [ "$skip_hosts" -eq 0 ]; then
  for rate in $hosts_rates; do
    bench/scaling.sh --rate "$rate" --points "$hosts_points" --steps 30 --warmup 5 \
      --memory_warmup 15 --out docs/scaling.md \
      --configs "scaling/resnet50_none scaling/resnet50_topk1_ef scaling/resnet50_auto"
  done
fi
python3 bench/auto_plan.py --doc
python3 bench/auto_vs.py --doc
