"""What the PyTorch benches share: DDP's hooks, rank processes, step timing, link bytes.

Used by bench/peers/ddp_mlp.py (DDP's peers of the C++ trainer, docs/peers.md),
bench/peers/report.py and bench/pytorch/same_script.py (one script over DDP or Tamp,
docs/pytorch.md), so that both benches time, count and report in one way:
  - a step's time is the wall time from taking its batch to the optimizer's step returning;
    the first --skip-steps steps (warm-up) and evaluated steps are left out, and a run's
    figure is the median;
  - bytes per step are what crossed the loopback during the timed window
    (/sys/class/net/lo: every process of the run, TCP/IP headers included), so a run must
    have its own network namespace (bench/net/shaped.sh).

Threading: one BLAS thread and one torch thread per process, as Tamp's workers
(worker_main --blas_threads 1); import this module before torch so OpenBLAS sees it.
"""

import argparse
import datetime
import json
import math
import os
import signal
import socket
import statistics
import sys
import tempfile
import time

# OpenBLAS reads this when it loads, with torch; torch.set_num_threads does not reach
# OpenBLAS's own pool.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
import torch  # noqa: E402  (after OPENBLAS_NUM_THREADS)
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

LOOPBACK_TX = "/sys/class/net/lo/statistics/tx_bytes"
HOOKS = ("none", "fp16", "powersgd")


def set_threads():
    """One intra-op thread (OpenBLAS's are set at import)."""
    torch.set_num_threads(1)


def add_ddp_arguments(p: argparse.ArgumentParser, hook_required: bool) -> None:
    """The flags that pick and tune DDP's communication hook."""
    p.add_argument("--hook", choices=HOOKS, required=hook_required,
                   help="DDP's communication hook: none (DDP's built-in all-reduce), fp16 "
                        "(default_hooks.fp16_compress_hook) or powersgd (powerSGD_hook)")
    p.add_argument("--powersgd-rank", type=int, default=1,
                   help="PowerSGD matrix_approximation_rank")
    p.add_argument("--powersgd-start-iter", type=int, default=10,
                   help="PowerSGD start_powerSGD_iter (plain all-reduce before it)")
    p.add_argument("--one-bucket", action="store_true",
                   help="put all gradients in one DDP bucket (DDP's default is a 1 MiB first "
                        "bucket, then 25 MiB ones): the PowerSGD hook chains all-reduces in "
                        "callbacks, and with two buckets in flight the ranks can issue them in "
                        "different orders, which gloo rejects")
    p.add_argument("--collective-timeout-s", type=int, default=300,
                   help="gloo's timeout for one collective (and for the rendezvous)")
    p.add_argument("--port", type=int, default=0, help="rendezvous port (0: a free one)")


def check_training_arguments(p: argparse.ArgumentParser, args) -> None:
    """The run's own flags (--batch-size, --epochs, --max-steps, --skip-steps, --eval-every,
    --target) and the DDP ones (check_ddp_arguments); p.error() names the first bad one."""
    for name in ("batch_size", "epochs"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    for name in ("max_steps", "skip_steps", "eval_every"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if not 0 < args.target <= 1:
        p.error(f"--target must be in (0, 1], got {args.target}")
    check_ddp_arguments(p, args)


def check_ddp_arguments(p: argparse.ArgumentParser, args) -> None:
    if args.powersgd_rank <= 0:
        p.error(f"--powersgd-rank must be > 0, got {args.powersgd_rank}")
    if args.collective_timeout_s <= 0:
        p.error(f"--collective-timeout-s must be > 0, got {args.collective_timeout_s}")


def he_uniform_(model: torch.nn.Module) -> torch.nn.Module:
    """Tamp's initialisation (job/model_layout.h) of every Linear layer: weights
    U(-sqrt(6 / fan_in), +sqrt(6 / fan_in)), biases 0."""
    with torch.no_grad():
        for layer in model.modules():
            if isinstance(layer, torch.nn.Linear):
                bound = math.sqrt(6.0 / layer.in_features)
                layer.weight.uniform_(-bound, bound)
                layer.bias.zero_()
    return model


def cosine_lr(base: float, step: int, total_steps: int) -> float:
    """optim/schedule.cc's cosine: the rate before step `step` of `total_steps`."""
    return base * 0.5 * (1 + math.cos(math.pi * min(1.0, step / total_steps)))


def init_gloo(rank: int, world_size: int, port: int, timeout_s: int) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # A collective that waits on a dead peer fails after `timeout` instead of 30 minutes.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size,
                            timeout=datetime.timedelta(seconds=timeout_s))


def wrap_ddp(model: torch.nn.Module, args) -> DistributedDataParallel:
    """`model` under DDP (one bucket with --one-bucket) with --hook registered."""
    if args.one_bucket:
        model_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        dist._DEFAULT_FIRST_BUCKET_BYTES = int((model_mb + 1) * 2**20)
        ddp = DistributedDataParallel(model, bucket_cap_mb=model_mb + 1)
    else:
        ddp = DistributedDataParallel(model)
    if args.hook == "fp16":
        ddp.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    elif args.hook == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=dist.group.WORLD,
            matrix_approximation_rank=args.powersgd_rank,
            start_powerSGD_iter=args.powersgd_start_iter)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    return ddp


