#!/usr/bin/env python3
"""Performance model against measurement: for each (config, link) with a measured step time,
runs `tamp model CONFIG --bandwidth LINK --json` and compares its prediction for the config's
own compression with the measured median step. Writes the table into docs/perf_model.md
(between the markers `<!-- model-vs-measured:begin -->` and `<!-- model-vs-measured:end -->`)
and the raw figures to bench/results/model_vs_measured.json. Target: within 20%.

Measured figures come from bench/results/speed.json (bench/speed_table.sh) when it exists.
With --measure (or when speed.json is missing) the script measures short runs itself:
each config runs --steps steps inside bench/net/shaped.sh LINK (needs root), and the medians
over steps after the 10th go to bench/results/model_calibration.json, which later runs reuse
unless --measure is given again.

    bench/model_vs_measured.py                      # compare with speed.json (or measure)
    bench/model_vs_measured.py --measure --links 1gbit,unshaped --steps 60 \\
        --configs bench/configs/mlp_none.pbtxt bench/configs/mlp_topk1_ef.pbtxt

Run from anywhere; builds //tools/tamp:tamp first unless --tamp names a binary. The model
side takes two `tamp model` runs per (config, link), 2-6 s; measuring takes one short job
per pair (10-40 s each on 2 cores). OPENBLAS_CORETYPE is set as bench/openblas_env.sh sets
it for the speed table, so that both measure the same GEMM kernels.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import opt_build
import tamp_files
from doc_block import replace_block

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_ERROR = 0.20
BEGIN = "<!-- model-vs-measured:begin -->"
END = "<!-- model-vs-measured:end -->"
SPLIT = ["compute_ms", "encode_ms", "wire_ms", "decode_ms", "apply_ms"]


def fail(message):
    sys.exit(f"model_vs_measured: {message}")


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def use_openblas_kernels():
    """OPENBLAS_CORETYPE as bench/openblas_env.sh picks it (the speed table's runs use it), so
    that the model's compute measurement and the measured runs use the same GEMM kernels."""
    result = subprocess.run(["bash", "-c", 'source bench/openblas_env.sh; echo "${OPENBLAS_CORETYPE:-}"'],
                            cwd=REPO, stdout=subprocess.PIPE, text=True, check=True)
    if result.stdout.strip():
        os.environ["OPENBLAS_CORETYPE"] = result.stdout.strip()


def build_tamp():
    # The servers and workers too: `tamp model --calibration_job` runs them (found next to tamp).
    return os.path.join(opt_build.build("//tools/tamp:tamp", "//server:tamp_server",
                                        "//worker:tamp_worker"), "tools/tamp/tamp")


def first_key(entry, names):
    for name in names:
        if name in entry and entry[name] is not None:
            return entry[name]
    return None


def speed_entries(path):
    """(config, link, figures) of every measured run in speed.json: a list of runs, or an
    object holding one under "runs" / "results" / "rows", or {config: {link: run}}."""
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):
        for key in ("runs", "results", "rows"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
    runs = []
    if isinstance(data, dict):  # {config: {link: figures}}
        for config, links in data.items():
            if isinstance(links, dict):
                for link, figures in links.items():
                    if isinstance(figures, dict):
                        runs.append(dict(figures, config=figures.get("config", config), link=link))
    else:
        runs = [run for run in data if isinstance(run, dict)]
    entries = []
    for run in runs:
        config = first_key(run, ["config_path", "config", "config_file"])
        link = first_key(run, ["link", "rate", "bandwidth"])
        step = first_key(run, ["step_ms_median", "step_ms"])
        if config is None or link is None or step is None:
            continue
        if not os.path.isabs(config):
            config = os.path.join(REPO, config)
        entries.append((config, str(link), run))
    if not entries:
        fail(f"{path} holds no run with a config, a link and step_ms_median")
    return entries


def with_max_steps(text, steps):
    """The config text with training.max_steps set to `steps`."""
    if re.search(r"max_steps:\s*\d+", text):
        return re.sub(r"max_steps:\s*\d+", f"max_steps: {steps}", text, count=1)
    if re.search(r"training\s*\{", text):
        return re.sub(r"training\s*\{", f"training {{ max_steps: {steps}", text, count=1)
    return text + f"\ntraining {{ max_steps: {steps} }}\n"


def measure(tamp, config, link, steps, work_dir):
    with open(config) as f:
        text = with_max_steps(f.read(), steps)
    name = os.path.splitext(os.path.basename(config))[0]
    short = os.path.join(work_dir, f"{name}.pbtxt")
    metrics = os.path.join(work_dir, f"{name}_{link}.jsonl")
    with open(short, "w") as f:
        f.write(text)
    command = [os.path.join(REPO, "bench/net/shaped.sh"), link, "--", tamp, "run", short,
               f"--metrics_file={metrics}", f"--run_dir={work_dir}/run_{name}_{link}"]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode == 77:
        fail("measuring needs root (bench/net/shaped.sh exited 77)")
    if result.returncode != 0:
        fail(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}")
    rows = tamp_files.read_metrics(metrics)
    rows = [r for r in rows if "step_ms" in r]  # STEP events (EVAL ones carry no timings).
    if not rows:
        fail(f"{metrics} holds no step")
    rows = [r for r in rows if r.get("step", 0) > 10] or rows
    figures = {"step_ms_median": statistics.median(r.get("step_ms", 0) for r in rows)}
    for key in SPLIT:
        figures[key] = statistics.median(r.get(key, 0) for r in rows)
    by_worker = {}
    for r in rows:
        by_worker.setdefault(r.get("worker", 0), []).append(
            r.get("bytes_pushed", 0) + r.get("bytes_pulled", 0))
    figures["bytes_per_step"] = sum(statistics.median(b) for b in by_worker.values())
    figures.update(config=os.path.relpath(config, REPO), link=link, steps=steps,
                   load_average=load_average())
    return figures


def predict(tamp, config, link, compute_ms=None, model_flags=()):
    command = [tamp, "model", config, "--bandwidth", link, "--json", *model_flags]
    if compute_ms:
        command.append(f"--compute_ms={compute_ms}")
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        fail(f"tamp model {config} --bandwidth {link} failed: {result.stderr.strip()}")
    prediction = json.loads(result.stdout)
    rows = {row["codec"]: row for row in prediction["codecs"]}
    # The config's own compression; a config without any is its own "none" row.
    row = rows.get("config", rows["none"])
    if "error" in row:
        fail(f"tamp model {config} --bandwidth {link}: {row['error']}")
    return row, prediction


def table(results):
    split = lambda f: "/".join(f"{f.get(k, 0):.1f}" for k in SPLIT)
    mark = lambda error: f"{100 * error:+.0f}%" + ("" if abs(error) <= TARGET_ERROR else " ✗")
    lines = ["| config | link | measured ms | predicted ms | error | bound | timeline alone ms | error "
             "| predicted ms, run's compute given | error | measured split c/e/w/d/a "
             "| predicted split c/e/w/d/a | measured MB/step | predicted MB/step | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        m, p = r["measured"], r["predicted"]
        given = r.get("predicted_given_compute")
        measured_bytes = first_key(m, ["link_bytes_per_step", "bytes_per_step"])
        measured_mb = f"{measured_bytes / 1e6:.2f}" if measured_bytes is not None else "-"
        predicted_mb = (p["bytes_pushed_per_step"] + p["bytes_pulled_per_step"]) / 1e6
        given_cells = (f"{given['step_ms']:.1f} | {mark(r['error_given_compute'])}" if given
                       else "- | -")
        lines.append(f"| {os.path.relpath(r['config'], REPO)} | {r['link']} "
                     f"| {m['step_ms_median']:.1f} | {p['step_ms']:.1f} | {mark(r['error'])} "
                     f"| {p['bound']} | {p['timeline_ms']:.1f} | {mark(r['error_timeline'])} "
                     f"| {given_cells} | {split(m)} | {split(p)} | {measured_mb} "
                     f"| {predicted_mb:.2f} | {r['load_average'].split()[0]} |")
    def within(key):
        errors = [r[key] for r in results if key in r]
        return f"{sum(abs(e) <= TARGET_ERROR for e in errors)} of {len(errors)}"
    lines.append("")
    lines.append(f"Within {TARGET_ERROR:.0%} of the measured median step: {within('error')} "
                 f"predictions ({within('error_timeline')} from the timeline alone, without the "
                 f"CPU bound), {within('error_given_compute')} given the run's compute time "
                 f"(✗: outside). Bound: what decided the prediction (link, timeline or cpu). "
                 f"Load: the 1-minute load average when predicting (2 cores).")
    return "\n".join(lines)


def write_doc(path, body):
    text = open(path).read() if os.path.exists(path) else f"# Performance model\n\n{BEGIN}\n{END}\n"
    text = replace_block(text, BEGIN, END, f"{BEGIN}\n{body}\n{END}", path)
    with open(path, "w") as f:
        f.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speed", default=os.path.join(REPO, "bench/results/speed.json"))
    parser.add_argument("--measure", action="store_true",
                        help="measure short runs here instead of reading speed.json")
    parser.add_argument("--configs", nargs="+",
                        default=["bench/configs/mlp_none.pbtxt",
                                 "bench/configs/mlp_topk1_ef.pbtxt"])
    parser.add_argument("--links", default="1gbit,10gbit,unshaped")
    parser.add_argument("--steps", type=int, default=60, help="steps of each measured run")
    parser.add_argument("--tamp", help="tamp binary (default: build and use bazel-bin's)")
    parser.add_argument("--calibration_job", action="store_true",
                        help="predict with `tamp model --calibration_job` (short runs of each "
                             "config and its uncompressed twin, once per config, reused at every "
                             "link with --job_cpu); tamp_server and tamp_worker are found next "
                             "to --tamp or through $TAMP_SERVER_BINARY / $TAMP_WORKER_BINARY")
    parser.add_argument("--doc", default=os.path.join(REPO, "docs/perf_model.md"))
    parser.add_argument("--out", default=os.path.join(REPO, "bench/results/model_vs_measured.json"))
    args = parser.parse_args()
    use_openblas_kernels()
    tamp = args.tamp or build_tamp()
    if not os.access(tamp, os.X_OK):
        fail(f"--tamp {tamp}: not an executable file")
    calibration = os.path.join(REPO, "bench/results/model_calibration.json")

    job_cpu = {}  # Per config, with --calibration_job: the calibration, measured once.

    def model_flags(config, link):
        if not args.calibration_job:
            return ()
        if config not in job_cpu:
            _, prediction = predict(tamp, config, link, model_flags=("--calibration_job",))
            job = prediction["job_cpu"]
            job_cpu[config] = (f"--job_cpu={job['ms_per_step']},{job['ms_per_byte']},"
                               f"{job['core_utilization']},{job['payload_bytes_per_ms']}",)
            print(f"{os.path.relpath(config, REPO)}: calibration job: {job['ms_per_step']:.2f} ms"
                  f" per step + {1e6 * job['ms_per_byte']:.2f} ns per byte, cores"
                  f" {100 * job['core_utilization']:.0f}% busy", flush=True)
        return job_cpu[config]

    def compare(config, link, measured):
        flags = model_flags(config, link)
        predicted, prediction = predict(tamp, config, link, model_flags=flags)
        step = measured["step_ms_median"]
        error = (predicted["step_ms"] - step) / step
        result = {"config": config, "link": link, "measured": measured, "predicted": predicted,
                  "error": error, "error_timeline": (predicted["timeline_ms"] - step) / step,
                  "model_compute_ms": prediction["measured_compute_ms"],
                  "transport": prediction["transport"], "cores": prediction["cores"],
                  "job_cpu": prediction.get("job_cpu"),
                  "load_average": load_average()}
        # The same, given the run's own compute time: checks the communication part alone.
        if measured.get("compute_ms"):
            given, _ = predict(tamp, config, link, measured["compute_ms"], flags)
            result["predicted_given_compute"] = given
            result["error_given_compute"] = (given["step_ms"] - step) / step
        print(f"{os.path.relpath(config, REPO)} {link}: measured {step:.1f} ms, predicted "
              f"{predicted['step_ms']:.1f} ms ({100 * error:+.0f}%)"
              + (f", {result['predicted_given_compute']['step_ms']:.1f} ms given its compute "
                 f"({100 * result['error_given_compute']:+.0f}%)" if "error_given_compute" in result
                 else ""), flush=True)
        return result

    results = []
    if not args.measure and (os.path.exists(args.speed) or os.path.exists(calibration)):
        source = args.speed if os.path.exists(args.speed) else calibration
        results = [compare(*entry) for entry in speed_entries(source)]
    else:
        # Each prediction right after its measurement: both see the same machine load.
        runs = []
        with tempfile.TemporaryDirectory(prefix="tamp-model-") as work_dir:
            for config in args.configs:
                config = config if os.path.isabs(config) else os.path.join(REPO, config)
                for link in args.links.split(","):
                    print(f"measuring {os.path.relpath(config, REPO)} at {link} ...", flush=True)
                    runs.append(measure(tamp, config, link, args.steps, work_dir))
                    results.append(compare(config, link, runs[-1]))
        os.makedirs(os.path.dirname(calibration), exist_ok=True)
        with open(calibration, "w") as f:
            json.dump({"runs": runs}, f, indent=1)
        source = calibration
    source = os.path.relpath(source, REPO)

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    calibrated = (" Predictions with `--calibration_job` (each config's calibration measured once,"
                  " reused at every link)." if args.calibration_job else "")
    body = (f"Generated by `bench/model_vs_measured.py` on {stamp} from `{source}`; load "
            f"average while predicting: {load_average()} (2 cores).{calibrated}\n\n"
            + table(results))
    write_doc(args.doc, body)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"source": source, "generated": stamp, "results": [
            dict(r, config=os.path.relpath(r["config"], REPO)) for r in results]}, f, indent=1)
    print(f"wrote {os.path.relpath(args.doc, REPO)} and {os.path.relpath(args.out, REPO)}")


if __name__ == "__main__":
    main()
