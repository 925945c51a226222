#!/usr/bin/env bash
# The manifests pass check_manifests.py, the CONFIG they carry passes Tamp's own validation
# and placement under Kubernetes, and each kind of mismatch a user could make is caught with
# a message naming it.
set -euo pipefail
dir=deploy/k8s
manifests=("$dir/configmap.yaml" "$dir/secret.yaml" "$dir/servers.yaml" "$dir/workers.yaml")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python=/usr/bin/python3

"$python" "$dir/check_manifests.py" --config_out="$work/job.pbtxt" "${manifests[@]}"

# The embedded CONFIG loads and validates, and a server pod's placement resolves to shard 1
# of the StatefulSet's DNS names (no listening: --check stops after reading the Secret's
# files, made here as a pod would mount them: a throwaway PKI and a token).
bash tests/gen_certs.sh "$work/pki" > /dev/null 2>&1
mkdir -p "$work/secrets"
cp "$work/pki/server.crt" "$work/secrets/tls.crt"
cp "$work/pki/server.key" "$work/secrets/tls.key"
cp "$work/pki/ca.crt" "$work/secrets/ca.crt"
echo "s3cret" > "$work/secrets/job-token"
sed -i "s|/etc/tamp/secrets/|$work/secrets/|g" "$work/job.pbtxt"
out=$(HOSTNAME=tamp-server-1 KUBERNETES_SERVICE_HOST=10.0.0.1 server/tamp_server \
      --config="$work/job.pbtxt" --placement=kubernetes --k8s_statefulset=tamp-server \
      --k8s_service=tamp-server --base_port=29500 --checkpoint_dir="$work/checkpoints" \
      --check 2>&1) || {
  echo "FAIL: tamp_server --check refused the ConfigMap's CONFIG: $out"; exit 1; }
grep -q "shard 1 of 2" <<<"$out" || { echo "FAIL: unexpected placement: $out"; exit 1; }
grep -q "tamp-server-0.tamp-server:29500" <<<"$out" || { echo "FAIL: unexpected servers: $out"; exit 1; }
# The test PKI's server certificate names localhost and loopback, not the pod's DNS name:
# --check warns that workers dialing that name will refuse it.
grep -qF "not 'tamp-server-1.tamp-server': workers that dial 'tamp-server-1.tamp-server' will refuse this server" <<<"$out" ||
  { echo "FAIL: no warning about the certificate's names: $out"; exit 1; }

# The worker container's command, run twice as the kubelet would (a restart reruns it in the
# same pod): the first start runs tamp_worker with the flags alone, the second with
# TAMP_RESTART=1. A stand-in records what it got; the emptyDir is a directory of the test's.
mkdir -p "$work/bin" "$work/run-tamp"
printf '#!/bin/sh\necho "TAMP_RESTART=${TAMP_RESTART:-} $*" >> %s\n' "$work/started" > "$work/bin/tamp_worker"
chmod +x "$work/bin/tamp_worker"
"$python" - "$dir/workers.yaml" "$work" <<'PY' > "$work/command"
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
command = job["spec"]["template"]["spec"]["containers"][0]["command"]
work = sys.argv[2]
print("\0".join(arg.replace("/opt/tamp/bin", f"{work}/bin").replace("/run/tamp", f"{work}/run-tamp")
                for arg in command), end="")
PY
for _ in 1 2; do xargs -0 -a "$work/command" env -u TAMP_RESTART; done
first=$(sed -n 1p "$work/started") second=$(sed -n 2p "$work/started")
[[ "$first" == "TAMP_RESTART= --config=/etc/tamp/job.pbtxt --placement=kubernetes "* ]] ||
  { echo "FAIL: the worker's first start ran: $first"; exit 1; }
[[ "$second" == "TAMP_RESTART=1 --config=/etc/tamp/job.pbtxt --placement=kubernetes "* ]] ||
  { echo "FAIL: the worker's restart ran: $second"; exit 1; }

