#!/usr/bin/python3
"""One front end's step times in one run, for bench/pytorch/run.sh's C++-against-Python rounds.

    step_times.py cpp METRICS_JSONL --skip S --output OUT.json
    step_times.py python TIMING_DIR --skip S --output OUT.json

cpp: the --metrics_file of `tamp run CONFIG` (the C++ trainer: StepMetrics lines per worker
and step, proto/events.proto). python: the --timing folder of examples/pytorch/train.py
(rank<R>.json per worker). Both time a step from taking its batch to the applied update.
Each figure is the median over a worker's steps after the first S (warm-up), then the median
over the workers (as the summary's step_ms_median); the phases are each front end's own
split (C++: compute, encode, wire, decode, apply; Python: batch, forward+backward with its
pushes, waiting for and applying the answers, and the process's CPU time per step). Both:
thread_cpu_ms, the training thread's CPU time per step.
"""

import argparse
import json
import os
import statistics
import sys

CPP_PHASES = ("step_ms", "compute_ms", "encode_ms", "wire_ms", "decode_ms", "apply_ms",
              "thread_cpu_ms")
PYTHON_PHASES = ("step_ms", "batch_ms", "backward_ms", "wait_ms", "cpu_ms", "thread_cpu_ms",
                 "page_faults", "waits", "preemptions")


def cpp_workers(path):
    """{worker: {phase: [value per step]}} of the StepMetrics lines in `path`."""
    workers = {}
    with open(path) as f:
        for line in f:
            event = json.loads(line)
            if "test_accuracy" in event or "step_ms" not in event:
                continue  # An EvalMetrics line.
            steps = workers.setdefault(event.get("worker", 0), {})
            for phase in CPP_PHASES:
                steps.setdefault(phase, []).append(event.get(phase, 0.0))
    return workers


def python_workers(folder):
    workers = {}
    for name in sorted(os.listdir(folder)):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                timing = json.load(f)
            workers[timing["rank"]] = {phase: timing[phase] for phase in PYTHON_PHASES}
    return workers


def summarize(workers, skip):
    if not workers:
        sys.exit("step_times.py: no worker's step times found")
    phases = next(iter(workers.values())).keys()
    out = {"workers": len(workers), "steps": min(len(w["step_ms"]) for w in workers.values()),
           "skip_steps": skip}
    for phase in phases:
        per_worker = [statistics.median(w[phase][skip:]) for w in workers.values()
                      if len(w[phase]) > skip]
        if len(per_worker) != len(workers):
            sys.exit(f"step_times.py: a worker ran no more than the {skip} warm-up steps")
        out[phase + "_median"] = statistics.median(per_worker)
    return out


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("frontend", choices=["cpp", "python"])
    p.add_argument("source", help="cpp: the metrics file; python: the timing folder")
    p.add_argument("--skip", type=int, required=True, help="warm-up steps left out")
    p.add_argument("--output", required=True)
    p.add_argument("--label", default="", help="stored as the run's label (round, config)")
    args = p.parse_args(argv)
    workers = cpp_workers(args.source) if args.frontend == "cpp" else python_workers(args.source)
    result = dict(summarize(workers, args.skip), frontend=args.frontend, label=args.label)
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{args.frontend}: {result['step_ms_median']:.2f} ms/step ({args.label})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
