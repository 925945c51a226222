#!/usr/bin/env python3
"""compression.automatic's plans and decision time (docs/auto.md).

Runs bazel-bin/bench/auto_plan_bench on every config of bench/configs/auto/ at 1 Gbit/s,
10 Gbit/s and unshaped, and writes bench/results/auto_plan.json: per config and link the
decision's own time (measurements excluded), the predictions it made, the predicted step of
the plan against every candidate on every tensor, and the tensors each candidate got. The decision's time is given as wall clock and as its
thread's CPU time (what the search costs whatever else the machine runs). These
are the performance model's predictions on this machine, not measured steps.

  bench/auto_plan.py            # bazel build, run (a minute or two), write the results
  bench/auto_plan.py --doc      # rewrite docs/auto.md's generated block from the results
  bench/auto_plan.py --check    # exit 1 if docs/auto.md's block is not what --doc writes
"""
import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import opt_build  # noqa: E402
from doc_block import replace_block  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "bench/results/auto_plan.json")
DOC = os.path.join(REPO, "docs/auto.md")
LINKS = ["1gbit", "10gbit", "unshaped"]
BEGIN, END = "<!-- auto_plan.py: begin -->", "<!-- auto_plan.py: end -->"


def run():
    bench = os.path.join(opt_build.build("//bench:auto_plan_bench"), "bench/auto_plan_bench")
    start = time.time()
    load_before = open("/proc/loadavg").read().split()[:3]
    results = []
    for config in sorted(glob.glob(os.path.join(REPO, "bench/configs/auto/*.pbtxt"))):
        rel = os.path.relpath(config, REPO)
        out = subprocess.run([bench, rel] + LINKS,
                             cwd=REPO, check=True, capture_output=True, text=True).stdout
        results += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    meta = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
            "commit": commit, "cores": os.cpu_count(), "load_before": " ".join(load_before),
            "load_after": " ".join(open("/proc/loadavg").read().split()[:3]),
            "command": "bench/auto_plan.py", "seconds": round(time.time() - start)}
    with open(RESULTS, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
        f.write("\n")


def block():
    data = json.load(open(RESULTS))
    meta = data["meta"]
    lines = [BEGIN,
             f"Predicted by `bench/auto_plan.py` ({meta['date']}, commit {meta['commit']}, "
             f"{meta['cores']} cores, load {meta['load_before']}); candidates 0 none, 1 fp16, "
             "2 top-k 1% with memory; ms per step as the performance model predicts it, not "
             "measured.", "",
             "| config | link | tensors | auto ms | none ms | fp16 ms | top-k ms | "
             "tensors per candidate | decision ms (CPU) | predictions |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["results"]:
        name = os.path.basename(r["config"]).replace(".pbtxt", "")
        uniform = " | ".join(f"{ms:.1f}" for ms in r["uniform_ms"])
        per = ", ".join(str(n) for n in r["tensors_per_candidate"])
        if r.get("searched_ms"):  # min_gain kept candidate 0 everywhere.
            per += f" (min_gain: the plan found, {r['searched_ms']:.1f} ms, saved too little)"
        lines.append(f"| {name} | {r['link']} | {r['tensors']} | {r['auto_ms']:.1f} | {uniform} "
                     f"| {per} | {r['decision_ms']:.1f} ({r['decision_cpu_ms']:.1f}) | {r['predictions']} |")
    lines.append(END)
    return "\n".join(lines)


def doc_text():
    return replace_block(open(DOC).read(), BEGIN, END, block(), DOC)


def main():
    parser = argparse.ArgumentParser(
        description="compression.automatic's plans and decision time (docs/auto.md); "
        "without a flag: bazel build, run (a minute or two), write the results")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--doc", action="store_true",
                      help="rewrite docs/auto.md's generated block from the results")
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if docs/auto.md's block is not what --doc writes")
    args = parser.parse_args()
    if args.doc:
        text = doc_text()
        with open(DOC, "w") as f:
            f.write(text)
    elif args.check:
        if open(DOC).read() != doc_text():
            sys.exit("docs/auto.md's table is stale: run bench/auto_plan.py --doc")
    else:
        run()


if __name__ == "__main__":
    main()
