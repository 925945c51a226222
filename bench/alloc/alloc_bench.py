#!/usr/bin/env python3
"""Runs the allocation bench of bench/alloc/run.sh and writes its JSON and doc.

For each config, each round runs the job with the "before" and the "after" server and
worker binaries (the order alternates by round), each twice: for SHORT and for LONG steps
(training.max_steps; eval_every_epoch off, test_limit 1000). The minor page faults and the
user and system CPU of all the job's processes come from getrusage(RUSAGE_CHILDREN) around
each run (the launcher waits for every process it starts); a round's per-step figure is
(LONG run - SHORT run) / (LONG - SHORT), which leaves out start-up (data loading, the
first pull). The step time is the LONG run's step_ms_median (tamp run --summary_json).
Each figure is the median over rounds; every round's value is kept too.

JSON (bench/results/alloc.json):
  meta: date, base and head commits, cpu, cores, load_before/load_after (1/5/15-min load
    averages), steps [SHORT, LONG], reps, command, seconds
  results: one per config: config, path, pull (the pull codec), and for "before" and
    "after": faults_per_step, user_ms_per_step, sys_ms_per_step, step_ms_median (medians)
    and the same with _runs (every round's value)
"""

import argparse
import datetime
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import textwrap
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import speed_table  # noqa: E402  (timed_config)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TEST_LIMIT = 1000
FIGURES = ("faults_per_step", "user_ms_per_step", "sys_ms_per_step", "step_ms_median")


def fail(message):
    sys.exit(f"alloc_bench: {message}")


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def git(*args):
    return subprocess.run(["git", *args], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True).stdout.strip()


def head_commit():
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (" (with uncommitted changes)" if git("status", "--porcelain") else "")


def pull_codec(text):
    match = re.search(r"pull\s*\{\s*name:\s*\"([^\"]+)\"(?:\s*ratio:\s*([0-9.e-]+))?", text)
    if not match or match.group(1) == "none":
        return "none (raw)"
    return match.group(1) + (f" {float(match.group(2)) * 100:g}%" if match.group(2) else "")


def run_job(args, binaries, name, text, steps, tag):
    """Runs the job once; returns (minor faults, user s, system s, summary)."""
    config = os.path.join(args.work, f"{tag}.pbtxt")
    summary = os.path.join(args.work, f"{tag}.summary.json")
    log = os.path.join(args.work, f"{tag}.log")
    with open(config, "w") as f:
        f.write(speed_table.timed_config(text, steps, name, test_limit=TEST_LIMIT))
    command = [args.launcher, "run", config,
               f"--server_binary={os.path.join(binaries, 'tamp_server')}",
               f"--worker_binary={os.path.join(binaries, 'tamp_worker')}",
               f"--summary_json={summary}", f"--run_dir={os.path.join(args.work, 'run_' + tag)}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "w") as out:
        status = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if status != 0:
        with open(log) as f:
            fail(f"{tag} failed (exit {status}); the end of its log ({log}):\n{f.read()[-1500:]}")
    with open(summary) as f:
        figures = json.load(f)
    return (after.ru_minflt - before.ru_minflt, after.ru_utime - before.ru_utime,
            after.ru_stime - before.ru_stime, figures)


def measure(args, binaries, variant, path, text, rep):
    """One round's per-step figures of one config and variant."""
    short, long = args.steps
    name = os.path.basename(path)[:-len(".pbtxt")]
    runs = [run_job(args, binaries, path, text, steps, f"{name}_{variant}_{rep}_{steps}")
            for steps in (short, long)]
    (f0, u0, s0, _), (f1, u1, s1, summary) = runs
    span = long - short
    figures = {"faults_per_step": (f1 - f0) / span, "user_ms_per_step": (u1 - u0) * 1000 / span,
               "sys_ms_per_step": (s1 - s0) * 1000 / span,
               "step_ms_median": summary["step_ms_median"]}
    print(f"alloc_bench: {name} {variant} round {rep + 1}: "
          + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()), file=sys.stderr)
    return figures


