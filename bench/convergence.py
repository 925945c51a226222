#!/usr/bin/env python3
"""Convergence table: trains the MLP and the CNN of examples/ once per codec, with and without
error feedback, and writes docs/convergence.md (tables and SVG accuracy curves) and
bench/results/convergence.json. Run through bench/convergence.sh, which builds the binaries.

Each run's config is the model's template (bench/configs/base/mlp.pbtxt, cnn.pbtxt: the
examples as they were when the table was first run, raw pull) with its push codec and error
feedback swapped and test accuracy evaluated every --eval_every_steps steps
(training.eval_every_steps). Finished runs are kept in the JSON with their config text; a
later invocation reuses a run whose settings (the text less its comments) are unchanged, so
the script resumes where it stopped and regenerates the document for free.
"""

import argparse
import datetime
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import tamp_files

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_ACCURACY = 0.85

# (label, push codec text, whether error feedback means something for it). Labels name the
# configs: mlp_<label>_ef / mlp_<label>_noef, or mlp_<label> for single-row codecs.
# Biased codecs (sparsifiers, signs, low rank) drop or distort part of every gradient, so
# error feedback changes what is learnt. none is lossless, and fp16/bf16 round each value
# to within 2^-11 / 2^-8 of itself without bias: a residual of rounding errors is noise
# below what SGD already tolerates, so they get one row, without memory.
CODECS = [
    ("none", 'name: "none"', False),
    ("topk1", 'name: "topk" ratio: 0.01', True),
    ("randomk1", 'name: "randomk" ratio: 0.01', True),
    ("dgc1", 'name: "dgc" ratio: 0.01 sample_ratio: 0.01', True),
    ("efsign", 'name: "efsign"', True),
    ("signsgd", 'name: "signsgd"', True),
    ("qsgd127", 'name: "qsgd" levels: 127 bucket_size: 512', True),
    ("powersgd2", 'name: "powersgd" rank: 2', True),
    ("terngrad", 'name: "terngrad"', True),
    ("threshold", 'name: "threshold" threshold: 0.01', True),
    ("randomblock1", 'name: "randomblock" ratio: 0.01 num_blocks: 4', True),
    ("natural", 'name: "natural"', True),
    ("maxmin8", 'name: "maxmin" bits: 8 bucket_size: 512', True),
    ("signum", 'name: "signum" momentum: 0.9', True),
    ("fp16", 'name: "fp16"', False),
    ("bf16", 'name: "bf16"', False),
]
# Rows that also compress the pull (each shard's update, with the shard's residual), by the
# name the speed table's config of that name uses (bench/configs/<model>_<name>.pbtxt):
# name -> (push row it extends, pull codec text). The MLP's, and the CNN's where MODELS names
# them.
PULL_ROWS = {"topk1_ef_pulltopk1": ("topk1_ef", 'name: "topk" ratio: 0.01'),
             "dgc1_ef_pulltopk1": ("dgc1_ef", 'name: "topk" ratio: 0.01')}

# Rows that add compression settings of their own: name -> (push codec text, push feedback,
# lines added after the template's `seed:` line). MLP only. dgc_paper is Deep Gradient
# Compression as Lin et al. run it (docs/dgc.md): top-k 0.1% with momentum correction and
# factor masking, sparsity warm-up over the first two epochs (75% then 98.4% sparse), local
# gradient clipping.
SETTINGS_ROWS = {
    "dgc_paper": ('name: "topk" ratio: 0.001 ratio_warmup: [0.25, 0.015625]', "DGC_MOMENTUM",
                  "  clip_norm: 5\n"),
}

