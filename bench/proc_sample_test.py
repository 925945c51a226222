#!/usr/bin/env python3
"""bench/proc_sample.py's summary: the window starts once every worker is past the warm-up
and ends before any worker is done (a finishing worker frees its memory: not the run's)."""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proc_sample  # noqa: E402


def sample(t, steps, server_mib, worker_mib=None):
    procs = {"server-0": {"rss_kib": server_mib * 1024, "cpu_s": t * 0.5}}
    if worker_mib is not None:
        procs["worker-0"] = {"rss_kib": worker_mib * 1024, "cpu_s": t * 1.0}
    return {"t": float(t), "steps": steps, "procs": procs}


def main():
    samples = [
        sample(0, 0, 100, 200),  # Warm-up: not counted.
        sample(1, 2, 110, 210),  # First with every worker past 2 warm-up steps.
        sample(2, 3, 115, 230),
        sample(3, 3, 120, 220),  # Last with every worker two steps or more from the end (5).
        sample(4, 4, 125, 180),  # A step from the end: a faster worker may be done.
        sample(5, 5, 125, 50),   # The worker is done and freeing.
        sample(6, 5, 125),       # Gone.
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("".join(json.dumps(s) + "\n" for s in samples))
    summary = proc_sample.summarize(f.name, warmup=2)
    os.remove(f.name)
    worker, server = summary["worker-0"], summary["server-0"]
    expected = [
        (worker["rss_start_mib"], 210), (worker["rss_mid_mib"], 230), (worker["rss_end_mib"], 220),
        (worker["rss_peak_mib"], 230), (worker["rss_growth_mib"], 10),
        (round(worker["rss_growth_percent"], 3), round(10 / 210 * 100, 3)),
        (worker["cpu_s"], 2.0), (worker["steps"], 1), (worker["seconds"], 2.0),
        (server["rss_start_mib"], 110), (server["rss_end_mib"], 120), (server["cpu_s"], 1.0),
    ]
    failed = [(got, want) for got, want in expected if got != want]
    if failed:
        sys.exit(f"proc_sample_test: got/wanted {failed} in {summary}")
    print("proc_sample_test: ok")


if __name__ == "__main__":
    main()
