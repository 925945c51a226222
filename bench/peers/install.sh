#!/usr/bin/env bash
# Installs the PyTorch peer of bench/peers (Debian's python3-torch) with OpenBLAS as the
# system BLAS and LAPACK, then checks that torch really loads OpenBLAS. Idempotent.
#
#   bench/peers/install.sh
#
# Why OpenBLAS: Debian's torch calls whatever libblas.so.3 the alternatives system selects;
# with the reference BLAS its GEMMs run about 10x slower, which would make an unfair peer.
# Needs root (apt-get, update-alternatives). Uses /usr/bin/python3, the interpreter Debian's
# torch is installed for (a pyenv python3 earlier on PATH does not see it).
set -euo pipefail

readonly python=/usr/bin/python3
readonly multiarch_dir=/usr/lib/x86_64-linux-gnu/openblas-pthread

if [ "$(id -u)" -ne 0 ]; then
  echo "$0: needs root to install packages with apt-get (run as root, or under sudo)" >&2
  exit 77
fi

packages=(python3-torch libopenblas0-pthread)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >&2
fi

for library in libblas.so.3 liblapack.so.3; do
  update-alternatives --set "${library}-x86_64-linux-gnu" "${multiarch_dir}/${library}" >&2
done

# torch must map OpenBLAS, not the reference libblas.so.3. The kernel family it picked is
# printed: OPENBLAS_CORETYPE overrides it (bench/speed_table.sh sets it for Tamp's runs).
"$python" - <<'EOF'
import sys
import torch
libraries = {line.split()[-1] for line in open("/proc/self/maps") if "blas" in line}
openblas = sorted(path for path in libraries if "/libopenblas" in path)
if not openblas:
    sys.exit(f"torch {torch.__version__} does not load OpenBLAS; BLAS libraries mapped: "
             f"{sorted(libraries) or 'none'}")
import ctypes
openblas_lib = ctypes.CDLL(openblas[0])
openblas_lib.openblas_get_corename.restype = ctypes.c_char_p
core = openblas_lib.openblas_get_corename().decode()
print(f"torch {torch.__version__}, BLAS: {openblas[0]} (OpenBLAS kernels for {core})")
EOF
