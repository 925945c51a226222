#!/usr/bin/env python3
"""Speed table: times each config of bench/configs/ for a few steps on each link (a network
namespace whose loopback is shaped by bench/net/shaped.sh) and writes docs/speed.md and
bench/results/speed.json. Run through bench/speed_table.sh, which builds the binaries.

Each run is the config with training cut to --steps steps (training.max_steps) and a small
test set for the final evaluation, which no step waits for. The figures are medians over the
steps after the first --warmup, over both workers, of what the workers report per step
(`tamp run --metrics_file`, worker/step_timeline.h).

speed.json: {"meta": {...}, "results": [one object per (config, link)]}. meta: date, commit,
cpu, cores, load_before/load_after (1/5/15-min load averages), steps, warmup, links,
openblas_coretype, convergence_found, target_accuracy, command, seconds, and headline (the
5x check: config, baseline, link, speedup target, passed, measured_speedup, both steps/s).
Each result has
  config, name, link                       bench/configs/NAME.pbtxt, the link's rate
  num_servers, num_workers, steps_measured  the job's shape; steps behind the medians
  steps_per_s                              1000 / step_ms_median
  step_ms_median                           median step time (one worker, one step)
  compute_ms, encode_ms, wire_ms, decode_ms, apply_ms   medians of the step's split
  other_ms                                 median of step_ms minus the five
  comm_hidden_percent                      median share of RPC time hidden behind compute
  bytes_pushed_per_step, bytes_pulled_per_step   wire payload bytes of ONE worker in one step
  link_bytes_per_step                      all workers' pushes + pulls: what crosses the link
  link_ms                                  link_bytes_per_step at the link's rate (null unshaped)
  compression_ratio                        fp32 bytes the pushes stand for / bytes pushed
  final_accuracy, steps_to_target          the full run's, from bench/results/convergence.json
                                           (null where it has no run of that name)
  time_to_target_s                         steps_to_target x step_ms_median / 1000 (or null)
"""

import argparse
import datetime
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import convergence  # fill_reading(): the reading's figures from the convergence table
import tamp_files

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPLIT = ["compute_ms", "encode_ms", "wire_ms", "decode_ms", "apply_ms"]
# The target: top-k 1% with error feedback (both directions compressed) at >= 5x the
# steps per second of the uncompressed baseline, at 1 Gbit/s with 2 servers and 2 workers.
HEADLINE = {"link": "1gbit", "config": "mlp_topk1_ef_pulltopk1", "baseline": "mlp_none",
            "speedup": 5.0}
# Test images evaluated at the end of a timed run (after its last step, so no step waits for
# it); a handful keeps each run short.
TEST_LIMIT = 256


def fail(message):
    sys.exit(f"speed_table: {message}")


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def timed_config(text, steps, path, test_limit=TEST_LIMIT):
    """The config with training cut to `steps` steps and a test set of `test_limit` images."""
    text, count = re.subn(r"training\s*\{[^}]*\}",
                          f"training {{ epochs: 1 max_steps: {steps} eval_every_epoch: false }}",
                          text, count=1)
    if count != 1:
        fail(f"{path}: no 'training {{ ... }}' block to cut to {steps} steps")
    text, count = re.subn(r"data\s*\{", f"data {{ test_limit: {test_limit}", text, count=1)
    if count != 1:
        fail(f"{path}: no 'data {{ ... }}' block")
    return text


def cluster_shape(text):
    servers = re.search(r"num_servers:\s*(\d+)", text)
    workers = re.search(r"num_workers:\s*(\d+)", text)
    return int(servers.group(1)) if servers else 1, int(workers.group(1)) if workers else 1