def fmt(value):
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def write_doc(path, meta, results):
    short, long = meta["steps"]
    setup = textwrap.fill(
        f"Whole job (2 servers, 2 workers, the launcher) on loopback, before = "
        f"`{meta['base_commit'][:7]}` and after = `{meta['head_commit']}`, alternating, "
        f"{meta['reps']} rounds. Faults and CPU per step are the difference between a "
        f"{long}-step and a {short}-step run over {long - short} steps (start-up left out); "
        f"step ms is the {long}-step run's median step. Medians over the rounds.", 92)
    lines = [
        "# Allocation: page faults per step",
        "",
        "Written by `bench/alloc/run.sh` from `bench/results/alloc.json`; do not edit by hand.",
        "",
        "Issue 18: a job's hot path allocated and freed megabytes of fresh memory every step",
        "(pull answers, payload strings, gRPC messages), and glibc handed them back to the",
        "kernel each time, so every step faulted them in again. Now each shard chunk reuses its",
        "pull payload buffer (server/chunk.h), PushPull calls took pooled messages",
        "(then server/message_pool.h), and tamp_server and tamp_worker keep freed memory",
        "(base/malloc_settings.h). A compressed pull faulted little even before: its",
        "answers are a small fraction of a chunk, below the sizes glibc maps afresh.",
        "Since these runs tamp_server shares one malloc arena between its threads, and",
        "PushPull is served raw: every worker's response refers to the one shared encoding",
        "of the step's update instead of copying it into a message (server/service.h), so",
        "there are no PushPull messages to pool (docs/server_memory.md).",
        "",
        setup,
        "",
        "| config | pull | faults/step before | after | sys CPU ms/step before | after "
        "| user CPU ms/step before | after | step ms before | after |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        b, a = r["before"], r["after"]
        lines.append(
            f"| {r['config']} | {r['pull']} | {fmt(b['faults_per_step'])} | "
            f"{fmt(a['faults_per_step'])} | {b['sys_ms_per_step']:.1f} | "
            f"{a['sys_ms_per_step']:.1f} | {b['user_ms_per_step']:.1f} | "
            f"{a['user_ms_per_step']:.1f} | {b['step_ms_median']:.1f} | "
            f"{a['step_ms_median']:.1f} |")
    lines += [
        "",
        textwrap.fill(
            f"Machine: {meta['cpu']}, {meta['cores']} cores; load average (1, 5, 15 min) "
            f"{meta['load_before']} before and {meta['load_after']} after the runs. Step "
            "times move with the load of the machine; fault counts do not.", 92),
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launcher")
    parser.add_argument("--before", help="folder with tamp_server, tamp_worker")
    parser.add_argument("--after", help="folder with tamp_server, tamp_worker")
    parser.add_argument("--base", help="the before revision")
    parser.add_argument("--work", help="scratch folder")
    parser.add_argument("--command", default="")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--steps", default="50,300")
    parser.add_argument("--configs",
                        default="bench/configs/mlp_topk1_ef.pbtxt,"
                                "bench/configs/mlp_dgc1_ef_pulltopk1.pbtxt")
    parser.add_argument("--json", default=os.path.join(REPO, "bench/results/alloc.json"))
    parser.add_argument("--doc", default=os.path.join(REPO, "docs/alloc.md"))
    parser.add_argument("--report_only", action="store_true",
                        help="run nothing: rewrite --doc from --json")
    args = parser.parse_args()
    if args.report_only:
        with open(args.json) as f:
            results = json.load(f)
        write_doc(args.doc, results["meta"], results["results"])
        return
    if not all((args.launcher, args.before, args.after, args.base, args.work)):
        fail("--launcher, --before, --after, --base and --work are needed to run")
    args.steps = [int(s) for s in args.steps.split(",")]
    if len(args.steps) != 2 or not 0 < args.steps[0] < args.steps[1]:
        fail("--steps wants SHORT,LONG with 0 < SHORT < LONG")

    start = time.time()
    meta = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
            "base_commit": args.base, "head_commit": head_commit(), "cpu": cpu_model(),
            "cores": os.cpu_count(), "load_before": load_average(), "steps": args.steps,
            "reps": args.reps, "command": args.command}
    configs = []
    for path in args.configs.split(","):
        with open(os.path.join(REPO, path)) as f:
            configs.append((path, f.read()))
    runs = {(path, variant): [] for path, _ in configs for variant in ("before", "after")}
    for rep in range(args.reps):
        order = ("before", "after") if rep % 2 == 0 else ("after", "before")
        for path, text in configs:
            for variant in order:
                binaries = args.before if variant == "before" else args.after
                runs[(path, variant)].append(measure(args, binaries, variant, path, text, rep))
    results = []
    for path, text in configs:
        entry = {"config": os.path.basename(path)[:-len(".pbtxt")], "path": path,
                 "pull": pull_codec(text)}
        for variant in ("before", "after"):
            rounds = runs[(path, variant)]
            figures = {}
            for key in FIGURES:
                values = [r[key] for r in rounds]
                figures[key] = statistics.median(values)
                figures[key + "_runs"] = values
            entry[variant] = figures
        results.append(entry)
    meta["load_after"] = load_average()
    meta["seconds"] = round(time.time() - start)
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
        f.write("\n")
    write_doc(args.doc, meta, results)
    print(f"alloc_bench: wrote {args.json} and {args.doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
