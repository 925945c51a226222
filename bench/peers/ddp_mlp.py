#!/usr/bin/python3
"""PyTorch DistributedDataParallel peer of Tamp's reference MLP job, for docs/peers.md.

Trains the MLP 784-1024-1024-10 (ReLU, softmax cross-entropy) on Fashion-MNIST with 2
worker processes over gloo on 127.0.0.1, matching examples/mlp_fashion.pbtxt:
  - data: the IDX gz files read directly, pixels (p / 255 - 0.2860) / 0.3530 as in
    worker/fashion_mnist.cc; worker r trains on the contiguous half r of the 60k training
    set, reshuffled each epoch (worker/batcher.cc's scheme; the orders come from torch's
    generator, not Tamp's Philox stream), 64 examples per worker per step, so an epoch is
    30000 // 64 = 468 steps;
  - init: weights He-uniform U(-sqrt(6 / fan_in), +sqrt(6 / fan_in)), biases 0
    (common/model_layout.h), the same on both ranks (DDP broadcasts rank 0's anyway);
  - optimizer: torch.optim.SGD lr 0.05 momentum 0.9, which is Tamp's optim/sgd.cc
    (buf = m * buf + g, w -= lr * buf); the rate follows optim/schedule.cc's cosine,
    lr(s) = 0.05 * (1 + cos(pi * s / total_steps)) / 2, set before step s;
  - gradient: DDP averages the two ranks' gradients, as Tamp's SYNC shards do.
DDP has no servers: the two ranks all-reduce gradients with each other.

--hook picks DDP's communication hook: none (DDP's built-in all-reduce), fp16
(default_hooks.fp16_compress_hook) or powersgd (powerSGD_hook.powerSGD_hook).

Writes one JSON object (see --output), with "error" set when the run failed (a hook that
aborts under gloo is a result to record); the exit status is then 1. Bytes per step are
what crossed the loopback (/sys/class/net/lo statistics: both ranks, TCP/IP headers
included) during the timed steps; run it in a private namespace (bench/net/shaped.sh) so
no other traffic counts.
"""

import argparse
import datetime
import gzip
import json
import math
import os
import signal
import socket
import statistics
import struct
import sys
import tempfile
import time

import numpy as np

# One BLAS thread per rank, as Tamp's workers (worker_main --blas_threads 1). OpenBLAS reads
# this when it loads, with torch; torch.set_num_threads does not reach OpenBLAS's own pool.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
from torch.nn.parallel import DistributedDataParallel