def run_job(binaries, link, config_path, text, work_dir):
    """Runs one timed job inside the shaped namespace; returns its per-step metric lines."""
    tag = f"{os.path.basename(config_path)[:-len('.pbtxt')]}_{link}"
    config = os.path.join(work_dir, tag + ".pbtxt")
    metrics = os.path.join(work_dir, tag + ".metrics.jsonl")
    log = os.path.join(work_dir, tag + ".log")
    with open(config, "w") as f:
        f.write(text)
    command = [os.path.join(REPO, "bench/net/shaped.sh"), link, "--",
               os.path.join(binaries, "tamp"), "run", config,
               f"--server_binary={os.path.join(binaries, 'tamp_server')}",
               f"--worker_binary={os.path.join(binaries, 'tamp_worker')}",
               f"--metrics_file={metrics}", f"--run_dir={os.path.join(work_dir, 'run_' + tag)}"]
    with open(log, "w") as out:
        status = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT).returncode
    if status == 77:
        with open(log) as f:
            fail(f"bench/net/shaped.sh cannot shape a link here: {f.read().strip()}")
    if status != 0:
        with open(log) as f:
            tail = f.read()[-1500:]
        fail(f"{tag} failed (exit {status}); the end of its log ({log}):\n{tail}")
    return tamp_files.read_metrics(metrics)


def digest(lines, warmup, num_workers):
    """Medians over the steps after `warmup` (all workers)."""
    steps = [l for l in lines if "step_ms" in l and l["step"] > warmup]
    if not steps:
        return None
    median = lambda key: statistics.median(l.get(key, 0.0) for l in steps)
    figures = {"steps_measured": len({l["step"] for l in steps})}
    figures["step_ms_median"] = median("step_ms")
    figures["steps_per_s"] = 1000.0 / figures["step_ms_median"]
    for key in SPLIT:
        figures[key] = median(key)
    figures["other_ms"] = statistics.median(l["step_ms"] - sum(l.get(k, 0.0) for k in SPLIT)
                                            for l in steps)
    figures["comm_hidden_percent"] = median("comm_hidden_percent")
    figures["bytes_pushed_per_step"] = median("bytes_pushed")
    figures["bytes_pulled_per_step"] = median("bytes_pulled")
    figures["link_bytes_per_step"] = num_workers * (figures["bytes_pushed_per_step"] +
                                                    figures["bytes_pulled_per_step"])
    raw = median("raw_bytes_pushed")
    pushed = figures["bytes_pushed_per_step"]
    figures["compression_ratio"] = raw / pushed if pushed else 0.0
    return figures


def attach_convergence(results, path):
    """Sets each result's final_accuracy, steps_to_target and time_to_target_s from the full
    run of the same name in the convergence table's JSON (None where it has none)."""
    runs = {}
    if os.path.exists(path):
        with open(path) as f:
            runs = json.load(f).get("runs", {})
    for r in results:
        full_run = runs.get(r["name"], {})
        target = full_run.get("steps_to_target")
        r["final_accuracy"] = full_run.get("final_accuracy")
        r["steps_to_target"] = target
        r["time_to_target_s"] = None if target is None else target * r["step_ms_median"] / 1000.0


