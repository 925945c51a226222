#!/usr/bin/python3
"""PyTorch DistributedDataParallel peer of Tamp's reference MLP job, for docs/peers.md.

Trains the MLP 784-1024-1024-10 (ReLU, softmax cross-entropy) on Fashion-MNIST with 2
worker processes over gloo on 127.0.0.1, matching examples/mlp_fashion.pbtxt:
  - data: the IDX gz files (examples/pytorch/fashion_mnist.py read_split()), pixels
    (p / 255 - 0.2860) / 0.3530 as in worker/fashion_mnist.cc; worker r trains on the
    contiguous half r of the 60k training set, reshuffled each epoch (worker/batcher.cc's
    scheme; the orders come from torch's generator, not Tamp's Philox stream), 64 examples
    per worker per step, so an epoch is 30000 // 64 = 468 steps;
  - init: weights He-uniform U(-sqrt(6 / fan_in), +sqrt(6 / fan_in)), biases 0
    (job/model_layout.h), the same on both ranks (DDP broadcasts rank 0's anyway);
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
import os
import sys
import time

import numpy as np

_repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.append(os.path.join(_repo, "examples", "pytorch"))

import peers_common  # noqa: E402  (before torch: one OpenBLAS thread)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fashion_mnist  # noqa: E402  (the IDX reader)

WORLD_SIZE = 2
PIXEL_MEAN = 0.2860  # worker/fashion_mnist.h
PIXEL_STD = 0.3530


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
    peers_common.add_ddp_arguments(p, hook_required=True)
    p.add_argument("--output", required=True, help="JSON result file (written by rank 0)")
    args = p.parse_args(argv)
    peers_common.check_training_arguments(p, args)
    return args


def load_split(data_dir, prefix):
    try:
        images, labels = fashion_mnist.read_split(data_dir, prefix)
    except ValueError as e:
        sys.exit(str(e))
    x = (torch.from_numpy(images.reshape(len(images), -1).astype(np.float32)) / 255.0
         - PIXEL_MEAN) / PIXEL_STD
    return x, torch.from_numpy(labels.astype(np.int64))


def make_mlp(seed):
    torch.manual_seed(seed)
    return peers_common.he_uniform_(torch.nn.Sequential(
        torch.nn.Linear(784, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10)))


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def train(rank, world_size, args, port, result_queue):
    peers_common.set_threads()
    peers_common.init_gloo(rank, world_size, port, args.collective_timeout_s)
    train_x, train_y = load_split(args.data_dir, "train")
    shard = len(train_x) // world_size
    first = len(train_x) * rank // world_size
    shard_x, shard_y = train_x[first:first + shard], train_y[first:first + shard]
    steps_per_epoch = shard // args.batch_size
    total_steps = steps_per_epoch * args.epochs
    run_steps = min(total_steps, args.max_steps) if args.max_steps else total_steps
    test_x, test_y = load_split(args.data_dir, "t10k") if rank == 0 else (None, None)

    ddp = peers_common.wrap_ddp(make_mlp(args.seed), args)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum)

    timer = peers_common.StepTimer(args.skip_steps)
    curve, error = [], None
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
            started = timer.begin(step)
            batch = order[index * args.batch_size:(index + 1) * args.batch_size]
            for group in optimizer.param_groups:
                group["lr"] = peers_common.cosine_lr(args.lr, step, total_steps)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(ddp(shard_x[batch]), shard_y[batch])
            loss.backward()
            optimizer.step()
            evaluated = rank == 0 and (
                step + 1 == run_steps or (args.eval_every and (step + 1) % args.eval_every == 0))
            timer.end(step, started, evaluated)
            if evaluated:
                acc = accuracy(ddp.module, test_x, test_y)
                curve.append({"step": step + 1, "epoch": (step + 1) / steps_per_epoch,
                              "test_accuracy": acc, "loss": loss.item()})
                if steps_to_target is None and acc >= args.target:
                    steps_to_target = step + 1
        timer.stop()
        dist.barrier()
    except RuntimeError as e:  # A hook aborting under gloo is a result, not a crash.
        error = f"rank {rank} step {step}: {e}".strip().splitlines()[0]
    wall = time.perf_counter() - wall_start
    if rank != 0:
        if error:
            result_queue.put({"rank": rank, "error": error})
        return
    result_queue.put({
        "rank": 0,
        "hook": args.hook,
        "error": error,
        "world_size": world_size,
        "batch_size_per_worker": args.batch_size,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": total_steps,
        "steps_run": step + 1 if error is None else step,
        **timer.figures(),
        "wall_s": wall,
        "steps_to_target": steps_to_target,
        "target": args.target,
        "final_accuracy": curve[-1]["test_accuracy"] if curve and error is None else None,
        "curve": curve,
        "powersgd_rank": args.powersgd_rank if args.hook == "powersgd" else None,
        "one_bucket": args.one_bucket,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    })


def main(argv):
    args = parse_args(argv)
    result = peers_common.run_ranks(train, WORLD_SIZE, args, {
        "hook": args.hook, "torch_version": torch.__version__})
    return peers_common.write_result(args.output, result, (
        "hook", "steps_run", "steps_per_s", "steps_to_target", "final_accuracy",
        "loopback_bytes_per_step", "error"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
