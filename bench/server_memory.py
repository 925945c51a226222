#!/usr/bin/env python3
"""Server memory during a run (issue 19): each tamp_server's VmRSS and minor page faults,
step by step, for sets of server binaries run alternately in one run, on loopback.

    bench/server_memory.py --variant before=DIR --variant after=DIR [--config C]
                           [--servers 2] [--workers 4] [--steps 200] [--rounds 2]
                           [--job_binaries DIR]
                           [--json bench/results/server_memory.json] [--doc docs/server_memory.md]
                           [--variants_note TEXT] [--report_only]

Each DIR holds a tamp_server; the job's launcher and workers are this checkout's (bazel-bin,
build them with -c opt first), or the tamp and tamp_worker in --job_binaries. Each round
runs every variant once, the order alternating by round, with `tamp run` on CONFIG (default
bench/configs/scaling/resnet50_none, the ResNet-50 layout with a raw pull) rewritten for the
servers, workers and steps asked.
Every second it notes each server's VmRSS and minor faults (bench/proc_sample.py finds the
processes) and the steps done (the launcher's metrics file). Per server it reports the RSS
at a few steps, the growth from a quarter of the run to its end, and the faults per step
over that span. Writes the JSON (every sample too) and the doc (a row per variant, round and
server); --report_only makes both again from the JSON's samples.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proc_sample  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def job_config(base, servers, workers, steps, out):
    base_dir = os.path.dirname(os.path.abspath(base))
    lines = []
    for line in open(base):
        if line.startswith("cluster {"):
            line = f"cluster {{ num_servers: {servers} num_workers: {workers} plaintext: true }}\n"
        elif line.startswith("training {"):
            line = f"training {{ max_steps: {steps} }}\n"
        for key in ("layout_file", "profile_file"):
            line = line.replace(f'{key}: "../', f'{key}: "{base_dir}/../')
        lines.append(line)
    with open(out, "w") as f:
        f.writelines(lines)


def faults(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])  # minflt


def sample(marker, metrics, workers, stop, samples):
    while not stop.is_set():
        try:
            with open(metrics) as f:
                steps = sum(1 for _ in f) // workers
        except OSError:
            steps = 0
        servers = {}
        for name, pid in proc_sample._processes(marker).items():
            figures = proc_sample._read(pid)
            if name.startswith("server-") and figures:
                try:
                    servers[name] = {"rss_kib": figures[0], "minflt": faults(pid)}
                except OSError:
                    continue
        if servers:
            samples.append({"t": time.time(), "steps": steps, "servers": servers})
        stop.wait(1.0)


def run_one(variant, directory, config, workers, job_binaries, work):
    metrics = os.path.join(work, f"{variant}.metrics")
    run_dir = os.path.join(work, f"{variant}.run")
    tamp, worker = job_binaries
    stop, samples = threading.Event(), []
    sampler = threading.Thread(target=sample, args=(config, metrics, workers, stop, samples))
    sampler.start()
    try:
        subprocess.run([tamp, "run", config, f"--server_binary={directory}/tamp_server",
                        f"--worker_binary={worker}",
                        f"--metrics_file={metrics}", f"--run_dir={run_dir}"],
                       check=True, stdout=subprocess.DEVNULL)
    finally:
        stop.set()
        sampler.join()
    return samples


def summarize(samples, steps):
    """Per server: RSS (MiB) at the first sample at or past each mark, growth from a quarter
    of the run to the last sample before the end, and minor faults per step over that span.
    Only samples that saw every server count (one that is done frees memory on its way out)."""
    everyone = max(len(s["servers"]) for s in samples)
    samples = [s for s in samples if len(s["servers"]) == everyone]
    marks = [10, steps // 4, steps // 2, 3 * steps // 4, steps - 5]
    at = lambda step: next((s for s in samples if s["steps"] >= step), samples[-1])
    result = {}
    for name in sorted(samples[-1]["servers"]):
        rss = {m: at(m)["servers"][name]["rss_kib"] / 1024 for m in marks}
        a, b = at(marks[1]), at(marks[-1])
        result[name] = {
            "rss_mib_at_step": rss,
            "growth_mib": rss[marks[-1]] - rss[marks[1]],
            "growth_from_step": marks[1],
            "faults_per_step": (b["servers"][name]["minflt"] - a["servers"][name]["minflt"])
                               / max(1, b["steps"] - a["steps"]),
        }
    return result


def write_doc(report, path):
    meta = report["meta"]
    lines = [
        "# Server memory during a run",
        "",
        "Written by `bench/server_memory.py` from `bench/results/server_memory.json`; do not",
        "edit by hand.",
        "",
        f"`{meta['command']}` ({meta['date']}, commit {meta['commit']}, {meta['cores']} cores,",
        f"load {meta['load_before']} before and {meta['load_after']} after): "
        f"{meta['config']} with {meta['servers']} servers and {meta['workers']} workers on "
        f"loopback, {meta['steps']} steps, the variants alternating. "
        "Growth: from a quarter of the run to its end.",
        "",
    ] + ([f"Variants: {meta['variants']}", ""] if meta.get("variants") else []) + [
        "| variant | round | server | " +
        " | ".join(f"RSS MiB @{m}" for m in report["runs"][0]["servers"]["server-0"]
                   ["rss_mib_at_step"]) + " | growth MiB | faults / step |",
        "|---|---:|---|" + "---:|" * (len(report["runs"][0]["servers"]["server-0"]
                                      ["rss_mib_at_step"]) + 2),
    ]
    for run in report["runs"]:
        for name, s in run["servers"].items():
            lines.append(f"| {run['variant']} | {run['round']} | {name} | " +
                         " | ".join(f"{v:.0f}" for v in s["rss_mib_at_step"].values()) +
                         f" | {s['growth_mib']:+.0f} | {s['faults_per_step']:.0f} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", default=[], help="NAME=DIR")
    parser.add_argument("--config", default="bench/configs/scaling/resnet50_none.pbtxt")
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", default="bench/results/server_memory.json")
    parser.add_argument("--doc", default="docs/server_memory.md")
    parser.add_argument("--job_binaries", help="a folder with tamp and tamp_worker")
    parser.add_argument("--variants_note",
                        help="what the variants are (their commits), for the doc; with "
                             "--report_only it replaces the JSON's")
    parser.add_argument("--report_only", action="store_true",
                        help="run nothing: summarize the JSON's samples again, rewrite both")
    args = parser.parse_args()
    os.chdir(REPO)
    if args.report_only:
        report = json.load(open(args.json))
        if args.variants_note:
            report["meta"]["variants"] = args.variants_note
        for run in report["runs"]:
            run["servers"] = summarize(run["samples"], report["meta"]["steps"])
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
        write_doc(report, args.doc)
        return
    if not args.variant:
        sys.exit("server_memory: give at least one --variant NAME=DIR")
    job_binaries = ([os.path.abspath(os.path.join(args.job_binaries, b))
                     for b in ("tamp", "tamp_worker")] if args.job_binaries else
                    [os.path.join(REPO, "bazel-bin/tools/tamp/tamp"),
                     os.path.join(REPO, "bazel-bin/worker/tamp_worker")])
    variants = [v.split("=", 1) for v in args.variant]
    for name, directory in variants:
        if not os.access(os.path.join(directory, "tamp_server"), os.X_OK):
            sys.exit(f"server_memory: no tamp_server in {directory} (variant {name})")
    load = lambda: " ".join(open("/proc/loadavg").read().split()[:3])
    meta = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], check=True,
                                     capture_output=True, text=True).stdout.strip(),
            "command": "bench/server_memory.py " + " ".join(sys.argv[1:]),
            "config": args.config, "servers": args.servers, "workers": args.workers,
            "steps": args.steps, "cores": os.cpu_count(), "load_before": load(),
            "variants": args.variants_note}
    runs = []
    with tempfile.TemporaryDirectory() as work:
        config = os.path.join(work, "job.pbtxt")
        job_config(args.config, args.servers, args.workers, args.steps, config)
        for round_ in range(args.rounds):
            order = variants if round_ % 2 == 0 else variants[::-1]
            for name, directory in order:
                samples = run_one(name, os.path.abspath(directory), config, args.workers,
                                  job_binaries, work)
                runs.append({"variant": name, "round": round_ + 1,
                             "servers": summarize(samples, args.steps), "samples": samples})
                print(f"server_memory: {name} round {round_ + 1}: " + json.dumps(
                    {n: round(s["growth_mib"]) for n, s in runs[-1]["servers"].items()}),
                    file=sys.stderr)
    meta["load_after"] = load()
    report = {"meta": meta, "runs": runs}
    with open(args.json, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    write_doc(report, args.doc)


if __name__ == "__main__":
    main()