# expect_problem SED_EXPR FILE MESSAGE: the edited manifests must fail with MESSAGE.
expect_problem() {
  local expr=$1 file=$2 message=$3
  mkdir -p "$work/bad"
  cp "${manifests[@]}" "$work/bad/"
  sed -i "$expr" "$work/bad/$file"
  if out=$("$python" "$dir/check_manifests.py" "$work"/bad/*.yaml 2>&1); then
    echo "FAIL: '$expr' in $file passed the check"; exit 1
  fi
  grep -qF -- "$message" <<<"$out" || { echo "FAIL: '$expr': expected '$message', got: $out"; exit 1; }
  rm -rf "$work/bad"
}
expect_problem 's/replicas: 2/replicas: 3/' servers.yaml "replicas is 3, the CONFIG's cluster.num_servers is 2"
expect_problem 's/completions: 4/completions: 2/' workers.yaml "completions is 2, the CONFIG's cluster.num_workers is 4"
expect_problem 's/completionMode: Indexed/completionMode: NonIndexed/' workers.yaml "completionMode must be Indexed"
expect_problem 's/--k8s_service=tamp-server/--k8s_service=tamp-servers/' workers.yaml "--k8s_service is 'tamp-servers', expected 'tamp-server'"
expect_problem 's/clusterIP: None/clusterIP: 10.0.0.9/' servers.yaml "must be headless"
expect_problem 's/serviceName: tamp-server/serviceName: other/' servers.yaml "serviceName is 'other'"
expect_problem 's/--base_port=29500/--base_port=29501/' servers.yaml "--base_port is '29501', expected '29500'"
expect_problem '/job-token:/d' secret.yaml "/etc/tamp/secrets/job-token (from the command or the CONFIG) is not mounted"
expect_problem 's/nvidia.com\/gpu: 1}/cpu: "4"}/' workers.yaml "workers must request nvidia.com/gpu"
expect_problem 's/secretName: tamp-secrets/secretName: tamp-secret/' workers.yaml "mounts Secret tamp-secret, which no manifest defines"
expect_problem 's/num_workers: 4/num_workers: 8/' configmap.yaml "cluster.num_workers is 8"
expect_problem 's/restartPolicy: OnFailure/restartPolicy: Never/' workers.yaml "restartPolicy is 'Never', expected 'OnFailure'"
expect_problem 's/backoffLimit: 4 /backoffLimit: 0 /' workers.yaml "backoffLimit is 0"
expect_problem 's/export TAMP_RESTART=1/true/' workers.yaml "must set TAMP_RESTART=1 when it restarts"
expect_problem '/device: CUDA/d' configmap.yaml "the CONFIG does not say device: CUDA"
expect_problem '/checkpoint { dir/d' configmap.yaml "the CONFIG has no checkpoint { dir }"
expect_problem 's/^    checkpoint { dir/    # checkpoint { dir/' configmap.yaml "the CONFIG has no checkpoint { dir }"
expect_problem 's/{name: checkpoints, mountPath: \/var\/lib\/tamp\/checkpoints}/{name: secrets, mountPath: \/var\/lib\/tamp\/checkpoints}/' servers.yaml "checkpoint.dir /var/lib/tamp/checkpoints is not on a volumeClaimTemplate volume's mountPath"
# A pod not run as root: the Secret's files must be readable by its group, the claim writable.
expect_problem 's/defaultMode: 0440/defaultMode: 0400/' servers.yaml "Secret tamp-secrets is mounted with defaultMode 0400, which user 65532 cannot read"
expect_problem 's/, fsGroup: 65532//' servers.yaml "volume checkpoints (a claim) is not writable by user 65532 without securityContext.fsGroup"
expect_problem 's/, fsGroup: 65532//' workers.yaml "Secret tamp-secrets is mounted with defaultMode 0440, which user 65532 cannot read"
# The claim mounted above checkpoint.dir (the directory inside the volume) is as good.
mkdir -p "$work/parent"
cp "${manifests[@]}" "$work/parent/"
sed -i 's/{name: checkpoints, mountPath: \/var\/lib\/tamp\/checkpoints}/{name: checkpoints, mountPath: \/var\/lib\/tamp}/' "$work/parent/servers.yaml"
grep -q "mountPath: /var/lib/tamp}" "$work/parent/servers.yaml" || { echo "FAIL: the parent mount edit did not apply"; exit 1; }
out=$("$python" "$dir/check_manifests.py" "$work"/parent/*.yaml 2>&1) ||
  { echo "FAIL: a claim mounted above checkpoint.dir was refused: $out"; exit 1; }
echo "PASS"
