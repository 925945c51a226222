#!/usr/bin/python3
"""One PyTorch training script, over DDP (gloo) or through Tamp, for docs/pytorch.md.

The MLP of examples/pytorch/mlp.py (784-1024-1024-10) on Fashion-MNIST as
examples/pytorch/fashion_mnist.py serves it (worker r of 2 trains on half r, 64 examples per
step, 468 steps per epoch, 3 epochs), SGD lr 0.05 momentum 0.9 on optim/schedule.cc's
cosine. Only the lines under `if args.backend == ...` differ between the contenders:

  --backend ddp --hook none|fp16|powersgd   DistributedDataParallel over gloo on 127.0.0.1,
        with that communication hook; this script starts both ranks itself. Weights start
        He-uniform from --seed (Tamp's initialisation), the same on both ranks.
  --backend tamp   tamp.torch.DistributedOptimizer; run as each worker of a Tamp job:
        tamp run CONFIG -- /usr/bin/python3 bench/pytorch/same_script.py --backend tamp ...
        The config (TAMP_CONFIG) sets batch, shuffle seed, codecs and the servers' optimizer
        (with `model { kind: MLP }` the servers' seeded He-uniform initialisation); its
        data and schedule must be the ones above (bench/configs/mlp_*.pbtxt are).

Per run, rank 0 writes --output (JSON): median step time and steps/s over the timed steps,
loopback bytes per step (run it in its own namespace: bench/net/shaped.sh), and the test
accuracy every --eval-every steps with the first step at or above --target. Timing and
counting are bench/peers/peers_common.py's, as for docs/peers.md. "error" is set (exit
status 1) when the run failed.
"""

import argparse
import os
import sys
import time

_repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(_repo, "bench", "peers"), os.path.join(_repo, "examples", "pytorch")]

import peers_common  # noqa: E402  (before torch: one OpenBLAS thread)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fashion_mnist  # noqa: E402
from mlp import Mlp  # noqa: E402

WORLD_SIZE = 2  # DDP's ranks; under Tamp, the config's cluster.num_workers.
SUMMARY = ("backend", "hook", "config", "steps_run", "steps_per_s", "steps_to_target",
           "final_accuracy", "loopback_bytes_per_step", "error")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=["ddp", "tamp"], required=True)
    peers_common.add_ddp_arguments(p, hook_required=False)
    p.add_argument("--data-dir", default=fashion_mnist.DEFAULT_DIR)
    p.add_argument("--batch-size", type=int, default=64, help="DDP: examples per rank per step")
    p.add_argument("--shuffle-seed", type=int, default=1, help="DDP: as data.shuffle_seed")
    p.add_argument("--epochs", type=int, default=3, help="DDP: as training.epochs")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1, help="DDP: the weights' seed")
    p.add_argument("--max-steps", type=int, default=0,
                   help="stop after this many steps (0: the full run); the learning-rate "
                        "schedule still spans the full run")
    p.add_argument("--skip-steps", type=int, default=20,
                   help="first steps left out of the timing (warm-up; PowerSGD starts "
                        "compressing at 10)")
    p.add_argument("--eval-every", type=int, default=0,
                   help="rank 0 evaluates the 10k test images every this many steps (0: only "
                        "after the last); evaluated steps are not timed")
    p.add_argument("--target", type=float, default=0.85, help="test accuracy for steps_to_target")
    p.add_argument("--output", required=True, help="JSON result file (written by rank 0)")
    args = p.parse_args(argv)
    if args.backend == "ddp" and args.hook is None:
        p.error("--backend ddp needs --hook")
    if args.backend == "tamp" and args.hook is not None:
        p.error("--hook is DDP's; Tamp's codecs come from the config")
    peers_common.check_training_arguments(p, args)
    return args


