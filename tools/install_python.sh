#!/usr/bin/env bash
# Builds the Python package `tamp` (python/tamp and its extension _tamp.so) with Bazel and
# installs it for Debian's python3 into /usr/local/lib/python3.11/dist-packages/tamp
# (or $TAMP_PYTHON_PREFIX/tamp), and puts the `tamp` launcher (and tamp_server, tamp_worker)
# on the PATH as links to this checkout's build in /usr/local/bin (or $TAMP_BIN_DIR), for
# `tamp run CONFIG -- python3 ...`.
# Idempotent: each run replaces the installed package and link with this checkout's. Needs
# root (or sudo) to write there.
#
#   tools/install_python.sh && /usr/bin/python3 -c "import tamp, tamp.torch"
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh
# Optimised, as tools/train_example.sh and the benches build (-c opt: NDEBUG, no debug
# checks in the hot paths); the servers and workers too, which the launcher finds beside it.
bazel build -c opt //python:tamp //tools/tamp:tamp //server:tamp_server //worker:tamp_worker

PYTHON=/usr/bin/python3
prefix=${TAMP_PYTHON_PREFIX:-$("$PYTHON" -c 'import sys; print(f"/usr/local/lib/python{sys.version_info.major}.{sys.version_info.minor}/dist-packages")')}
SUDO=""
if [ ! -w "$(dirname "$prefix")" ] && [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi

staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir "$staging/tamp"
cp python/tamp/*.py bazel-bin/python/tamp/_tamp.so "$staging/tamp/"
$SUDO mkdir -p "$prefix"
$SUDO rm -rf "$prefix/tamp"
$SUDO cp -r "$staging/tamp" "$prefix/tamp"
$SUDO chmod -R a+rX "$prefix/tamp"
echo "install_python: installed tamp into $prefix/tamp" >&2

# The launcher finds tamp_server beside its real path (tools/tamp/binaries.h), so the link
# points into Bazel's output tree itself, not through bazel-bin (which a later build with
# other options re-points).
# tamp_server and tamp_worker too, for starting the processes without the launcher.
bindir=${TAMP_BIN_DIR:-/usr/local/bin}
$SUDO mkdir -p "$bindir"
for binary in tools/tamp/tamp server/tamp_server worker/tamp_worker; do
  target=$(readlink -f "bazel-bin/$binary")
  $SUDO ln -sfn "$target" "$bindir/$(basename "$binary")"
  echo "install_python: linked $bindir/$(basename "$binary") -> $target" >&2
done
