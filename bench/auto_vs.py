#!/usr/bin/env python3
"""`auto` against `none` and the best hand-picked config, measured (docs/auto.md).

For each model and link, runs its contenders inside bench/net/shaped.sh (the speed table's
shaped loopback, bench/speed_table.py's run_job), alternating them, REPS rounds:
  none    the model with no compression;
  the MLP: best     the speed table's fastest MLP config at that link (bench/results/
                    speed.json), whatever it compresses;
           allowed  the speed table's fastest uniform config among auto's own candidates
                    (none, fp16, top-k 1% with memory: ALLOWED_MLP);
  the CNN: fp16 and topk1_ef, each of auto's candidates on every tensor;
  the layout models: topk1_ef (fp16 is left out to keep BERT's and GPT-2's runs short; the
                    performance model puts it between none and top-k at every link);
  auto    bench/configs/auto/<model>.pbtxt with its bandwidth set to the link (tamp run
          plans it first; the planning is not in the step times).
The step time is the median over every worker's steps after the warm-up, then the median
over the rounds. "best hand-picked" in the table is the fastest of the measured contenders
but auto, "allowed" the fastest of those auto could have chosen itself (every uniform one
but the MLP's `best`). Writes bench/results/auto_vs.json; --doc rewrites docs/auto.md's
second generated table from it, --check compares. Needs root (network namespaces, tc).

  bench/auto_vs.py [--models mlp,resnet50] [--links 1gbit,10gbit,unshaped] [--reps 2]
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import opt_build  # noqa: E402
import speed_table  # noqa: E402  (run_job, timed_config, digest)
from doc_block import replace_block  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "bench/results/auto_vs.json")
DOC = os.path.join(REPO, "docs/auto.md")
BEGIN, END = "<!-- auto_vs.py: begin -->", "<!-- auto_vs.py: end -->"
# The per-host table: bench/scaling.sh's rows (emulated hosts) of configs named *_auto next to
# the same model's other configs at the same servers, workers and rate.
SCALING = os.path.join(REPO, "bench/results/scaling.json")
HOSTS_BEGIN, HOSTS_END = "<!-- auto_vs.py hosts: begin -->", "<!-- auto_vs.py hosts: end -->"
# Steps per run and warm-up steps not counted, per model.
STEPS = {"mlp": (40, 10), "cnn": (40, 10), "resnet50": (12, 4), "bert_base": (8, 3), "gpt2_small": (8, 3)}
ALLOWED_MLP = ["mlp_none", "mlp_fp16", "mlp_topk1_ef"]  # bench/configs/auto/*'s candidates.
TOPK_EF = 'push { name: "topk" ratio: 0.01 } push_feedback { kind: RESIDUAL } pull { name: "none" }'
FP16 = 'push { name: "fp16" } pull { name: "none" }'


def read(path):
    with open(os.path.join(REPO, path)) as f:
        return f.read()


def with_compression(auto_text, chunk):
    """The auto config with its automatic block replaced by one default compression."""
    return re.sub(r"automatic\s*\{.*\n  \}", f"default_compression {{ {chunk} }}", auto_text,
                  count=1, flags=re.S)


def contenders(model, link):
    auto = read(f"bench/configs/auto/{model}.pbtxt")
    none = with_compression(auto, 'push { name: "none" } pull { name: "none" }')
    auto = re.sub(r'bandwidth:\s*"[^"]*"', f'bandwidth: "{link}"', auto)
    if model != "mlp":
        uniform = [("none", "none", none)]
        if model == "cnn":
            uniform.append(("fp16", "fp16", with_compression(auto, FP16)))
        uniform.append(("topk1_ef", "topk1_ef", with_compression(auto, TOPK_EF)))
        return uniform + [("auto", "auto", auto)]
    rows = [r for r in json.loads(read("bench/results/speed.json"))["results"]
            if r["name"].startswith("mlp_") and r["link"] == link]
    best = min(rows, key=lambda r: r["step_ms_median"])
    allowed = min((r for r in rows if r["name"] in ALLOWED_MLP), key=lambda r: r["step_ms_median"])
    return [("none", "none", read("bench/configs/mlp_none.pbtxt")),
            ("best", best["name"], read(best["config"])),
            ("allowed", allowed["name"], read(allowed["config"])),
            ("auto", "auto", auto)]


def absolute_models(text):
    """Layout paths made absolute (the timed config is written elsewhere), and a data block
    for speed_table.timed_config to cut (a LAYOUT model reads no data)."""
    text = text.replace('"../../../models/', f'"{REPO}/models/')
    return text if re.search(r"data\s*\{", text) else text + "data { }\n"


def write(results):
    """Merges `results` into bench/results/auto_vs.json, replacing the same model and link."""
    data = json.load(open(RESULTS)) if os.path.exists(RESULTS) else {"results": []}
    fresh = {(r["model"], r["link"]) for r in results}
    kept = [r for r in data["results"] if (r["model"], r["link"]) not in fresh]
    with open(RESULTS, "w") as f:
        json.dump({"results": kept + results}, f, indent=1)
        f.write("\n")


def run(models, links, reps):
    built = opt_build.build("//tools/tamp", "//server:tamp_server", "//worker:tamp_worker")
    work = tempfile.mkdtemp(prefix="auto_vs.")
    binaries = os.path.join(work, "bin")
    os.makedirs(binaries)
    for path in ("tools/tamp/tamp", "server/tamp_server", "worker/tamp_worker"):
        shutil.copy(os.path.join(built, path), binaries)
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    results = []
    for model in models:
        steps, warmup = STEPS[model]
        for link in links:
            meta = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
                    "commit": commit, "cores": os.cpu_count(),
                    "load_before": speed_table.load_average(), "reps": reps,
                    "command": "bench/auto_vs.py " + " ".join(sys.argv[1:])}
            runs = {}
            for rep in range(reps):
                entries = contenders(model, link)
                for who, name, text in (entries if rep % 2 == 0 else entries[::-1]):
                    path = os.path.join(work, f"{model}_{who}_{rep}.pbtxt")
                    text = speed_table.timed_config(absolute_models(text), steps, path)
                    _, workers = speed_table.cluster_shape(text)
                    lines = speed_table.run_job(binaries, link, path, text, work)
                    figures = speed_table.digest(lines, warmup, workers)
                    runs.setdefault(who, {"name": name, "step_ms": []})["step_ms"].append(
                        figures["step_ms_median"])
            for r in runs.values():
                r["step_ms_median"] = statistics.median(r["step_ms"])
            meta["load_after"] = speed_table.load_average()
            results.append({"model": model, "link": link, "steps": steps, "warmup": warmup,
                            "contenders": runs, "meta": meta})
            print(json.dumps(results[-1]), flush=True)
            write(results)


def picks(result):
    """(best hand-picked, allowed): the fastest measured contender but auto, and the fastest
    that auto could have chosen itself (for the MLP not `best`, which may compress the pull)."""
    uniform = {k: v for k, v in result["contenders"].items() if k != "auto"}
    pool = [v for k, v in uniform.items() if not (result["model"] == "mlp" and k == "best")]
    fastest = lambda runs: min(runs, key=lambda run: run["step_ms_median"])  # noqa: E731
    return fastest(uniform.values()), fastest(pool)


def block():
    data = json.load(open(RESULTS))
    lines = [BEGIN,
             "Measured by `bench/auto_vs.py`; ms per step, median of the alternated rounds "
             "(each the median over every worker's steps after the warm-up). \"best "
             "hand-picked\": the fastest contender measured but auto (`none` included); "
             "\"allowed\": the fastest of those auto could choose itself. run: date, commit, rounds, "
             "load averages before and after.", "",
             "| model | link | none ms | best hand-picked | best ms | allowed | allowed ms | "
             "auto ms | auto / none | auto / allowed | run |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["results"]:
        meta = r["meta"]
        best, allowed = picks(r)
        none, auto = (r["contenders"][k]["step_ms_median"] for k in ("none", "auto"))
        lines.append(f"| {r['model']} | {r['link']} | {none:.1f} | {best['name']} | "
                     f"{best['step_ms_median']:.1f} | {allowed['name']} | "
                     f"{allowed['step_ms_median']:.1f} | {auto:.1f} | {auto / none:.2f} | "
                     f"{auto / allowed['step_ms_median']:.2f} | {meta['date']}, "
                     f"{meta['commit']}, {meta['reps']} rounds, load {meta['load_before']} / "
                     f"{meta['load_after']} |")
    lines.append(END)
    return "\n".join(lines)


def hosts_block():
    rows = json.load(open(SCALING))
    lines = [HOSTS_BEGIN,
             "From bench/results/scaling.json (`bench/scaling.sh --configs \"scaling/resnet50_none "
             "scaling/resnet50_topk1_ef scaling/resnet50_auto\"`): every server and worker on "
             "an emulated host of its own behind a link of the rate each way; auto planned for "
             "that cluster with `--topology hosts`. ms per step, the median over every "
             "worker's steps after the warm-up; \"predicted\": `tamp model` on the resolved "
             "config. One run each, on this shared 2-core machine (run: date, commit).", "",
             "| model | servers x workers | rate | none ms | top-k 1% ms | auto ms | "
             "auto predicted ms | auto / none | auto / best | run |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for auto in (r for r in rows if r["config"].endswith("_auto")):
        model = auto["config"][:-len("_auto")]
        same = {r["config"][len(model) + 1:]: r for r in rows
                if r["config"].startswith(model + "_") and r is not auto and
                (r["servers"], r["workers"], r["rate"], r["run"]["started"]) ==
                (auto["servers"], auto["workers"], auto["rate"], auto["run"]["started"])}
        if "none" not in same or "topk1_ef" not in same:
            continue  # Not measured in the same run as both references: no comparison.
        none, topk = same["none"]["step_ms_median"], same["topk1_ef"]["step_ms_median"]
        ms = auto["step_ms_median"]
        predicted = auto.get("predicted_step_ms")
        lines.append(f"| {model} | {auto['servers']} x {auto['workers']} | {auto['rate']} | "
                     f"{none:.1f} | {topk:.1f} | {ms:.1f} | "
                     f"{'-' if predicted is None else f'{predicted:.1f}'} | {ms / none:.2f} | "
                     f"{ms / min(none, topk):.2f} | {auto['run']['started']}, "
                     f"{auto['run']['commit']} |")
    lines.append(HOSTS_END)
    return "\n".join(lines)


def doc_text():
    text = replace_block(open(DOC).read(), BEGIN, END, block(), DOC)
    return replace_block(text, HOSTS_BEGIN, HOSTS_END, hosts_block(), DOC)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="mlp,resnet50")
    parser.add_argument("--links", default="1gbit,10gbit,unshaped")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--doc", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.doc or args.check:
        if args.check and open(DOC).read() != doc_text():
            sys.exit("docs/auto.md's measured table is stale: run bench/auto_vs.py --doc")
        if args.doc:
            text = doc_text()  # Before open() truncates the file.
            with open(DOC, "w") as f:
                f.write(text)
        return
    run(args.models.split(","), args.links.split(","), args.reps)


if __name__ == "__main__":
    main()