def git_commit():
    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + (" (with uncommitted changes)" if git("status", "--porcelain") else "")


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def link_bits_per_s(link):
    """The rate of a tc rate string (1gbit, 500mbit, ...); None for "unshaped"."""
    match = re.fullmatch(r"([0-9.]+)(bit|kbit|mbit|gbit)", link)
    if match is None:
        return None
    return float(match.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[match.group(2)]


def fmt(value, digits=1):
    return "" if value is None else f"{value:.{digits}f}"


def kib(value):
    return f"{value / 1024:.1f}"


def headline(results):
    """The 5x check: (pass, speedup, candidate steps/s, baseline steps/s) or None."""
    by = {(r["name"], r["link"]): r for r in results}
    candidate = by.get((HEADLINE["config"], HEADLINE["link"]))
    baseline = by.get((HEADLINE["baseline"], HEADLINE["link"]))
    if candidate is None or baseline is None:
        return None
    speedup = candidate["steps_per_s"] / baseline["steps_per_s"]
    return speedup >= HEADLINE["speedup"], speedup, candidate["steps_per_s"], baseline["steps_per_s"]


def pull_paragraph(results):
    """Why the headline config compresses the pull: the raw pull's share of the link."""
    by = {(r["name"], r["link"]): r for r in results}
    link = HEADLINE["link"]
    push_only = by.get(("mlp_topk1_ef", link))
    both = by.get((HEADLINE["config"], link))
    baseline = by.get((HEADLINE["baseline"], link))
    if push_only is None or baseline is None or push_only["link_ms"] is None:
        return []
    lines = [f"Why the pull is compressed too: `mlp_topk1_ef` compresses only the push, so each "
             f"worker still pulls {kib(push_only['bytes_pulled_per_step'])} KiB of raw fp32 per "
             f"step; the link then needs {push_only['link_ms']:.0f} ms per step against "
             f"{baseline['link_ms']:.0f} ms for `{HEADLINE['baseline']}`, which caps its speedup at "
             f"{baseline['link_ms'] / push_only['link_ms']:.1f}x however fast the rest is "
             f"(measured: {push_only['steps_per_s'] / baseline['steps_per_s']:.2f}x)."]
    if both is not None:
        lines[0] += (f" With top-k 1% of each shard's update on the pull (and the shard's residual), "
                     f"the link needs {both['link_ms']:.1f} ms per step and the step is bound by "
                     f"the CPU: compute, encode, and the shards' work, which shows as wire.")
        if both["final_accuracy"] is not None and push_only["final_accuracy"] is not None:
            lines[0] += (f" Final test accuracy of the full runs: {both['final_accuracy']:.4f} with "
                         f"the compressed pull, {push_only['final_accuracy']:.4f} with the raw one.")
    return lines + [""]


def write_doc(path, meta, results, command):
    lines = ["# Speed table", "",
             "Steps per second and the per-step time split of the reference MLP job (784-1024-1024-10,",
             "Fashion-MNIST, batch 64 per worker, 2 servers + 2 workers, all on one machine) for each",
             "codec config of `bench/configs/`, on three links: the job runs inside a network",
             "namespace whose loopback is shaped with tc to 1 Gbit/s or 10 Gbit/s, or left unshaped",
             "(`bench/net/shaped.sh`). The shaped loopback is ONE link shared by all traffic: both",
             "workers' pushes and both workers' pulls cross it.", "",
             f"Generated by `{command}` on {meta['date']}, commit {meta['commit']}.",
             f"Machine: {meta['cpu']}, {meta['cores']} cores; load average (1, 5, 15 min) "
             f"{meta['load_before']} before, {meta['load_after']} after; OpenBLAS core type "
             f"`{meta['openblas_coretype']}`. Each run: {meta['steps']} steps, the first "
             f"{meta['warmup']} not counted; figures are medians over both workers' steps.",
             "Raw figures: `bench/results/speed.json` (format in `bench/speed_table.py`).", ""]
    check = headline(results)
    lines += ["## The 5x target", ""]
    if check is None:
        lines += [f"Not measured (needs {HEADLINE['config']} and {HEADLINE['baseline']} at "
                  f"{HEADLINE['link']}).", ""]
    else:
        passed, speedup, fast, slow = check
        lines += [f"**{'PASS' if passed else 'FAIL'}**: at {HEADLINE['link']}, "
                  f"`{HEADLINE['config']}` (top-k 1% with error feedback on the push and on the "
                  f"pull) runs {fast:.2f} steps/s against {slow:.2f} for `{HEADLINE['baseline']}`: "
                  f"{speedup:.2f}x (target >= {HEADLINE['speedup']:.0f}x).", ""]
        baseline = {r["name"]: r for r in results if r["link"] == HEADLINE["link"]}[
            HEADLINE["baseline"]]
        if baseline["link_ms"]:
            lines += [f"The baseline is bound by the link, not by Tamp: `{HEADLINE['baseline']}` "
                      f"moves {baseline['link_bytes_per_step'] / 2**20:.1f} MiB per step, which "
                      f"takes {baseline['link_ms']:.0f} ms at {HEADLINE['link']}, and its step "
                      f"takes {baseline['step_ms_median']:.0f} ms "
                      f"({100 * baseline['link_ms'] / baseline['step_ms_median']:.0f}% of it on "
                      f"the link), so no tuning of the uncompressed path can raise its steps/s "
                      f"by more than {baseline['step_ms_median'] / baseline['link_ms']:.2f}x.", ""]
    lines += pull_paragraph(results)
    lines += ["## Time to target", "",
              "In SYNC mode the trajectory of a run does not depend on the link, so the time to reach",
              "0.85 test accuracy at a link is derived, not measured end to end:", "",
              "    time_to_target(config, link) = steps_to_target(config) x step_ms_median(config, link)",
              "",
              "steps_to_target is the first evaluated step with test accuracy >= 0.85 in the full",
              "3-epoch run of the same config, from `bench/results/convergence.json` (bench/convergence.sh,",
              "keyed by the config's name); step_ms_median comes from the short runs below. The column",
              "is empty where the convergence table has no such row (not run yet, or the config never",
              "reached 0.85). Start-up and evaluation time are not included.", ""]
    if not meta["convergence_found"]:
        lines += ["*bench/results/convergence.json was not present when this table was made: the time",
                  "to target column is empty.*", ""]
    for link in meta["links"]:
        rows = [r for r in results if r["link"] == link]
        if not rows:
            continue
        lines += [f"## {link}", "",
                  "| config | steps/s | step ms | link ms | compute | encode | wire | decode | apply | "
                  "other | hidden % | KiB pushed / step / worker | KiB pulled / step / worker | "
                  "ratio | final accuracy | steps to 0.85 | time to 0.85 (s) |",
                  "|---|" + "---:|" * 16]
        for r in rows:
            lines.append(
                f"| {r['name']} | {r['steps_per_s']:.2f} | {r['step_ms_median']:.1f} | "
                f"{fmt(r['link_ms'])} | "
                + " | ".join(fmt(r[k]) for k in SPLIT + ["other_ms"])
                + f" | {r['comm_hidden_percent']:.0f} | {kib(r['bytes_pushed_per_step'])} | "
                f"{kib(r['bytes_pulled_per_step'])} | {r['compression_ratio']:.1f} | "
                f"{fmt(r['final_accuracy'], 4)} | "
                f"{r['steps_to_target'] if r['steps_to_target'] is not None else ''} | "
                f"{fmt(r['time_to_target_s'])} |")
        lines.append("")
    reading = os.path.join(REPO, "bench/speed_reading.md")
    if os.path.exists(reading):  # Hand-written prose; its accuracy figures come from the
        with open(reading) as f:  # convergence table (bench/convergence.py fill_reading).
            text = f.read().strip()
        convergence_path = os.path.join(REPO, "bench/results/convergence.json")
        if os.path.exists(convergence_path):
            with open(convergence_path) as f:
                text = convergence.fill_reading(text, json.load(f)["runs"])
        lines += ["## Reading", "", text, ""]
    lines += ["## Columns", "",
              "- link ms: the time the link needs to carry one step's bytes (both workers' pushes and",
              "  pulls, payloads only) at its rate: the step time a perfectly overlapped job could reach",
              "  if the link were the only cost.",
              "- compute: forward/backward, without the push callbacks; encode: push codec work",
              "  (with error feedback); wire: the part of [last push sent, last answer received] not",
              "  covered by compute, i.e. the wait on the network and the servers (decode, optimizer,",
              "  pull encode) after the last push; decode, apply: the pull side on the worker.",
              "  other: step time the five do not cover (batch, RPC set-up, scheduling). Medians are",
              "  taken per column, so the columns need not add up to the step time.",
              "- hidden %: share of the RPCs' time overlapped by compute (worker/step_timeline.h).",
              "- ratio: fp32 bytes the pushes stand for / bytes pushed.", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binaries", help="folder with tamp, tamp_server, tamp_worker")
    parser.add_argument("--links", default="1gbit,10gbit,unshaped")
    parser.add_argument("--configs", default="all",
                        help="comma-separated names of bench/configs/*.pbtxt, or all")
    parser.add_argument("--steps", type=int, default=70)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", default=os.path.join(REPO, "bench/results/speed.json"))
    parser.add_argument("--doc", default=os.path.join(REPO, "docs/speed.md"))
    parser.add_argument("--convergence", default=os.path.join(REPO, "bench/results/convergence.json"))
    parser.add_argument("--command", default="bench/speed_table.sh",
                        help="the command line to quote in the doc")
    parser.add_argument("--report_only", action="store_true",
                        help="run nothing: rewrite the doc from the JSON")
    args = parser.parse_args()
    if args.report_only:
        with open(args.json) as f:
            saved = json.load(f)
        meta, results = saved["meta"], saved["results"]
        attach_convergence(results, args.convergence)
        meta["convergence_found"] = os.path.exists(args.convergence)
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
            f.write("\n")
        write_doc(args.doc, meta, results, meta.get("command", "bench/speed_table.sh"))
        return
    if not args.binaries:
        fail("--binaries is required unless --report_only")
    if args.steps <= args.warmup:
        fail(f"--steps ({args.steps}) must exceed --warmup ({args.warmup})")

    available = sorted(glob.glob(os.path.join(REPO, "bench/configs/*.pbtxt")))
    names = [os.path.basename(p)[:-len(".pbtxt")] for p in available]
    chosen = list(names) if args.configs == "all" else args.configs.split(",")
    for name in chosen:
        if name not in names:
            fail(f"--configs: no bench/configs/{name}.pbtxt (have: {', '.join(names)})")
    # The uncompressed baseline first: the others are read against it.
    chosen.sort(key=lambda n: (n != HEADLINE["baseline"], names.index(n)))
    links = args.links.split(",")

    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git_commit(), "cpu": cpu_model(), "cores": os.cpu_count(),
            "load_before": load_average(), "steps": args.steps, "warmup": args.warmup,
            "links": links, "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "auto"),
            "convergence_found": os.path.exists(args.convergence), "target_accuracy": 0.85,
            "command": args.command}
    results = []
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="tamp_speed_") as work_dir:
        for link in links:
            rate = link_bits_per_s(link)
            for name in chosen:
                path = os.path.join(REPO, "bench/configs", name + ".pbtxt")
                with open(path) as f:
                    text = f.read()
                num_servers, num_workers = cluster_shape(text)
                print(f"speed_table: {name} at {link} (load {load_average()})", file=sys.stderr)
                lines = run_job(args.binaries, link, path, timed_config(text, args.steps, path),
                                work_dir)
                figures = digest(lines, args.warmup, num_workers)
                if figures is None:
                    fail(f"{name} at {link}: no step after the first {args.warmup}")
                results.append(dict(
                    config=os.path.relpath(path, REPO), name=name, link=link,
                    num_servers=num_servers, num_workers=num_workers, **figures,
                    link_ms=None if rate is None
                    else figures["link_bytes_per_step"] * 8 / rate * 1000.0))
    attach_convergence(results, args.convergence)
    meta["load_after"] = load_average()
    meta["seconds"] = round(time.time() - start)
    check = headline(results)
    if check is not None:
        meta["headline"] = dict(HEADLINE, passed=check[0], measured_speedup=check[1],
                                steps_per_s=check[2], baseline_steps_per_s=check[3])
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
        f.write("\n")
    write_doc(args.doc, meta, results, args.command)
    print(f"speed_table: wrote {os.path.relpath(args.doc, REPO)} and "
          f"{os.path.relpath(args.json, REPO)} in {meta['seconds']} s", file=sys.stderr)
    if check is not None:
        print(f"speed_table: 5x check {'PASS' if check[0] else 'FAIL'}: {check[1]:.2f}x "
              f"({check[2]:.2f} vs {check[3]:.2f} steps/s at {HEADLINE['link']})", file=sys.stderr)


if __name__ == "__main__":
    main()