# Recommended settings per codec, one for every codec of `tamp codecs`: settings with which
# it reaches TARGET_ACCURACY on the MLP (issue 18). The row of the table above when the
# example's settings already get there (without memory where the codec needs none), else a
# row of RECOMMENDED_ROWS with settings of its own. Each is written out as
# bench/configs/recommended/<codec>.pbtxt (the exact config that ran, with its result) and is
# what `tamp codecs` recommends (compress/registry.cc; //compress:registry_test compares).
RECOMMENDED = {
    "none": "none", "topk": "topk1_ef", "fp16": "fp16", "bf16": "bf16", "dgc": "dgc1_ef",
    "threshold": "threshold_ef", "randomk": "randomk_rec", "randomblock": "randomblock_rec",
    "qsgd": "qsgd127_noef", "terngrad": "terngrad_noef", "signsgd": "signsgd_rec",
    "efsign": "efsign_rec", "signum": "signum_rec", "natural": "natural_noef",
    "maxmin": "maxmin8_noef", "powersgd": "powersgd2_ef",
}
# Rows of codecs that need settings of their own to train: name -> (push codec text, push
# feedback, the optimizer line replacing the example's). MLP only. Sign codecs take a step of
# fixed size per coordinate (lr for signsgd's vote), so they need a learning rate ~100x
# smaller than the example's; random-k and random-block release ~1/ratio steps of residual at
# once, which server momentum 0.9 turns into divergence.
RECOMMENDED_ROWS = {
    "randomk_rec": ('name: "randomk" ratio: 0.01', "RESIDUAL",
                    'optimizer { name: "sgd" learning_rate: 0.05 momentum: 0 '
                    'schedule { kind: COSINE } }'),
    "randomblock_rec": ('name: "randomblock" ratio: 0.01 num_blocks: 4', "RESIDUAL",
                        'optimizer { name: "sgd" learning_rate: 0.05 momentum: 0 '
                        'schedule { kind: COSINE } }'),
    "signsgd_rec": ('name: "signsgd"', "NONE",
                    'optimizer { name: "sgd" learning_rate: 0.00005 momentum: 0.9 '
                    'schedule { kind: COSINE } }'),
    "efsign_rec": ('name: "efsign"', "RESIDUAL",
                   'optimizer { name: "sgd" learning_rate: 0.01 momentum: 0.9 '
                   'schedule { kind: COSINE } }'),
    "signum_rec": ('name: "signum" momentum: 0.9', "NONE",
                   'optimizer { name: "sgd" learning_rate: 0.0003 momentum: 0 '
                   'schedule { kind: COSINE } }'),
}
RECOMMENDED_DIR = os.path.join(REPO, "bench/configs/recommended")

# The rows of the published pattern (top-k + memory matches none; without memory it loses;
# random-k without memory loses much more): run first.
PATTERN = ["none", "topk1_ef", "topk1_noef", "randomk1_ef", "randomk1_noef"]

# max_steps (0: none) cuts the run short; the cosine schedule then decays over those steps.
# The CNN costs ~10x the MLP per step and per evaluation, hence one epoch (468 steps per
# worker) for every row against the MLP's three; `cnn3` runs the CNN's pattern rows for the
# MLP's three epochs, to see whether the pattern changes with the run's length. "rows":
# the rows a model runs (default: all), "title": its name in the doc (default: upper case).
MODELS = {
    "mlp": {"template": "bench/configs/base/mlp.pbtxt", "epochs": 3, "max_steps": 0,
            "eval_every_steps": 50},
    "cnn": {"template": "bench/configs/base/cnn.pbtxt", "epochs": 1, "max_steps": 0,
            "eval_every_steps": 78},
    "cnn3": {"template": "bench/configs/base/cnn.pbtxt", "epochs": 3, "max_steps": 0,
             "eval_every_steps": 156, "rows": PATTERN + ["topk1_ef_pulltopk1"],
             "title": "CNN, 3 epochs"},
}
# A generous RPC deadline: on a loaded machine one evaluation of the CNN by worker 0 can
# take over a minute, longer than the default wait for a missing push.
RPC_TIMEOUT_MS = 600000


def all_runs():
    """Every (model, row name, codec text, feedback kind), pattern rows first."""
    rows = []
    for label, codec, biased in CODECS:
        if not biased:
            rows.append((label, codec, "NONE"))
            continue
        memory = "DGC_MOMENTUM" if label.startswith("dgc") else "RESIDUAL"
        rows.append((label + "_ef", codec, memory))
        rows.append((label + "_noef", codec, "NONE"))
    by_name = {name: (codec, fb) for name, codec, fb in rows}
    rows += [(name, *by_name[push_row]) for name, (push_row, _) in PULL_ROWS.items()]
    rows += [(name, codec, fb) for name, (codec, fb, _) in RECOMMENDED_ROWS.items()]
    rows += [(name, codec, fb) for name, (codec, fb, _) in SETTINGS_ROWS.items()]
    mlp_only = set(PULL_ROWS) | set(RECOMMENDED_ROWS) | set(SETTINGS_ROWS)
    runs = []
    for model in MODELS:
        runs += [(model, name, codec, fb) for name, codec, fb in rows if name in PATTERN]
    for model in MODELS:
        named = MODELS[model].get("rows")
        runs += [(model, name, codec, fb) for name, codec, fb in rows
                 if name not in PATTERN
                 and (name in named if named else model == "mlp" or name not in mlp_only)]
    return runs


def model_title(model):
    return MODELS[model].get("title", model.upper())


def rows_flag(model):
    """The bench/convergence.sh flag that picks `model`'s rows."""
    return "--rows" if model == "mlp" else "--cnn_rows"


