#!/usr/bin/env python3
"""docs/gpu.md's measured block, from the device runs stored under bench/results/gpu/.

A device call of `bench/gpu/run_on_device.sh all` brings back all.tar.gz and its tables
(the device tool's folder); `import` stores what the docs use, with the run's metadata:

  bench/gpu/report.py import FOLDER NAME --commit C [--build NAME=WHAT ...] [--note TEXT]
                                [--committed]   # its main build is the code as committed
  bench/gpu/report.py --doc      # rewrite docs/gpu.md's generated block from the results
  bench/gpu/report.py --check    # exit 1 if docs/gpu.md's block is not what --doc writes

Runs are ordered by NAME. The block shows every run (device, driver, commit, what its extra
builds were), the last run's verdicts, the first run's failures, the codec tables of the
runs that compared builds (each comparison within one run), top-k against torch.topk, and
the training jobs' step times; then the issue's targets against those figures.
"""
import argparse
import glob
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from doc_block import replace_block  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, "bench/results/gpu")
DOC = os.path.join(REPO, "docs/gpu.md")
BEGIN, END = "<!-- bench/gpu/report.py: begin -->", "<!-- bench/gpu/report.py: end -->"
KEPT = re.compile(r"^(summary\.txt|device\.txt|step_times\.md|torch_compare\.md|"
                  r"codec_gpu_bench(_\w+)?\.md|train_\w+\.(md|jsonl))$")
ELEMENTWISE = ["none", "fp16", "bf16", "natural", "signsgd", "signum", "efsign"]
# Which run and build timed the path each codec takes in the committed code (compress/cuda:
# StagesCodes() for 16- and 32-bit codes, UsesLanePath() for signum, the rest unchanged
# since c257532), until a run is imported with --committed: then its own build, for every
# codec. No run of 2026-11-26 had exactly the committed build; the docs say so.
COMMITTED = {"none": ("h200_2", "codec_gpu_bench"), "fp16": ("h200_2", "codec_gpu_bench"),
             "bf16": ("h200_2", "codec_gpu_bench"), "signum": ("h200_4", "codec_gpu_bench")}
COMMITTED_DEFAULT = ("h200_4", "codec_gpu_bench_before")


def import_run(folder, name, commit, builds, note, committed):
    out = os.path.join(RESULTS, name)
    if os.path.exists(out):
        sys.exit(f"{out} exists: pick another NAME or remove it first")
    with tempfile.TemporaryDirectory() as work:
        archive = os.path.join(folder, "all.tar.gz")
        if not os.path.exists(archive):
            sys.exit(f"{archive}: no such file (a run of `run_on_device.sh all` brings it back)")
        with tarfile.open(archive) as tar:
            tar.extractall(work)
        os.makedirs(out)
        for entry in sorted(os.listdir(work)):
            if KEPT.match(entry):
                shutil.copy(os.path.join(work, entry), out)
    device = open(os.path.join(out, "device.txt")).read()
    gpu = re.search(r"^GPU 0: (.*?) \(UUID", device, re.M)
    driver = re.search(r"Driver Version: (\S+)", device)
    date = re.search(r"^\w{3} (\w{3}) +(\d+) [\d:]+ (\d{4})", device, re.M)
    meta = {"name": name, "commit": commit, "note": note, "committed": committed,
            "device": gpu.group(1) if gpu else "?",
            "driver": driver.group(1) if driver else "?",
            "date": " ".join(date.groups()) if date else "?",
            "builds": dict(b.split("=", 1) for b in builds)}
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"stored {out}: {', '.join(sorted(os.listdir(out)))}")


def runs():
    found = []
    for meta_path in sorted(glob.glob(os.path.join(RESULTS, "*/meta.json"))):
        folder = os.path.dirname(meta_path)
        found.append((json.load(open(meta_path)), folder))
    if not found:
        sys.exit(f"no runs under {RESULTS}")
    return found


def codec_rows(path):
    """(codec, n) -> {"encode", "decode", "memcpy", "ratio"} from a codec table."""
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path):
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 9 and cells[2].startswith("2^"):
            rows[(cells[1], cells[2])] = {"encode": float(cells[4]), "decode": float(cells[6]),
                                          "memcpy": float(cells[7]), "ratio": float(cells[9])}
    return rows


