#!/usr/bin/env bash
# Installs what Tamp needs from Debian 12's packages. Idempotent: installs only what is
# missing, and runs `apt-get update` only then. Needs root (or sudo) when something is missing.
set -euo pipefail

PACKAGES=(
  build-essential git
  bazel-bootstrap bazel-rules-java
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgoogle-glog-dev libgflags-dev libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev librandom123-dev zlib1g-dev libssl-dev
  dataset-fashion-mnist
  # Tests of the deployment files: a one-machine Slurm cluster, and YAML for the manifests.
  slurm-wlm munge python3-yaml
  # The Python package (python/, docs/python.md): its extension's headers; numpy and torch
  # for its tests and examples.
  pybind11-dev python3-dev python3-numpy python3-torch
)

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install_deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    SUDO="sudo"
  else
    echo "install_deps: need root to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