def replace_once(text, pattern, replacement, what):
    new, count = re.subn(pattern, lambda _: replacement, text, count=1, flags=re.S)
    if count != 1:
        sys.exit(f"convergence.py: cannot find {what} in the example config")
    return new


def settings(config_text):
    """A config's text less its comment lines: what a run depends on."""
    return "".join(l for l in config_text.splitlines(True) if not l.lstrip().startswith("#"))


def make_config(model, row, codec, feedback, epochs, max_steps, eval_every_steps):
    """The template config of `model` with this row's push codec and evaluation cadence."""
    with open(os.path.join(REPO, MODELS[model]["template"])) as f:
        text = f.read()
    # The template's comments describe the template; the generated config says what it is.
    text = "".join(l for l in text.splitlines(True) if not l.lstrip().startswith("#"))
    name = f"{model}_{row}"
    text = replace_once(text, r'name: "[^"]*"', f'name: "{name}"', "the name")
    limit = f" max_steps: {max_steps}" if max_steps else ""
    text = replace_once(text, r"training \{[^}]*\}",
                        f"training {{ epochs: {epochs}{limit} "
                        f"eval_every_steps: {eval_every_steps} }}", "the training block")
    text = replace_once(text, r"cluster \{", f"cluster {{ rpc_timeout_ms: {RPC_TIMEOUT_MS}",
                        "the cluster block")
    text = replace_once(text, r"push \{[^}]*\}", f"push {{ {codec} }}", "the push codec")
    text = replace_once(text, r"push_feedback \{[^}]*\}", f"push_feedback {{ kind: {feedback} }}",
                        "the push feedback")
    if row in PULL_ROWS:
        text = replace_once(text, r"pull \{[^}]*\}",
                            f"pull {{ {PULL_ROWS[row][1]} }}\n    pull_feedback {{ kind: RESIDUAL }}",
                            "the pull codec")
    if row in SETTINGS_ROWS:
        seed = re.search(r"\n *seed: [^\n]*\n", text)
        if seed is None:
            sys.exit("convergence.py: cannot find the compression seed in the template config")
        text = replace_once(text, re.escape(seed.group(0)), seed.group(0) + SETTINGS_ROWS[row][2],
                            "the compression seed")
    if row in RECOMMENDED_ROWS:
        text = replace_once(text, r"optimizer \{[^\n]*\n", RECOMMENDED_ROWS[row][2] + "\n",
                            "the optimizer")
    elif feedback == "DGC_MOMENTUM":
        # DGC's momentum correction moves the momentum to the workers (as in
        # examples/mlp_fashion_dgc.pbtxt): the servers apply plain SGD.
        text = replace_once(text, r"momentum: 0\.9", "momentum: 0", "the optimizer momentum")
    optimizer = (f" and {RECOMMENDED_ROWS[row][2]}" if row in RECOMMENDED_ROWS else "")
    header = (f"# bench/convergence.py: {MODELS[model]['template']} with push {{ {codec} }} "
              f"and {feedback} error feedback{optimizer}.\n")
    return name, header + text


# What a server answers a push holding NaN or Inf (validation.nonfinite_policy REJECT), which
# ends the run: the training diverged.
DIVERGED = "holds NaN or Inf"


def run_job(binaries, name, config_text, work_dir):
    """Runs one job; returns its metrics lines (dicts), its summary (dict; None when the
    training diverged) and its wall seconds, or None when it failed otherwise."""
    config = os.path.join(work_dir, name + ".pbtxt")
    metrics = os.path.join(work_dir, name + ".metrics.jsonl")
    summary = os.path.join(work_dir, name + ".summary.json")
    log = os.path.join(work_dir, name + ".log")
    with open(config, "w") as f:
        f.write(config_text)
    command = [os.path.join(binaries, "tamp"), "run", config, f"--metrics_file={metrics}",
               f"--summary_json={summary}",
               f"--server_binary={os.path.join(binaries, 'tamp_server')}",
               f"--worker_binary={os.path.join(binaries, 'tamp_worker')}"]
    start = time.time()
    with open(log, "w") as out:
        launcher = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            status = launcher.wait()
        finally:
            if launcher.poll() is None:  # Interrupted: the launcher stops the job's processes.
                launcher.terminate()
                launcher.wait()
    wall = time.time() - start
    with open(log) as f:
        diverged = status != 0 and DIVERGED in f.read()
    if status != 0 and not diverged:
        print(f"convergence.py: {name} failed (exit {status}); see {log}", file=sys.stderr)
        return None
    lines = tamp_files.read_metrics(metrics)
    if diverged:
        return lines, None, wall
    return lines, tamp_files.read_summary(summary), wall


