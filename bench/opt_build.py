"""Builds Bazel targets -c opt, as bench/speed_table.sh and bench/pytorch/run.sh do, so that
every bench measures the same optimised binaries (NDEBUG: no debug checks in the hot paths)."""

import os
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(*targets):
    """Builds `targets` -c opt; returns the folder their outputs are in (bazel-bin of -c opt,
    whatever configuration the bazel-bin link points at)."""
    subprocess.run(["bazel", "build", "-c", "opt", *targets], cwd=REPO, check=True)
    return subprocess.run(["bazel", "info", "-c", "opt", "bazel-bin"], cwd=REPO, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True).stdout.strip()
