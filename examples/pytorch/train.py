"""The PyTorch examples' training loop: a model on Fashion-MNIST through tamp.torch.

Run by mlp.py, cnn.py and resmlp.py, each a worker of the job its config describes; the
placement (TAMP_CONFIG, TAMP_RANK, TAMP_SERVERS) comes from the environment, as
`tamp run CONFIG -- /usr/bin/python3 examples/pytorch/mlp.py` sets it.
"""

import argparse
import ctypes
import json
import os
import resource
import statistics
import time

import torch

import fashion_mnist
import tamp
import tamp.torch


def set_threads(threads: int) -> None:
    """`threads` for torch's own kernels and for OpenBLAS's GEMMs, as the C++ worker's
    --blas_threads: Debian's torch calls the system BLAS (OpenBLAS), whose thread pool
    torch.set_num_threads does not reach. Left at one per core, every worker's OpenBLAS
    threads spin after each GEMM on cores the servers and the other workers need."""
    torch.set_num_threads(threads)
    with open("/proc/self/maps") as maps:
        openblas = {line.split()[-1] for line in maps if "libopenblas" in line}
    for path in openblas:
        ctypes.CDLL(path).openblas_set_num_threads(threads)


def config_optimizer(parameters, config: tamp.Config) -> torch.optim.Optimizer:
    """The config's optimizer section as torch's optimizer (tamp.Config.optimizer names its
    settings as torch does)."""
    spec = config.optimizer
    if spec is None:
        raise SystemExit("the config has no optimizer section; these examples take theirs "
                         "from it (server.mode AGGREGATE may leave it out, they may not)")
    settings = {key: value for key, value in spec.items() if key != "name"}
    return (torch.optim.Adam if spec["name"] == "adam" else torch.optim.SGD)(parameters,
                                                                            **settings)


def run(model: torch.nn.Module, default_config: str) -> float:
    """Trains `model` for the config's epochs; returns (and rank 0 prints) test accuracy."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", help=f"default: TAMP_CONFIG, else {default_config}")
    parser.add_argument("--threads", type=int, default=1, help="torch's CPU threads")
    parser.add_argument("--timing", metavar="DIR",
                        help="write this worker's step times (ms, per phase) to "
                             "DIR/rank<R>.json, as bench/pytorch/ reads them")
    args = parser.parse_args()
    set_threads(args.threads)

    config = args.config or os.environ.get("TAMP_CONFIG") or default_config
    where = tamp.init(config)
    config = where.config
    data_dir = config.data_dir or fashion_mnist.DEFAULT_DIR
    images, labels = fashion_mnist.load("train", data_dir, config.train_limit)
    shard = fashion_mnist.Shard(images, labels, where.rank, where.num_workers,
                                config.batch_size, config.shuffle_seed)
    tamp.torch.init(config, steps_per_epoch=shard.steps_per_epoch)
    # The servers run the config's optimizer; in `server { mode: AGGREGATE }` this one steps
    # on the mean gradient.
    optimizer = tamp.torch.DistributedOptimizer(config_optimizer(model.parameters(), config),
                                                named_parameters=model.named_parameters())
    tamp.torch.broadcast_parameters(model.state_dict(), root_rank=0)
    test_images, test_labels = fashion_mnist.load("t10k", data_dir)

    total = tamp.count_steps(config, shard.steps_per_epoch)
    # 0, or the other workers' step when this process replaces a dead worker
    # (`tamp run --restart_workers`): it goes on with the batches of that step.
    step, accuracy, start = tamp.torch.current_step(), 0.0, time.monotonic()
    first_step = step
    # Per step: batch (the data), backward (zero_grad, forward, backward and its pushes),
    # step (waiting for the answers and applying them); the C++ trainer's step_ms spans the
    # same: batch to applied update.
    # Also per step: the process's CPU time (all threads) and the training thread's, its
    # minor page faults, and how
    # often the training thread gave up the CPU waiting (voluntary context switches) or
    # was preempted (involuntary ones).
    phases = {"step_ms": [], "batch_ms": [], "backward_ms": [], "wait_ms": [], "cpu_ms": [],
              "thread_cpu_ms": [], "page_faults": [], "waits": [], "preemptions": []}
    for epoch in range(step // shard.steps_per_epoch, config.epochs):
        batches = shard.epoch(epoch)
        for _ in range(step - epoch * shard.steps_per_epoch):  # Taken by the others.
            next(batches, None)
        while step < total:
            began, cpu_began = time.perf_counter(), time.process_time()
            thread_began = time.thread_time()
            process, thread = (resource.getrusage(resource.RUSAGE_SELF),
                               resource.getrusage(resource.RUSAGE_THREAD))
            batch = next(batches, None)
            if batch is None:
                break
            x, y = batch
            fetched = time.perf_counter()
            # Backward then writes each gradient fresh instead of adding it to a zeroed one:
            # a memset and an add over every gradient (~7 MB for the MLP) less per step.
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            computed = time.perf_counter()
            optimizer.step()
            ended = time.perf_counter()
            for name, ms in (("step_ms", ended - began), ("batch_ms", fetched - began),
                             ("backward_ms", computed - fetched), ("wait_ms", ended - computed),
                             ("cpu_ms", time.process_time() - cpu_began),
                             ("thread_cpu_ms", time.thread_time() - thread_began)):
                phases[name].append(1000 * ms)
            process_end, thread_end = (resource.getrusage(resource.RUSAGE_SELF),
                                       resource.getrusage(resource.RUSAGE_THREAD))
            phases["page_faults"].append(process_end.ru_minflt - process.ru_minflt)
            phases["waits"].append(thread_end.ru_nvcsw - thread.ru_nvcsw)
            phases["preemptions"].append(thread_end.ru_nivcsw - thread.ru_nivcsw)
            # One more, or the others' step after a rejoin.
            step = tamp.torch.current_step()
            # tamp run's progress line and summary (as tamp_worker's).
            tamp.torch.report_step(loss.item(), phases["step_ms"][-1],
                                   phases["thread_cpu_ms"][-1])
            if step % 100 == 0 and where.rank == 0:
                print(f"step {step}/{total} | epoch {epoch + 1}/{config.epochs} | "
                      f"loss {loss.item():.4f} | "
                      f"{1000 * (time.monotonic() - start) / (step - first_step):.1f} ms/step",
                      flush=True)
        if where.rank == 0:
            accuracy = fashion_mnist.accuracy(model, test_images, test_labels)
            print(f"epoch {epoch + 1}: test accuracy {accuracy:.4f}", flush=True)
            tamp.torch.report_eval(accuracy)
        if step == total:  # training.max_steps ended the run inside this epoch.
            break
    if where.rank == 0 and step == first_step:  # Resumed after the run's last step.
        accuracy = fashion_mnist.accuracy(model, test_images, test_labels)
    if where.rank == 0:
        print(f"final test accuracy {accuracy:.4f} after {step} steps", flush=True)
    tamp.torch.report_done(accuracy if where.rank == 0 else None,  # Only rank 0 evaluates.
                           statistics.median(phases["step_ms"]) if phases["step_ms"]
                           else 0.0)
    if args.timing:
        with open(os.path.join(args.timing, f"rank{where.rank}.json"), "w") as f:
            json.dump(dict(phases, rank=where.rank, threads=torch.get_num_threads(),
                           step_ms_median=statistics.median(phases["step_ms"])), f)
    tamp.torch.shutdown()
    return accuracy