def digest(model, row, feedback, config_text, lines, summary, wall):
    """The JSON entry of one run: curve, per-epoch accuracy, bytes, ratio. summary None:
    the run diverged (no final accuracy; the curve and bytes up to then)."""
    steps = [l for l in lines if "test_accuracy" not in l]
    evals = sorted((l for l in lines if "test_accuracy" in l), key=lambda l: l["step"])
    curve = [[e["step"], e["test_accuracy"]] for e in evals]
    per_epoch = {}
    for e in evals:  # The last evaluation of each epoch is the one at its end...
        per_epoch[e["epoch"]] = e["test_accuracy"]
    if summary is None and evals:  # ...unless the run diverged during that epoch.
        del per_epoch[evals[-1]["epoch"]]
    reached = [step for step, accuracy in curve if accuracy >= TARGET_ACCURACY]
    pushed = sum(l["bytes_pushed"] for l in steps)
    pulled = sum(l["bytes_pulled"] for l in steps)
    raw = sum(l["raw_bytes_pushed"] for l in steps)
    return {
        "model": model,
        "row": row,
        "feedback": feedback,
        "final_accuracy": curve[-1][1] if curve and summary is not None else None,
        # The last step before a server rejected a non-finite push; None: it did not diverge.
        "diverged_at_step": max(l["step"] for l in steps) if summary is None else None,
        "accuracy_per_epoch": [per_epoch[e] for e in sorted(per_epoch)],
        "steps": max(l["step"] for l in steps),
        "steps_to_target": reached[0] if reached else None,
        "target_accuracy": TARGET_ACCURACY,
        # Per worker per step, averaged over every step of every worker.
        "bytes_pushed_per_step": pushed / len(steps),
        "bytes_pulled_per_step": pulled / len(steps),
        "raw_bytes_pushed_per_step": raw / len(steps),
        "compression_ratio": raw / pushed if pushed else None,
        "final_loss": summary.get("final_loss") if summary else None,
        # Wall time depends on the machine's load (accuracy does not): for the record only.
        "wall_seconds": round(wall, 1),
        "finished_utc": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"),
        **provenance(),
        "load_average_1min": round(os.getloadavg()[0], 1),
        "accuracy_curve": curve,
        "config": config_text,
    }


# ---------------------------------------------------------------------------------------
# Report


def fmt_bytes(n):
    for unit, size in (("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def codec_of(entry):
    match = re.search(r"push \{ (.*?) \}", entry["config"])
    return match.group(1).replace('name: ', '').replace('"', "")


def table(entries):
    out = ["| config | push codec | error feedback | final acc | acc per epoch | "
           f"steps to {TARGET_ACCURACY} | push B/step | pull B/step | push ratio |",
           "|---|---|---|---|---|---|---|---|---|"]
    for e in entries:
        final = (f"{e['final_accuracy']:.4f}" if e.get("diverged_at_step") is None
                 else f"diverged (NaN at step {e['diverged_at_step']})")
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            f"{e['model']}_{e['row']}", codec_of(e), e["feedback"], final,
            " / ".join(f"{a:.4f}" for a in e["accuracy_per_epoch"]) or "-",
            e["steps_to_target"] if e["steps_to_target"] is not None else "not reached",
            fmt_bytes(e["bytes_pushed_per_step"]), fmt_bytes(e["bytes_pulled_per_step"]),
            f"{e['compression_ratio']:.1f}x" if e["compression_ratio"] else "-"))
    return "\n".join(out)


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf"]

# Plots after the pattern one: codecs of a family together, each with `none` for reference.
PLOT_GROUPS = [
    ("sparsifiers", ["topk1", "dgc1", "threshold", "randomk1", "randomblock1"]),
    ("quantizers", ["fp16", "bf16", "qsgd127", "terngrad", "natural", "maxmin8"]),
    ("signs", ["signsgd", "efsign", "signum"]),
    ("lowrank", ["powersgd2"]),
]