def loopback_tx_bytes():
    try:
        with open(LOOPBACK_TX) as f:
            return int(f.read())
    except OSError:
        return None


class StepTimer:
    """Step times and loopback bytes of a run's timed window (steps >= skip_steps)."""

    def __init__(self, skip_steps: int):
        self.skip_steps = skip_steps
        self.step_s = []
        self.tx_start = self.tx_end = None
        self.steps_in_window = 0

    def begin(self, step: int) -> float:
        if step == self.skip_steps:
            self.tx_start = loopback_tx_bytes()
        return time.perf_counter()

    def end(self, step: int, started: float, evaluated: bool) -> None:
        elapsed = time.perf_counter() - started
        if step >= self.skip_steps:
            self.steps_in_window += 1
            if not evaluated:
                self.step_s.append(elapsed)

    def stop(self) -> None:
        self.tx_end = loopback_tx_bytes()

    def figures(self) -> dict:
        median = statistics.median(self.step_s) if self.step_s else None
        bytes_per_step = None
        if self.tx_start is not None and self.tx_end is not None and self.steps_in_window:
            bytes_per_step = (self.tx_end - self.tx_start) / self.steps_in_window
        return {
            "timed_steps": len(self.step_s),
            "step_time_median_s": median,
            "step_time_mean_s": statistics.fmean(self.step_s) if self.step_s else None,
            "steps_per_s": 1.0 / median if median else None,
            "loopback_bytes_per_step": bytes_per_step,
        }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _last_line(path):
    with open(path, errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    return lines[-1] if lines else ""


def _run_rank(train, rank, world_size, args, port, result_queue, log_dir):
    log = os.open(os.path.join(log_dir, f"rank{rank}.stderr"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.dup2(log, 2)
    train(rank, world_size, args, port, result_queue)
    # gloo's threads torn down at interpreter exit instead can abort the process
    # ("terminate called without an active exception") after a run that succeeded.
    if dist.is_initialized():
        dist.destroy_process_group()


def run_ranks(train, world_size: int, args, fallback: dict) -> dict:
    """Runs train(rank, world_size, args, port, queue) in `world_size` processes; returns
    rank 0's report (a dict it put on the queue, with "rank": 0), "error" set when a rank
    failed. `fallback`: the report when rank 0 reported nothing.

    A rank that dies (a C++ abort in gloo raises no Python exception) leaves its peer
    blocked in a collective, so the survivors are stopped once one rank fails. Each rank's
    stderr is copied to ours at the end."""
    port = args.port or free_port()
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory(prefix="tamp_bench_ranks.") as log_dir:
        procs = [ctx.Process(target=_run_rank,
                             args=(train, rank, world_size, args, port, queue, log_dir))
                 for rank in range(world_size)]
        for proc in procs:
            proc.start()
        while any(proc.is_alive() for proc in procs):
            if any(proc.exitcode not in (None, 0) for proc in procs):
                time.sleep(2)  # Let the survivors report an error of their own first.
                for proc in procs:
                    if proc.is_alive():
                        proc.terminate()
            time.sleep(0.2)
        for proc in procs:
            proc.join()
        reports = []
        while not queue.empty():
            reports.append(queue.get())
        codes = [proc.exitcode for proc in procs]
        logs = {rank: os.path.join(log_dir, f"rank{rank}.stderr") for rank in range(world_size)}
        for rank, path in logs.items():
            with open(path, errors="replace") as f:
                text = f.read()
            if text:
                sys.stderr.write(f"--- rank {rank} stderr ---\n{text}")
        # The rank that failed first, not one stopped above (SIGTERM).
        died = sorted((rank for rank, code in enumerate(codes) if code != 0),
                      key=lambda rank: codes[rank] == -signal.SIGTERM)
        death = None
        if died:
            death = (f"rank {died[0]} exited with code {codes[died[0]]}: "
                     f"{_last_line(logs[died[0]]) or 'no message'}")
    result = next((r for r in reports if r["rank"] == 0), None)
    if result is None:
        result = dict(fallback, error=death or "rank 0 reported nothing")
    peer_errors = [r["error"] for r in reports if r["rank"] != 0]
    # A rank that died (a C++ abort) is the cause; its peer's error is only the fallout.
    result["error"] = death or result.get("error") or (peer_errors[0] if peer_errors else None)
    result.pop("rank", None)
    return result


def write_result(path: str, result: dict, summary_keys) -> int:
    """Writes `result` as JSON to `path`, prints its `summary_keys`; the exit status."""
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: result.get(k) for k in summary_keys}))
    return 1 if result.get("error") else 0


def load_json(path):
    """The JSON in `path`, None when it does not exist; exits naming a malformed file."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as e:
        sys.exit(f"{path}: not valid JSON: {e}")
