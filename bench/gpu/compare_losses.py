#!/usr/bin/env python3
"""Compares the per-step losses of a GPU worker's run with a CPU worker's run of the same
seeded config (bench/gpu/run_on_device.sh train).

    compare_losses.py CPU_METRICS GPU_METRICS [--first_rel R] [--early_steps N]
                      [--early_rel R] [--rel R] [--accuracy A]

Each METRICS file is what `tamp run --metrics_file` writes (JSON lines; tools/loss_fingerprint.sh
reads the same). The two runs start from the same weights and batches, but cuBLAS sums the
GEMMs in another order than OpenBLAS, so the losses are close, not equal:
  - step 1 (the same weights, forward only differs): |gpu - cpu| <= first_rel * |cpu| (1e-4);
  - steps 2 .. early_steps (5): early_rel (1e-3);
  - every later step: rel (5e-2): the differences grow as the runs drift apart (a value near
    top-k's cut goes one way on one side, the other way on the other);
  - every step's wire bytes equal (the same codecs, payload sizes and wire formats);
  - each test accuracy within `accuracy` (0.02, absolute).
A wrong gradient, a missing or doubled update, or a gradient read before backward produced it
moves the loss far past the early bounds within a few steps.

How the bounds were chosen (no GPU at hand): the CPU worker against itself with OpenBLAS's
Prescott kernels (OPENBLAS_CORETYPE=Prescott: another summation order, as cuBLAS has), on
run_on_device.sh's train configs (learning rate 0.01) for 30 steps: step 1 equal; steps 2-5
at most 8.9e-5 (powersgd) and 3.4e-5 (topk1_ef); steps 6-20 at most 4.1e-3 and 5.6e-3; up to
1.1e-2 by step 30 (topk1_ef), so `train` stops at step 20; wire bytes equal; accuracy within
0.003. The bounds leave about 10x of that.

Prints a table (markdown), each run's median step time (steps 2 on) and a verdict; exits 1 on any mismatch, on a missing step, or when
either file holds no step. Plain Python 3 (the device machine's interpreter), no third-party modules.
"""
import argparse
import json
import statistics
import sys


def read(path):
    """(losses by (worker, step), bytes by (worker, step), accuracies by step, step times in
    ms of steps 2 on)."""
    losses, wire, accuracy, step_ms = {}, {}, {}, []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            if "loss" in row:
                key = (row["worker"], row["step"])
                losses[key] = float(row["loss"])  # "NaN", "Infinity" are strings.
                wire[key] = (row.get("bytes_pushed"), row.get("bytes_pulled"))
                if row["step"] >= 2 and "step_ms" in row:
                    step_ms.append(float(row["step_ms"]))
            elif "test_accuracy" in row:
                accuracy[row["step"]] = float(row["test_accuracy"])
    return losses, wire, accuracy, step_ms


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cpu")
    parser.add_argument("gpu")
    parser.add_argument("--first_rel", type=float, default=1e-4)
    parser.add_argument("--early_steps", type=int, default=5)
    parser.add_argument("--early_rel", type=float, default=1e-3)
    parser.add_argument("--rel", type=float, default=5e-2)
    parser.add_argument("--accuracy", type=float, default=0.02)
    args = parser.parse_args(argv)
    cpu_losses, cpu_wire, cpu_accuracy, cpu_step_ms = read(args.cpu)
    gpu_losses, gpu_wire, gpu_accuracy, gpu_step_ms = read(args.gpu)
    problems = []
    if not cpu_losses:
        problems.append(f"{args.cpu}: no step")
    if not gpu_losses:
        problems.append(f"{args.gpu}: no step")
    print("| worker | step | CPU loss | GPU loss | relative difference | bound |")
    print("|---|---|---|---|---|---|")
    for key in sorted(set(cpu_losses) | set(gpu_losses)):
        worker, step = key
        if key not in cpu_losses or key not in gpu_losses:
            problems.append(f"worker {worker} step {step}: only in the "
                            f"{'CPU' if key in cpu_losses else 'GPU'} run")
            continue
        cpu, gpu = cpu_losses[key], gpu_losses[key]
        bound = (args.first_rel if step == 1 else
                 args.early_rel if step <= args.early_steps else args.rel)
        difference = abs(gpu - cpu) / max(abs(cpu), 1e-30)
        print(f"| {worker} | {step} | {cpu!r} | {gpu!r} | {difference:.2e} | {bound:g} |")
        # Written so that a NaN on either side fails.
        if not difference <= bound:
            problems.append(f"worker {worker} step {step}: loss {gpu!r} on the GPU, {cpu!r} on "
                            f"the CPU ({difference:.2e} relative, bound {bound:g})")
        if cpu_wire[key] != gpu_wire[key]:
            problems.append(f"worker {worker} step {step}: wire bytes (pushed, pulled) "
                            f"{gpu_wire[key]} on the GPU, {cpu_wire[key]} on the CPU")
    for step in sorted(set(cpu_accuracy) & set(gpu_accuracy)):
        cpu, gpu = cpu_accuracy[step], gpu_accuracy[step]
        print(f"\ntest accuracy at step {step}: CPU {cpu!r}, GPU {gpu!r}")
        if not abs(gpu - cpu) <= args.accuracy:
            problems.append(f"step {step}: test accuracy {gpu!r} on the GPU, {cpu!r} on the CPU")
    if set(cpu_accuracy) != set(gpu_accuracy):
        problems.append(f"evaluations at steps {sorted(cpu_accuracy)} on the CPU, "
                        f"{sorted(gpu_accuracy)} on the GPU")
    if cpu_step_ms and gpu_step_ms:
        cpu, gpu = statistics.median(cpu_step_ms), statistics.median(gpu_step_ms)
        print(f"\nmedian step ms (steps 2 on): CPU {cpu:.2f}, GPU {gpu:.2f}: "
              f"CPU / GPU {cpu / max(gpu, 1e-9):.2f}")
    print()
    if problems:
        for problem in problems:
            print(f"MISMATCH: {problem}")
        return 1
    print(f"losses agree: step 1 within {args.first_rel:g}, steps to {args.early_steps} within "
          f"{args.early_rel:g}, later steps within {args.rel:g} relative; wire bytes equal")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