WORLD_SIZE = 2
PIXEL_MEAN = 0.2860  # worker/fashion_mnist.h
PIXEL_STD = 0.3530
LOOPBACK_TX = "/sys/class/net/lo/statistics/tx_bytes"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hook", choices=["none", "fp16", "powersgd"], required=True)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--batch-size", type=int, default=64, help="examples per worker per step")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0,
                   help="stop after this many steps (0: the full run); the learning-rate "
                        "schedule still spans the full run, so the first steps match it")
    p.add_argument("--skip-steps", type=int, default=10,
                   help="first steps left out of the step-time statistics (warm-up)")
    p.add_argument("--eval-every", type=int, default=0,
                   help="rank 0 evaluates the 10k test set after every this many steps "
                        "(0: only after the last step); evaluated steps are left out of "
                        "the step-time statistics")
    p.add_argument("--target", type=float, default=0.85,
                   help="test accuracy for steps_to_target")
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
    p.add_argument("--output", required=True, help="JSON result file (written by rank 0)")
    args = p.parse_args(argv)
    for name in ("batch_size", "epochs", "collective_timeout_s"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    for name in ("max_steps", "skip_steps", "eval_every"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if not 0 < args.target <= 1:
        p.error(f"--target must be in (0, 1], got {args.target}")
    if args.powersgd_rank <= 0:
        p.error(f"--powersgd-rank must be > 0, got {args.powersgd_rank}")
    return args


def read_idx(path, expected_dims):
    """The array in IDX file `path` (gzip), as uint8 numpy; exits naming the file if malformed."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        sys.exit(f"{path}: cannot read: {e}")
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        sys.exit(f"{path}: not an unsigned-byte IDX file (bad magic)")
    ndims = raw[3]
    if ndims != expected_dims or len(raw) < 4 + 4 * ndims:
        sys.exit(f"{path}: expected {expected_dims} dimensions, header says {ndims}")
    dims = struct.unpack(f">{ndims}I", raw[4:4 + 4 * ndims])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndims)
    if data.size != math.prod(dims):
        sys.exit(f"{path}: header promises {math.prod(dims)} bytes of data, file has {data.size}")
    return data.reshape(dims)


def load_split(data_dir, prefix):
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 3)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 1)
    if images.shape[1:] != (28, 28) or labels.shape[0] != images.shape[0]:
        sys.exit(f"{data_dir}/{prefix}: expected N x 28 x 28 images and N labels, got "
                 f"{images.shape} and {labels.shape}")
    x = (torch.from_numpy(images.reshape(len(images), -1).astype(np.float32)) / 255.0
         - PIXEL_MEAN) / PIXEL_STD
    return x, torch.from_numpy(labels.astype(np.int64))


def make_mlp(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10))
    with torch.no_grad():
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                bound = math.sqrt(6.0 / layer.in_features)
                layer.weight.uniform_(-bound, bound)
                layer.bias.zero_()
    return model


def cosine_lr(base, step, total_steps):
    return base * 0.5 * (1 + math.cos(math.pi * min(1.0, step / total_steps)))


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def register_hook(ddp, args):
    if args.hook == "fp16":
        ddp.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    elif args.hook == "powersgd":
        state = powerSGD_hook.PowerSGDState(
            process_group=dist.group.WORLD,
            matrix_approximation_rank=args.powersgd_rank,
            start_powerSGD_iter=args.powersgd_start_iter)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)


def loopback_tx_bytes():
    try:
        with open(LOOPBACK_TX) as f:
            return int(f.read())
    except OSError:
        return None


def train(rank, args, port, result_queue):
    torch.set_num_threads(1)  # Intra-op threads; OpenBLAS's are set above.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    # A collective that waits on a dead peer fails after `timeout` instead of 30 minutes.
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD_SIZE,
                            timeout=datetime.timedelta(seconds=args.collective_timeout_s))
    train_x, train_y = load_split(args.data_dir, "train")
    shard = len(train_x) // WORLD_SIZE
    first = len(train_x) * rank // WORLD_SIZE
    shard_x, shard_y = train_x[first:first + shard], train_y[first:first + shard]
    steps_per_epoch = shard // args.batch_size
    total_steps = steps_per_epoch * args.epochs
    run_steps = min(total_steps, args.max_steps) if args.max_steps else total_steps
    test_x, test_y = load_split(args.data_dir, "t10k") if rank == 0 else (None, None)

    model = make_mlp(args.seed)
    if args.one_bucket:
        model_mb = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        dist._DEFAULT_FIRST_BUCKET_BYTES = int((model_mb + 1) * 2**20)
        ddp = DistributedDataParallel(model, bucket_cap_mb=model_mb + 1)
    else:
        ddp = DistributedDataParallel(model)
    register_hook(ddp, args)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)

    step_s, curve, error = [], [], None
    tx_start = tx_end = None
    steps_to_target = None
    order = None
    dist.barrier()
    wall_start = time.perf_counter()
    step = 0
    try:
        for step in range(run_steps):
            epoch, index = divmod(step, steps_per_epoch)
            if index == 0:
                g = torch.Generator().manual_seed(args.seed * 1000003 + epoch * 101 + rank)
                order = torch.randperm(shard, generator=g)
            if step == args.skip_steps:
                tx_start = loopback_tx_bytes()
            started = time.perf_counter()
            batch = order[index * args.batch_size:(index + 1) * args.batch_size]
            for group in optimizer.param_groups:
                group["lr"] = cosine_lr(args.lr, step, total_steps)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(ddp(shard_x[batch]), shard_y[batch])
            loss.backward()
            optimizer.step()
            elapsed = time.perf_counter() - started
            evaluated = rank == 0 and (
                step + 1 == run_steps or (args.eval_every and (step + 1) % args.eval_every == 0))
            if step >= args.skip_steps and not evaluated:
                step_s.append(elapsed)
            if evaluated:
                acc = accuracy(ddp.module, test_x, test_y)
                curve.append({"step": step + 1, "epoch": (step + 1) / steps_per_epoch,
                              "test_accuracy": acc, "loss": loss.item()})
                if steps_to_target is None and acc >= args.target:
                    steps_to_target = step + 1
        tx_end = loopback_tx_bytes()
        dist.barrier()
    except RuntimeError as e:  # A hook aborting under gloo is a result, not a crash.
        error = f"rank {rank} step {step}: {e}".strip().splitlines()[0]
    wall = time.perf_counter() - wall_start
    if rank != 0:
        if error:
            result_queue.put({"rank": rank, "error": error})
        return
    timed = len(step_s)
    median = statistics.median(step_s) if step_s else None
    bytes_per_step = None
    if tx_start is not None and tx_end is not None and run_steps > args.skip_steps:
        bytes_per_step = (tx_end - tx_start) / (run_steps - args.skip_steps)
    result_queue.put({
        "rank": 0,
        "hook": args.hook,
        "error": error,
        "world_size": WORLD_SIZE,
        "batch_size_per_worker": args.batch_size,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": total_steps,
        "steps_run": step + 1 if error is None else step,
        "timed_steps": timed,
        "step_time_median_s": median,
        "step_time_mean_s": statistics.fmean(step_s) if step_s else None,
        "steps_per_s": 1.0 / median if median else None,
        "wall_s": wall,
        "loopback_bytes_per_step": bytes_per_step,
        "steps_to_target": steps_to_target,
        "target": args.target,
        "final_accuracy": curve[-1]["test_accuracy"] if curve and error is None else None,
        "curve": curve,
        "powersgd_rank": args.powersgd_rank if args.hook == "powersgd" else None,
        "one_bucket": args.one_bucket,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    })


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_line(path):
    with open(path, errors="replace") as f:
        lines = [line.strip() for line in f if line.strip()]
    return lines[-1] if lines else ""


def run_ranks(args, port, log_dir):
    """Starts the ranks, each with its stderr in log_dir; returns (reports, exit codes).

    A rank that dies (a C++ abort in gloo raises no Python exception) leaves its peer
    blocked in a collective, so the survivors are stopped once one rank fails."""
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=run_rank, args=(rank, args, port, queue, log_dir))
             for rank in range(WORLD_SIZE)]
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
    return reports, [proc.exitcode for proc in procs]


def run_rank(rank, args, port, result_queue, log_dir):
    log = os.open(os.path.join(log_dir, f"rank{rank}.stderr"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.dup2(log, 2)
    train(rank, args, port, result_queue)


def main(argv):
    args = parse_args(argv)
    port = args.port or free_port()
    with tempfile.TemporaryDirectory(prefix="ddp_mlp.") as log_dir:
        reports, codes = run_ranks(args, port, log_dir)
        logs = {rank: os.path.join(log_dir, f"rank{rank}.stderr") for rank in range(WORLD_SIZE)}
        for rank, path in logs.items():
            with open(path, errors="replace") as f:
                text = f.read()
            if text:
                sys.stderr.write(f"--- rank {rank} stderr ---\n{text}")
        # The rank that failed first, not one stopped by run_ranks (SIGTERM).
        died = sorted((rank for rank, code in enumerate(codes) if code != 0),
                      key=lambda rank: codes[rank] == -signal.SIGTERM)
        death = None
        if died:
            death = (f"rank {died[0]} exited with code {codes[died[0]]}: "
                     f"{last_line(logs[died[0]]) or 'no message'}")
    result = next((r for r in reports if r["rank"] == 0), None)
    if result is None:
        result = {"rank": 0, "hook": args.hook, "error": death or "rank 0 reported nothing",
                  "torch_version": torch.__version__}
    peer_errors = [r["error"] for r in reports if r["rank"] != 0]
    # A rank that died (a C++ abort) is the cause; its peer's error is only the fallout.
    result["error"] = death or result["error"] or (peer_errors[0] if peer_errors else None)
    del result["rank"]
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)
    summary = {k: result.get(k) for k in ("hook", "steps_run", "steps_per_s", "steps_to_target",
                                      "final_accuracy", "loopback_bytes_per_step", "error")}
    print(json.dumps(summary))
    return 1 if result["error"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
