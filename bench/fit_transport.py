#!/usr/bin/env python3
"""Fits the performance model's transport ceiling (perf::FittedTransport(), tools/tamp/
perf_model.cc) to the speed table: for each candidate ceiling, runs `tamp model CONFIG
--bandwidth LINK --transport_gbit G --json` (no job calibration, as `auto` plans) on every
row of bench/results/speed.json at the links the ceiling decides (10gbit and unshaped), and
keeps the ceiling with the most rows within 20% of the measured step (then the smallest
median error). Writes bench/results/transport_fit.json.

    bench/fit_transport.py                 # fit (~6 minutes on 2 cores)
    bench/fit_transport.py --check         # perf_model.cc holds the fitted ceiling

Rerun after bench/speed_table.sh when the transport's speed changed, then set the constant
it names (--check fails until then).
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = os.path.join(REPO, "bench/results/transport_fit.json")
SOURCE = os.path.join(REPO, "tools/tamp/perf_model.cc")
LINKS = ("10gbit", "unshaped")
GRID_GBIT = (6, 8, 9, 10, 11, 12, 15)
TARGET_ERROR = 0.20  # As bench/model_vs_measured.py's.


def constant_gbit():
    """The ceiling perf_model.cc holds: `t.max_bytes_per_ms = G / 8e3;  // Fitted: ...`."""
    with open(SOURCE) as f:
        match = re.search(r"max_bytes_per_ms = ([0-9.e+]+) / 8e3;", f.read())
    if not match:
        sys.exit(f"fit_transport: no 'max_bytes_per_ms = G / 8e3;' in {SOURCE}")
    return float(match.group(1)) / 1e9


def check():
    with open(RESULT) as f:
        fitted = json.load(f)["fitted_gbit"]
    held = constant_gbit()
    if held != fitted:
        sys.exit(f"fit_transport: tools/tamp/perf_model.cc holds a {held:g} Gbit/s ceiling, "
                 f"bench/results/transport_fit.json fitted {fitted:g}: set "
                 f"'max_bytes_per_ms = {fitted:g}e9 / 8e3'")
    print(f"fit_transport: perf_model.cc holds the fitted {fitted:g} Gbit/s")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--tamp", help="a built tamp binary (default: bazel build it)")
    args = parser.parse_args()
    if args.check:
        return check()
    sys.path.insert(0, os.path.join(REPO, "bench"))
    import model_vs_measured  # speed_entries, predict, build_tamp: only for fitting.
    model_vs_measured.use_openblas_kernels()
    tamp = args.tamp or model_vs_measured.build_tamp()
    speed = os.path.join(REPO, "bench/results/speed.json")
    rows = [(config, link, run["step_ms_median"])
            for config, link, run in model_vs_measured.speed_entries(speed) if link in LINKS]
    with open(speed) as f:
        speed_meta = json.load(f).get("meta", {})
    grid = []
    for gbit in GRID_GBIT:
        errors = []
        for config, link, measured in rows:
            row, _ = model_vs_measured.predict(tamp, config, link,
                                               model_flags=[f"--transport_gbit={gbit}"])
            errors.append({"config": os.path.relpath(config, REPO), "link": link,
                           "measured_ms": measured, "predicted_ms": row["step_ms"],
                           "error": row["step_ms"] / measured - 1})
        within = sum(abs(e["error"]) <= TARGET_ERROR for e in errors)
        median = statistics.median(abs(e["error"]) for e in errors)
        grid.append({"gbit": gbit, "within_target": within, "rows": len(errors),
                     "median_abs_error": median, "errors": errors})
        print(f"{gbit:>4} Gbit/s: {within} of {len(errors)} within "
              f"{100 * TARGET_ERROR:.0f}%, median |error| {100 * median:.1f}%", flush=True)
    best = max(grid, key=lambda g: (g["within_target"], -g["median_abs_error"]))
    result = {
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "speed_json": speed_meta,
        "links": list(LINKS),
        "rule": "most rows within the target error, then the smallest median |error|; "
                "predictions without job calibration",
        "target_error": TARGET_ERROR,
        "fitted_gbit": best["gbit"],
        "grid": grid,
    }
    with open(RESULT, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"fit_transport: {best['gbit']} Gbit/s ({best['within_target']} of {best['rows']} "
          f"rows within {100 * TARGET_ERROR:.0f}%); wrote {os.path.relpath(RESULT, REPO)}")


if __name__ == "__main__":
    main()