def train(rank, world_size, args, port, result_queue):
    """Trains one rank; rank 0 puts its report (the JSON's fields) on result_queue (or
    returns it when result_queue is None)."""
    peers_common.set_threads()
    images, labels = fashion_mnist.load("train", args.data_dir)
    test = fashion_mnist.load("t10k", args.data_dir) if rank == 0 else None
    if args.backend == "ddp":
        peers_common.init_gloo(rank, world_size, port, args.collective_timeout_s)
        shard = fashion_mnist.Shard(images, labels, rank, world_size, args.batch_size,
                                    args.shuffle_seed)
        total_steps = shard.steps_per_epoch * args.epochs
        torch.manual_seed(args.seed)
        model = peers_common.wrap_ddp(peers_common.he_uniform_(Mlp()), args)
        evaluated_model = model.module
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    else:
        import tamp
        import tamp.torch
        where = tamp.init()
        config = where.config
        shard = fashion_mnist.Shard(images, labels, where.rank, where.num_workers,
                                    config.batch_size, config.shuffle_seed)
        total_steps = tamp.count_steps(config, shard.steps_per_epoch)
        tamp.torch.init(config, steps_per_epoch=shard.steps_per_epoch)
        model = evaluated_model = Mlp()
        optimizer = tamp.torch.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum),
            named_parameters=model.named_parameters())
        tamp.torch.broadcast_parameters(model.state_dict(), root_rank=0)
    run_steps = min(total_steps, args.max_steps) if args.max_steps else total_steps

    timer = peers_common.StepTimer(args.skip_steps)
    curve, error, steps_to_target, step = [], None, None, 0
    wall_start = time.perf_counter()
    try:
        batches = None
        for step in range(run_steps):
            epoch, index = divmod(step, shard.steps_per_epoch)
            if index == 0:
                batches = shard.epoch(epoch)
            started = timer.begin(step)
            x, y = next(batches)
            # Under Tamp the servers run the config's optimizer and schedule; the rate set
            # here is the one an AGGREGATE-mode config's wrapped optimizer would use.
            for group in optimizer.param_groups:
                group["lr"] = peers_common.cosine_lr(args.lr, step, total_steps)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            evaluated = rank == 0 and (
                step + 1 == run_steps or (args.eval_every and (step + 1) % args.eval_every == 0))
            timer.end(step, started, evaluated)
            if evaluated:
                acc = fashion_mnist.accuracy(evaluated_model, *test)
                curve.append({"step": step + 1, "test_accuracy": acc, "loss": loss.item()})
                if steps_to_target is None and acc >= args.target:
                    steps_to_target = step + 1
        timer.stop()
        if args.backend == "ddp":
            torch.distributed.barrier()  # Neither rank tears gloo down under the other.
    except RuntimeError as e:  # A DDP hook aborting under gloo is a result, not a crash.
        error = f"rank {rank} step {step}: {e}".strip().splitlines()[0]
    wall = time.perf_counter() - wall_start
    if args.backend == "tamp":
        tamp.torch.shutdown()
    report = {"rank": rank, "error": error}
    if rank == 0:
        report.update({
            "backend": args.backend,
            "hook": args.hook,
            "config": os.path.basename(os.environ.get("TAMP_CONFIG", "")) or None,
            "world_size": world_size,
            "batch_size_per_worker": shard.batch_size,
            "steps_per_epoch": shard.steps_per_epoch,
            "total_steps": total_steps,
            "steps_run": step + 1 if error is None else step,
            **timer.figures(),
            "wall_s": wall,
            "steps_to_target": steps_to_target,
            "target": args.target,
            "final_accuracy": curve[-1]["test_accuracy"] if curve and error is None else None,
            "curve": curve,
            "powersgd_rank": args.powersgd_rank if args.hook == "powersgd" else None,
            "one_bucket": args.one_bucket if args.backend == "ddp" else None,
            "torch_version": torch.__version__,
            "torch_threads": torch.get_num_threads(),
        })
    if result_queue is None:
        return report
    if rank == 0 or error:
        result_queue.put(report)
    return None


def main(argv):
    args = parse_args(argv)
    if args.backend == "ddp":
        result = peers_common.run_ranks(train, WORLD_SIZE, args, {
            "backend": "ddp", "hook": args.hook, "torch_version": torch.__version__})
        return peers_common.write_result(args.output, result, SUMMARY)
    # Tamp: this process is one worker of the job `tamp run` started.
    import tamp
    where = tamp.init()
    result = train(where.rank, where.num_workers, args, None, None)
    if where.rank != 0:
        if result["error"]:
            sys.exit(result["error"])
        return 0
    result.pop("rank")
    return peers_common.write_result(args.output, result, SUMMARY)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