def lines_of(folder, name):
    path = os.path.join(folder, name)
    return open(path).read().splitlines() if os.path.exists(path) else []


def comparison(meta, folder, n, codecs=None):
    """A table of every build of one run side by side at size n."""
    builds = ["codec_gpu_bench"] + sorted(
        os.path.basename(p)[:-3] for p in glob.glob(os.path.join(folder, "codec_gpu_bench_*.md")))
    tables = {b: codec_rows(os.path.join(folder, b + ".md")) for b in builds}
    label = {b: meta["builds"].get(b[len("codec_gpu_bench_"):] if b != "codec_gpu_bench" else "this",
                                   b) for b in builds}
    head = "| codec | " + " | ".join(f"{label[b]}: encode / decode ms, enc+dec / memcpy"
                                    for b in builds) + " |"
    out = [head, "|---|" + "---|" * len(builds)]
    for (codec, size), _ in tables["codec_gpu_bench"].items():
        if size != n or (codecs and codec not in codecs):
            continue
        cells = []
        for b in builds:
            r = tables[b].get((codec, size))
            cells.append(f"{r['encode']:.3f} / {r['decode']:.3f}, {r['ratio']:.2f}" if r else "-")
        out.append(f"| {codec} | " + " | ".join(cells) + " |")
    return out