def nice_step(span, ticks=6):
    """A round tick spacing (1, 2 or 5 times a power of ten) giving about `ticks` ticks."""
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def svg_plot(path, title, series, y_min, y_max):
    """Accuracy-vs-step line plot; series: [(label, color, dashed, [[step, acc], ...])]."""
    width, height, left, right, top, bottom = 760, 420, 60, 190, 30, 45
    x_max = max(p[0] for *_, points in series for p in points)
    px = lambda x: left + (width - left - right) * x / x_max
    py = lambda y: top + (height - top - bottom) * (y_max - y) / (y_max - y_min)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="13">{title}</text>']
    y_step = nice_step(y_max - y_min, 5)
    for i in range(int((y_max - y_min) / y_step + 1e-9) + 1):
        y = y_min + i * y_step
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{py(y):.1f}" '
                     f'y2="{py(y):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 5}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.2f}</text>')
    x_step = nice_step(x_max)
    for i in range(int(x_max / x_step) + 1):
        parts.append(f'<text x="{px(i * x_step):.1f}" y="{height - bottom + 15}" '
                     f'text-anchor="middle">{i * x_step:g}</text>')
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{py(TARGET_ACCURACY):.1f}" '
                 f'y2="{py(TARGET_ACCURACY):.1f}" stroke="black" stroke-dasharray="2,3"/>')
    parts.append(f'<text x="{left + 4}" y="{py(TARGET_ACCURACY) - 4:.1f}">'
                 f'target {TARGET_ACCURACY}</text>')
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 8}" '
                 'text-anchor="middle">step (per worker)</text>')
    parts.append(f'<text x="14" y="{height / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {height / 2})">test accuracy</text>')
    for i, (label, color, dashed, points) in enumerate(series):
        coords = " ".join(f"{px(x):.1f},{py(max(y, y_min)):.1f}" for x, y in points)
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6"{dash} '
                     f'points="{coords}"/>')
        ly = top + 16 * i + 8
        parts.append(f'<line x1="{width - right + 10}" x2="{width - right + 38}" y1="{ly}" '
                     f'y2="{ly}" stroke="{color}" stroke-width="1.6"{dash}/>')
        parts.append(f'<text x="{width - right + 44}" y="{ly + 4}">{label}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def codec_label(row):
    return re.sub(r"_(no)?ef$", "", row)


def write_plots(results, plot_dir):
    """Per model, the pattern rows and then each PLOT_GROUPS family that has runs, with
    `none` in each; returns {model: [(title, file name)]}."""
    os.makedirs(plot_dir, exist_ok=True)
    plots = {}
    for model in MODELS:
        entries = {e["row"]: e for e in results.values() if e["model"] == model}
        if not entries:
            continue
        # The axis fits the runs that did not diverge; a diverged curve is cut at the bottom.
        fitted = [a for e in entries.values() if e.get("diverged_at_step") is None
                  for _, a in e["accuracy_curve"]] or [TARGET_ACCURACY]
        y_min = min(0.7, math.floor(min(fitted) * 10) / 10)
        y_max = min(1.0, math.ceil(max(fitted) * 20) / 20 + 0.05)
        groups = [("pattern", ["topk1", "randomk1"])] + PLOT_GROUPS
        for kind, labels in groups:
            rows = [row for row in entries if codec_label(row) in labels]
            pattern_only = all(codec_label(row) in groups[0][1] for row in rows)
            if not rows or (kind != "pattern" and pattern_only):
                continue  # Nothing, or the pattern plot again.
            rows = sorted(rows, key=lambda r: (labels.index(codec_label(r)), r.endswith("noef")))
            if "none" in entries:
                rows = ["none"] + rows
            series = [(row + (" (diverged)" if entries[row].get("diverged_at_step") else ""),
                       "black" if row == "none" else
                       COLORS[labels.index(codec_label(row)) % len(COLORS)],
                       row.endswith("_noef"), entries[row]["accuracy_curve"]) for row in rows]
            file_name = f"convergence_{model}_{kind}.svg"
            title = (f"{model_title(model)}, {kind}: test accuracy vs step "
                     "(dashed: no error feedback)")
            svg_plot(os.path.join(plot_dir, file_name), title, series, y_min, y_max)
            plots.setdefault(model, []).append((title, file_name))
    return plots


def optimizer_of(entry):
    """The optimizer line of a run's config, as 'sgd lr 0.05 momentum 0.9 cosine'."""
    line = re.search(r"optimizer \{([^\n]*)\}", entry["config"]).group(1)
    name = re.search(r'name: "([^"]*)"', line).group(1)
    words = [name, "lr " + re.search(r"learning_rate: ([0-9.e-]+)", line).group(1)]
    momentum = re.search(r"momentum: ([0-9.e-]+)", line)
    words.append("momentum " + (momentum.group(1) if momentum else "0"))
    schedule = re.search(r"kind: (\w+)", line)
    if schedule:
        words.append(schedule.group(1).lower())
    return " ".join(words)


def recommended_section(results):
    """The table of every codec at its recommended settings (RECOMMENDED), from `results`."""
    out = ["## Recommended settings per codec (MLP, 3 epochs)", "",
           "One row per codec of `tamp codecs`, as the push codec: settings with which it",
           f"reaches {TARGET_ACCURACY} on the MLP (`tamp codecs` prints them too). Each row's "
           "exact config,",
           "with its result, is `bench/configs/recommended/<codec>.pbtxt` (written by this",
           "script). Rows named `*_rec` run settings of their own, the others are the row of",
           "the same name in the MLP table below.", "",
           "| codec | row | push codec | error feedback | optimizer (servers) | final acc | "
           f"steps to {TARGET_ACCURACY} | push B/step | push ratio |",
           "|---|---|---|---|---|---|---|---|---|"]
    missing = []
    for codec, row in RECOMMENDED.items():
        e = results.get(f"mlp_{row}")
        if e is None:
            missing.append(row)
            continue
        final = (f"{e['final_accuracy']:.4f}" if e.get("diverged_at_step") is None
                 else f"diverged (NaN at step {e['diverged_at_step']})")
        out.append("| {} | mlp_{} | {} | {} | {} | {} | {} | {} | {} |".format(
            codec, row, codec_of(e), e["feedback"], optimizer_of(e), final,
            e["steps_to_target"] if e["steps_to_target"] is not None else "not reached",
            fmt_bytes(e["bytes_pushed_per_step"]),
            f"{e['compression_ratio']:.1f}x" if e["compression_ratio"] else "-"))
    out.append("")
    if missing:
        out += ["Not run yet (`bench/convergence.sh --models mlp --rows recommended`): "
                + ", ".join(missing) + ".", ""]
    return out


def write_recommended_configs(results, directory):
    """bench/configs/recommended/<codec>.pbtxt: each codec's recommended run's exact config,
    headed by its result. Codecs whose run is missing get no file."""
    os.makedirs(directory, exist_ok=True)
    for codec, row in RECOMMENDED.items():
        e = results.get(f"mlp_{row}")
        if e is None:
            continue
        reached = (f"reached {TARGET_ACCURACY} at step {e['steps_to_target']}"
                   if e["steps_to_target"] is not None else f"did not reach {TARGET_ACCURACY}")
        final = (f"ended at test accuracy {e['final_accuracy']:.4f}"
                 if e.get("diverged_at_step") is None
                 else f"diverged at step {e['diverged_at_step']}")
        header = (f"# Recommended settings for codec {codec} (push), written by "
                  "bench/convergence.py from\n"
                  f"# bench/results/convergence.json, run mlp_{row} (do not edit; rerun the "
                  "script).\n"
                  f"# This exact config {final} and {reached} (docs/convergence.md).\n")
        with open(os.path.join(directory, codec + ".pbtxt"), "w") as f:
            f.write(header + e["config"])


# A figure the reading names, filled in from the results: {{RUN.FIELD}} or
# {{RUN.points_below:OTHER}} (how many points RUN's final accuracy is below OTHER's).
READING_FIGURE = re.compile(r"\{\{(\w+)\.(\w+)(?::(\w+))?\}\}")


def fill_reading(reading, results):
    """The hand-written reading with its figures taken from `results`, so that its prose is
    the one thing written by hand; exits naming a placeholder the results cannot fill."""
    def figure(match):
        run, field, other = match.groups()
        if run not in results or (other and other not in results):
            sys.exit(f"convergence.py: the reading names {match.group(0)}, not in the results")
        entry = results[run]
        if field == "points_below":
            return f"{100 * (results[other]['final_accuracy'] - entry['final_accuracy']):.1f}"
        value = entry.get(field)
        if value is None:
            return "never" if field == "steps_to_target" else "none"
        if isinstance(value, list):
            return " / ".join(f"{v:.4f}" for v in value)
        if field == "compression_ratio":
            return f"{value:.0f}x"
        return f"{value:.4f}" if isinstance(value, float) and value < 1 else str(value)
    return READING_FIGURE.sub(figure, reading)


def provenance():
    """The machine and the commit this process runs on, as each run records them."""
    git = lambda *a: subprocess.run(["git", *a], cwd=REPO, capture_output=True,
                                    text=True).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " (with uncommitted changes in the work tree)"
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    return {"machine": f"{cpu}, {os.cpu_count()} cores (shared)", "commit": commit}


def runs_provenance(results):
    """When, where and at which commit the page's runs ran, for its header; runs saved before
    they recorded a machine and a commit say 'not recorded'."""
    finished = sorted(e["finished_utc"] for e in results.values() if e.get("finished_utc"))
    when = f"{finished[0]} .. {finished[-1]} UTC" if finished else "at times not recorded"
    seen = lambda key: "; ".join(sorted({e.get(key, "not recorded") for e in results.values()}))
    return f"finished {when}; machine {seen('machine')}; commit {seen('commit')}"


def write_doc(path, results, plots, meta):
    order = {f"{m}_{name}": i for i, (m, name, _, _) in enumerate(all_runs())}
    lines = [
        "# Convergence: accuracy per codec, with and without error feedback",
        "",
        "Generated by `bench/convergence.sh` (do not edit by hand; rerun it). Raw results, with",
        "each run's exact config and accuracy curve: `bench/results/convergence.json`.",
        "",
        f"- Runs: {runs_provenance(results)}.",
        f"- This page: written {meta['date']} at commit {meta['commit']}.",
        "- Command: `bench/convergence.sh` (every row of both models, and the CNN's pattern",
        "  rows again for 3 epochs), or",
        "  `bench/convergence.sh --quick` (the pattern rows only). Finished runs are kept, so",
        "  the table may come from several invocations (each run's finishing time and machine",
        f"  load are in the JSON); this file was written by `{meta['command']}`.",
        "- Job: 2 servers, 2 workers, SYNC, batch 64 per worker, sgd lr 0.05 momentum 0.9",
        "  (except the recommended rows below, whose optimizer is given),",
        "  cosine schedule to 0 over the run, pull raw (`none`); the push codec and its error",
        "  feedback vary. Chunks under 16 KiB travel raw: the biases, and on the CNN also",
        "  conv1.weight (3.2 kB) and fc2.weight (5 kB), so its codecs compress fc1.weight and",
        "  conv2.weight (1.8 of its 1.82 MB). Codec seed 1. Rows with",
        "  DGC_MOMENTUM feedback run the servers at momentum 0: DGC's momentum correction moves",
        "  the momentum to the workers.",
        "- Random positions with a residual (randomk, randomblock with RESIDUAL) send each entry",
        "  about once in 1/ratio steps and hold the rest back, so the weights a gradient is",
        "  computed on lag the servers' by about 1/ratio steps of updates; the servers' momentum",
        "  0.9 amplifies that lag until training diverges (the `*1_ef` rows), which is why their",
        "  recommended rows run momentum 0. A random-position pull codec with a residual lags the",
        "  workers' replicas the same way: run it at momentum 0 or a larger ratio, or pull with",
        "  topk, which sends the entries that lag the most.",
        "- Test accuracy (10,000 Fashion-MNIST test images, worker 0) is evaluated every",
        "  `training.eval_every_steps` steps and at each epoch's end. *Steps to 0.85* is the",
        "  first evaluated step at or above 0.85, so it is exact only to the evaluation",
        "  interval.",
        "- Bytes per step are per worker, averaged over every step of both workers; the push",
        "  ratio is the fp32 bytes the pushes stood for over the bytes sent.",
        "- In SYNC mode the trajectory does not depend on the link, so the speed table's time",
        "  to target at a link = steps to target (here) x median step time at that link (from",
        "  its short speed runs).",
        "",
    ]
    lines += recommended_section(results)
    for model in MODELS:
        # The recommended rows run at optimizer settings of their own: their own table above.
        entries = sorted((e for e in results.values()
                          if e["model"] == model and e["row"] not in RECOMMENDED_ROWS),
                         key=lambda e: order.get(f"{e['model']}_{e['row']}", 1e9))
        if not entries:
            continue
        config = entries[0]["config"]
        epochs = re.search(r"epochs: (\d+)", config).group(1)
        interval = re.search(r"eval_every_steps: (\d+)", config).group(1)
        limit = re.search(r"max_steps: (\d+)", config)
        length = (f"the first {limit.group(1)} steps of {epochs} epoch(s)" if limit
                  else f"{epochs} epoch(s)")
        lines += [f"## {model_title(model)} ({MODELS[model]['template']}, {length}, "
                  f"evaluated every {interval} steps)", "", table(entries), ""]
        missing = [row for m, row, _, _ in all_runs()
                   if m == model and f"{m}_{row}" not in results and row not in RECOMMENDED_ROWS]
        if missing:
            lines += [f"Not in this table (not run yet: `bench/convergence.sh --models {model} "
                      f"{rows_flag(model)} ROWS`): "
                      + ", ".join(missing) + ".", ""]
        for title, file_name in plots.get(model, []):
            lines += [f"![{title}](plots/{file_name})", ""]
    lines += ["## Reading", "", fill_reading(meta["reading"], results), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


# ---------------------------------------------------------------------------------------


def save_run(path, name, entry):
    """Adds one run to the JSON file, re-read first: another invocation may have added
    runs of other rows since this one started."""
    runs = {}
    if os.path.exists(path):
        with open(path) as f:
            runs = json.load(f)["runs"]
    runs[name] = entry
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump({"target_accuracy": TARGET_ACCURACY, "runs": runs}, f, indent=1)
    os.replace(path + ".tmp", path)


def forwarded_flags(argv):
    """argv without --binaries DIR (a temporary directory): the flags a user would give."""
    flags = []
    skip = False
    for arg in argv:
        if not skip and arg != "--binaries":
            flags.append(arg)
        skip = arg == "--binaries"
    return flags


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binaries", required=True, help="dir with tamp, tamp_server, tamp_worker")
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated: " + ", ".join(MODELS))
    parser.add_argument("--rows", default="all",
                        help="'pattern' (none, topk1 and randomk1 +-EF), 'recommended' (the "
                             "rows of codecs with settings of their own), 'all', or a "
                             "comma-separated list of row names such as topk1_ef,fp16")
    parser.add_argument("--cnn_rows", default="all", help="rows for the CNN (as --rows)")
    parser.add_argument("--epochs", type=int, help="override every model's epochs")
    parser.add_argument("--cnn_max_steps", type=int, default=MODELS["cnn"]["max_steps"],
                        help="cut the CNN runs at this many steps (0: run every epoch)")
    parser.add_argument("--rerun", action="store_true", help="rerun runs already in the JSON")
    parser.add_argument("--report_only", action="store_true", help="run nothing")
    parser.add_argument("--json", default=os.path.join(REPO, "bench/results/convergence.json"))
    parser.add_argument("--doc", default=os.path.join(REPO, "docs/convergence.md"))
    parser.add_argument("--recommended_dir", default=RECOMMENDED_DIR,
                        help="where the recommended config per codec is written")
    parser.add_argument("--reading", default=os.path.join(REPO, "bench/convergence_reading.md"),
                        help="the hand-written reading of the results, pasted into the doc")
    args = parser.parse_args()

    results = {}
    if os.path.exists(args.json):
        with open(args.json) as f:
            results = json.load(f)["runs"]

    def wanted(model, row):
        choice = args.rows if model == "mlp" else args.cnn_rows
        if choice == "all":
            return True
        names = {"pattern": PATTERN, "recommended": list(RECOMMENDED_ROWS)}.get(
            choice, choice.split(","))
        return row in names

    models = args.models.split(",")
    for model in models:
        if model not in MODELS:
            sys.exit(f"convergence.py: unknown model '{model}' (mlp, cnn)")
    work_dir = tempfile.mkdtemp(prefix="tamp-convergence-")
    failed = []
    for model, row, codec, feedback in all_runs():
        if args.report_only or model not in models or not wanted(model, row):
            continue
        epochs = args.epochs or MODELS[model]["epochs"]
        max_steps = args.cnn_max_steps if model == "cnn" else MODELS[model]["max_steps"]
        name, text = make_config(model, row, codec, feedback, epochs, max_steps,
                                 MODELS[model]["eval_every_steps"])
        if not args.rerun and settings(results.get(name, {}).get("config", "")) == settings(text):
            print(f"convergence.py: {name}: kept from {args.json}", file=sys.stderr)
            continue
        print(f"convergence.py: {name}: running ({time.strftime('%H:%M:%S')}, load "
              f"{os.getloadavg()[0]:.1f})", file=sys.stderr)
        outcome = run_job(args.binaries, name, text, work_dir)
        if outcome is None:
            failed.append(name)
            continue
        lines, summary, wall = outcome
        results[name] = digest(model, row, feedback, text, lines, summary, wall)
        e = results[name]
        print(f"convergence.py: {name}: accuracy {e['final_accuracy']}, steps to target "
              f"{e['steps_to_target']}, diverged at {e['diverged_at_step']}, {wall:.0f} s",
              file=sys.stderr)
        save_run(args.json, name, results[name])

    reading = "(no reading written yet: bench/convergence_reading.md)"
    if os.path.exists(args.reading):
        with open(args.reading) as f:
            reading = f.read().strip()
    meta = {
        "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        "commit": provenance()["commit"],
        "command": " ".join(["bench/convergence.sh"] + forwarded_flags(sys.argv[1:])),
        "reading": reading,
    }
    if os.path.exists(args.json):  # With the runs other invocations added meanwhile.
        with open(args.json) as f:
            results = json.load(f)["runs"]
    plots = write_plots(results, os.path.join(os.path.dirname(args.doc), "plots"))
    write_recommended_configs(results, args.recommended_dir)
    write_doc(args.doc, results, plots, meta)
    print(f"convergence.py: wrote {args.doc}", file=sys.stderr)
    if failed:
        sys.exit(f"convergence.py: failed runs: {', '.join(failed)}")


if __name__ == "__main__":
    # SIGTERM unwinds like Ctrl-C, so that the running job is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
