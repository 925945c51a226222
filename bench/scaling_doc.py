#!/usr/bin/env python3
"""The tables of docs/scaling.md from bench/results/scaling.json (bench/scaling.sh writes
both): one section per run, in the order of the file.

    bench/scaling_doc.py [--out docs/scaling.md] [--check]

Prints the tables; with --out, writes them to that file, keeping what follows its
"## Reading" heading (the written reading outlives a rerun). With --check, writes nothing
and fails when the --out file's tables are not what the results file makes.
"""

import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "bench/results/scaling.json")

INTRO = (
    "Every server and every worker runs on an emulated host of its own (bench/net/hosts.sh: one "
    "network namespace per host, a veth link to a bridge, each link shaped to the rate in both "
    "directions). Step time: median over every worker's steps after the warm-up. Bytes per step: "
    "one worker's push and pull payloads. All hosts share one machine's cores, with other "
    "engineers' builds: with more processes than cores the CPU share of a step grows with the "
    "process count, which a real rack would not show. Compare rows only within one run.")


def mb(n):
    return f"{n / 1e6:.3f} MB"


def ratio(measured, model):
    return f"{measured / model:.2f}" if model else "-"


def basic_table(rows):
    """The columns of the first scaling runs (the MLP), whose rows have no process figures."""
    lines = ["| config | servers | workers | step ms | compute ms | wire ms | pushed / step | "
             "pulled / step | model ms | model error | model wire ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        model, model_wire = r["predicted_step_ms"], r["predicted_wire_ms"]
        err = f"{(model - r['step_ms_median']) / r['step_ms_median'] * 100:+.0f}%" if model else "-"
        lines.append(
            f"| {r['config']} | {r['servers']} | {r['workers']} | {r['step_ms_median']:.1f} | "
            f"{r['compute_ms_median']:.1f} | {r['wire_ms_median']:.1f} | "
            f"{mb(r['bytes_pushed_per_step'])} | {mb(r['bytes_pulled_per_step'])} | "
            f"{f'{model:.1f}' if model else '-'} | {err} | {f'{model_wire:.1f}' if model else '-'} |")
    return lines


def rss_path(p):
    """RSS after warm-up -> (halfway ->) at the end, in MiB."""
    mid = f" -> {p['rss_mid_mib']:.0f}" if "rss_mid_mib" in p else ""
    return f"{p['rss_start_mib']:.0f}{mid} -> {p['rss_end_mib']:.0f}"


def role(processes, prefix):
    return [p for n, p in sorted(processes.items()) if n.startswith(prefix)]


def full_tables(rows):
    """Step against the model, then memory and CPU per process, for rows with both."""
    step = ["| config | servers | workers | step ms | link-bound model ms | step / model | "
            "model CPU bound ms | mean step ms | compute ms | encode ms | wire ms | decode ms | "
            "apply ms | pushed / step | pulled / step |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    memory = ["| config | servers | workers | server RSS MiB, first sample after warm-up (-> halfway) "
              "-> end (largest server) | worker RSS MiB (largest worker) | largest growth of any process "
              "| CPU ms per step: servers, workers (all of them) |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        link, cpu = r.get("predicted_link_ms"), r.get("predicted_cpu_bound_ms")
        mean = "step_ms_mean"
        step.append(
            f"| {r['config']} | {r['servers']} | {r['workers']} | {r['step_ms_median']:.0f} | "
            f"{f'{link:.0f}' if link else '-'} | {ratio(r['step_ms_median'], link)} | "
            f"{f'{cpu:.0f}' if cpu else '-'} | "
            f"{f'{r[mean]:.0f}' if mean in r else '-'} | "
            f"{r['compute_ms_median']:.0f} | {r['encode_ms_median']:.0f} | "
            f"{r['wire_ms_median']:.0f} | {r['decode_ms_median']:.0f} | {r['apply_ms_median']:.0f} | "
            f"{mb(r['bytes_pushed_per_step'])} | {mb(r['bytes_pulled_per_step'])} |")
        procs = r["processes"]
        if not procs:
            memory.append(f"| {r['config']} | {r['servers']} | {r['workers']} | - | - | - | - |")
            continue
        servers, workers = role(procs, "server-"), role(procs, "worker-")
        big_s = max(servers, key=lambda p: p["rss_end_mib"])
        big_w = max(workers, key=lambda p: p["rss_end_mib"])
        name, grow = max(procs.items(), key=lambda kv: kv[1]["rss_growth_mib"])

        def per_step(ps):
            steps = max(p["steps"] for p in ps)
            return sum(p["cpu_s"] for p in ps) * 1000 / steps if steps else float("nan")

        memory.append(
            f"| {r['config']} | {r['servers']} | {r['workers']} | "
            f"{rss_path(big_s)} | "
            f"{big_w['rss_start_mib']:.0f} -> {big_w['rss_end_mib']:.0f} | "
            f"{grow['rss_growth_mib']:+.1f} MiB ({grow['rss_growth_percent']:+.1f}%, {name}) | "
            f"{per_step(servers):.0f}, {per_step(workers):.0f} |")
    return step + [""] + memory


def memory_from(run):
    if "memory_warmup" not in run or run["memory_warmup"] == run["warmup"]:
        return ""
    return f" (memory from step {run['memory_warmup']})"


def tables():
    rows = json.load(open(RESULTS))
    runs = []
    for r in rows:
        if not runs or runs[-1][0] != r["run"]:
            runs.append((r["run"], []))
        runs[-1][1].append(r)
    lines = ["# Scaling on emulated hosts", "", INTRO, ""]
    for run, group in runs:
        rates = ", ".join(sorted({r["rate"] for r in group}))
        lines += [f"## `{run['command']}`", "",
                  f"Started {run['started']}, commit {run['commit']}, {rates} per host, "
                  f"{run['steps']} steps of which the first {run['warmup']} are warm-up"
                  # Runs before the memory warm-up had one warm-up for both.
                  f"{memory_from(run)}, on a "
                  f"shared {run['cores']}-core machine (load average {run['load_end']} at the end).",
                  ""]
        lines += full_tables(group) if "processes" in group[0] else basic_table(group)
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = tables()
    old = open(args.out).read() if args.out and os.path.exists(args.out) else ""
    reading = old.find("\n## Reading")
    if args.check:
        if not args.out or old[:reading if reading >= 0 else len(old)] != text:
            sys.exit(f"scaling_doc.py: {args.out}'s tables are not what {RESULTS} makes: run "
                     "bench/scaling_doc.py --out docs/scaling.md")
        return
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + (old[reading:] if reading >= 0 else ""))


if __name__ == "__main__":
    main()