def block():
    all_runs = runs()
    first_meta, first = all_runs[0]
    last_meta, last = all_runs[-1]
    out = [BEGIN, "", "Written by `bench/gpu/report.py --doc` from `bench/results/gpu/` "
           "(each run: `bench/gpu/run_on_device.sh all`, one device call).", "",
           "| run | date | device | driver | commit | builds timed beside it |", "|---|---|---|---|---|---|"]
    for meta, _ in all_runs:
        builds = "; ".join(f"{k}: {v}" for k, v in meta["builds"].items())
        out.append(f"| {meta['name']} | {meta['date']} | {meta['device']} | {meta['driver']} | "
                   f"{meta['commit']} | {builds} |")
    out += ["", f"**Verdicts of {last_meta['name']}** ({last_meta['note']}):", ""]
    out += [f"    {line}" for line in lines_of(last, "summary.txt")]
    failed = [line for line in lines_of(first, "summary.txt") if "FAILED" in line]
    out += ["", f"**First contact, {first_meta['name']}** ({first_meta['note']}): "
            f"{len(failed)} failed:", ""]
    out += [f"    {line}" for line in failed]
    for meta, folder in all_runs:
        if not glob.glob(os.path.join(folder, "codec_gpu_bench_*.md")):
            continue
        out += ["", f"**Builds compared in {meta['name']}** ({meta['note']}), 2^26 values, "
                "median of 20 (encode without error feedback):", ""]
        out += comparison(meta, folder, "2^26")
    folders = {meta["name"]: folder for meta, folder in all_runs}
    committed_runs = [meta["name"] for meta, _ in all_runs if meta.get("committed")]
    committed, committed_default = COMMITTED, COMMITTED_DEFAULT
    if committed_runs:  # The newest run of the committed build times every codec.
        committed, committed_default = {}, (committed_runs[-1], "codec_gpu_bench")
    timed = {}
    for (run, build) in set(committed.values()) | {committed_default}:
        timed[(run, build)] = codec_rows(os.path.join(folders[run], build + ".md"))
    tamp = {}
    for key in timed[committed_default]:
        source = committed.get(key[0], committed_default)
        if key in timed[source]:
            tamp[key] = dict(timed[source][key], run=f"{source[0]} {source[1]}")
    out += ["", "**The committed code**, per codec from the run and build that timed its path" + (
            f" ({committed_runs[-1]}, a run of the committed build):" if committed_runs else
            " (no run had exactly this build: its kernels ran on the H200, its choice between "
            "them is checked by `//compress/cuda:emulation_test` on the host):"), "",
            "| codec | n | encode / decode ms | memcpy ms | enc+dec / memcpy | timed in |",
            "|---|---|---|---|---|---|"]
    for key in sorted(tamp, key=lambda k: (k[1], list(tamp).index(k))):
        r = tamp[key]
        out.append(f"| {key[0]} | {key[1]} | {r['encode']:.3f} / {r['decode']:.3f} | "
                   f"{r['memcpy']:.3f} | {r['ratio']:.2f} | {r['run']} |")
    torch = codec_rows(os.path.join(last, "torch_compare.md"))
    out += ["", f"**Against PyTorch on the same GPU** (PyTorch from {last_meta['name']}, Tamp as "
            "above; each side's ratio against its own run's copy; PyTorch's "
            "GRACE-style codecs, bench/gpu/torch_compare.py: its signsgd and efsign send a byte "
            "per value, its top-k values and int64 indices):", "",
            "| codec | n | Tamp encode / decode ms | PyTorch encode / decode ms | Tamp enc+dec / memcpy | "
            "PyTorch enc+dec / memcpy |", "|---|---|---|---|---|---|"]
    for key in sorted(torch, key=lambda k: (k[1], k[0])):
        if key in tamp:
            a, b = tamp[key], torch[key]
            out.append(f"| {key[0]} | {key[1]} | {a['encode']:.3f} / {a['decode']:.3f} | "
                       f"{b['encode']:.3f} / {b['decode']:.3f} | {a['ratio']:.2f} | {b['ratio']:.2f} |")
    out += ["", f"**Training** ({last_meta['name']}, `tamp run`, 1 server and 1 worker on the same "
            "machine, 20 steps, batch 64; median step from step 2; the GPU losses against the CPU's "
            "by bench/gpu/compare_losses.py):", "", "| job | CPU step ms | GPU step ms | CPU / GPU |",
            "|---|---|---|---|"]
    steps = {}
    for line in lines_of(last, "step_times.md"):
        m = re.search(r"train_(\w+)\.md:median step ms \(steps 2 on\): CPU ([\d.]+), GPU ([\d.]+): "
                      r"CPU / GPU ([\d.]+)", line)
        if m:
            steps[m.group(1)] = m.groups()[1:]
            out.append(f"| {m.group(1)} | {m.group(2)} | {m.group(3)} | {m.group(4)}x |")
    # The targets, against the last run.
    elementwise = {c: tamp[(c, "2^26")]["ratio"] for c in ELEMENTWISE if (c, "2^26") in tamp}
    best = max(elementwise, key=elementwise.get) if elementwise else None
    topk = [line for line in lines_of(last, "summary.txt") if line.startswith("topk 1% at")]
    mlp = [f"{job} {steps[job][2]}x" for job in ("topk1_ef", "powersgd") if job in steps]
    out += ["", "**Targets** (the committed code's figures above; top-k and training from "
            f"{last_meta['name']}):", "",
            f"- element-wise codecs at >= 0.5x the copy (enc+dec / memcpy, 2^26): not met; best "
            f"{best} {elementwise.get(best, 0):.2f}, "
            + ", ".join(f"{c} {r:.2f}" for c, r in elementwise.items() if c != best) + ";",
            "- top-k 1% at >= 3x torch.topk: " + "; ".join(
                f"{t[len('topk 1% at '):]} ({'met' if float(t.rsplit(' ', 1)[1][:-1]) >= 3 else 'not met'})"
                for t in topk) + ";",
            f"- the GPU MLP's step >= 10x the CPU's: not met as whole steps ({', '.join(mlp)}; "
            f"the server's answer dominates the GPU step), the CNN's {steps.get('cnn', ['', '', '?'])[2]}x.",
            "", END]
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    store = sub.add_parser("import")
    store.add_argument("folder")
    store.add_argument("name")
    store.add_argument("--commit", required=True)
    store.add_argument("--build", action="append", default=[],
                       help="NAME=WHAT: what codec_gpu_bench_NAME was ('this' names the main build)")
    store.add_argument("--note", default="")
    store.add_argument("--committed", action="store_true",
                       help="the run's main build is the code as committed: its figures "
                            "replace the per-codec picks of COMMITTED")
    parser.add_argument("--doc", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.command == "import":
        import_run(args.folder, args.name, args.commit, args.build, args.note, args.committed)
        return 0
    text = open(DOC).read()
    new = replace_block(text, BEGIN, END, block(), DOC)
    if args.check:
        if new != text:
            print("docs/gpu.md's block is not what bench/gpu/report.py --doc writes")
            return 1
        return 0
    if args.doc:
        with open(DOC, "w") as f:
            f.write(new)
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
