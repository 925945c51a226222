#!/usr/bin/env python3
"""Samples the memory (VmRSS) and CPU time of a job's tamp_server and tamp_worker processes
while it runs, and says per process how they changed after the warm-up steps.

    bench/proc_sample.py sample MARKER OUT EVENTS...   # until SIGTERM; JSON lines to OUT
    proc_sample.summarize(OUT, warmup)                  # from Python: per-process figures

`sample` finds the processes by their name (tamp_server, tamp_worker) and MARKER in their
command line (e.g. the job's config path), so it sees the real processes whatever wraps
their start (`ip netns exec`, shells), every 0.5 s. With each sample it notes the fewest
STEP events any of EVENTS (the workers' stdout) holds, so that the summary can start after
the warm-up: memory allocated while the first steps set up buffers is not growth.
Linux only (/proc). Used by bench/scaling.sh.
"""

import json
import os
import signal
import sys
import time

NAMES = ("tamp_server", "tamp_worker")
TICKS = os.sysconf("SC_CLK_TCK")


def _processes(marker):
    """{"server-0": pid, "worker-3": pid, ...} of the job's processes now running."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as f:
                comm = f.read().strip()
            if comm not in NAMES:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:  # Gone since listdir.
            continue
        if not any(marker in a for a in args):
            continue
        rank = next((a.split("=", 1)[1] for a in args if a.startswith("--rank=")), "?")
        found[f"{comm[len('tamp_'):]}-{rank}"] = int(entry)
    return found


def _read(pid):
    """(VmRSS in KiB, user + system CPU seconds) of pid, or None once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return rss, (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
    except (OSError, StopIteration):
        return None


def _steps(path):
    try:
        with open(path) as f:
            return sum(1 for line in f if '"STEP"' in line)
    except OSError:
        return 0


def sample(marker, out, events):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    with open(out, "w") as f:
        while not stop:
            steps = min(_steps(p) for p in events) if events else 0
            procs = {}
            for name, pid in sorted(_processes(marker).items()):
                figures = _read(pid)
                if figures:
                    procs[name] = {"rss_kib": figures[0], "cpu_s": figures[1]}
            f.write(json.dumps({"t": time.time(), "steps": steps, "procs": procs}) + "\n")
            f.flush()
            time.sleep(0.5)


def summarize(path, warmup):
    """Per process, from the first sample at which every worker had logged `warmup` steps (or
    the first sample, when none had) to the last before any worker was done: RSS at both
    ends, halfway and its peak in MiB, the growth, and the CPU seconds used and steps logged
    in between."""
    samples = [json.loads(l) for l in open(path) if l.strip()]
    if not samples:
        return {}
    start = next((i for i, s in enumerate(samples) if s["steps"] >= warmup and s["procs"]), 0)
    # The end: the last sample at which every process ran and every worker had a step to go
    # (a worker that is done frees its memory on the way out, which is not the run's; in a
    # SYNC run no worker is more than one step ahead of the slowest).
    everyone = max(len(s["procs"]) for s in samples)
    final = max(s["steps"] for s in samples)
    end = max((i for i, s in enumerate(samples)
               if len(s["procs"]) == everyone and s["steps"] <= final - 2), default=start)
    window = samples[start:max(end, start) + 1]
    result = {}
    names = sorted({n for s in window for n in s["procs"]})
    for name in names:
        seen = [s for s in window if name in s["procs"]]
        first, last = seen[0], seen[-1]
        rss = [s["procs"][name]["rss_kib"] for s in seen]
        result[name] = {
            "rss_start_mib": rss[0] / 1024, "rss_mid_mib": rss[len(rss) // 2] / 1024,
            "rss_end_mib": rss[-1] / 1024,
            "rss_peak_mib": max(rss) / 1024,
            "rss_growth_mib": (rss[-1] - rss[0]) / 1024,
            "rss_growth_percent": (rss[-1] - rss[0]) / rss[0] * 100 if rss[0] else 0.0,
            "cpu_s": last["procs"][name]["cpu_s"] - first["procs"][name]["cpu_s"],
            "seconds": last["t"] - first["t"],
            "steps": last["steps"] - first["steps"],
        }
    return result


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] != "sample":
        sys.exit(__doc__.split("\n\n")[1])
    sample(sys.argv[2], sys.argv[3], sys.argv[4:])
