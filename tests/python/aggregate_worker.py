"""One of two workers of a `server { mode: AGGREGATE }` job (codec none both ways, the MLP
784-64-10; tests/python_modes_test.sh). Checks:

Run as `aggregate_worker.py client`, `aggregate_worker.py ddp OUT`,
`aggregate_worker.py optimizer OUT` or `aggregate_worker.py mismatch OUT`, each on a fresh
job:
1. client: tamp.Client's wait(out) writes the mean of the two workers' gradients into `out`, to fp32
   rounding (each rank's gradient is a known function of rank and step).
2. ddp: the DDP comm hook: with model.register_comm_hook(CommHookState(...), comm_hook), the
   gradients DDP leaves after backward are the mean over the workers of their local
   gradients (computed by an undistributed copy and averaged through gloo).
3. optimizer: DistributedOptimizer's step() runs the wrapped SGD on the workers' mean (once
   clipped between synchronize() and step() under skip_synchronize()).
4. mismatch: rank 0's broadcast_object() against rank 1's broadcast_parameters() is refused
   on rank 1, naming both, its parameters untouched.
ddp and optimizer write the model's parameters to OUT for the replicas to be compared.
"""

import os
import sys
import warnings

import numpy as np
import torch
import torch.distributed as dist

import tamp
import tamp.torch

NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
SHAPES = [(64, 784), (64,), (10, 64), (10,)]


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def gradient(rank, step, shape):
    return np.random.default_rng([rank, step]).standard_normal(shape).astype(np.float32)


def check_client_mean(where):
    client = tamp.Client(list(zip(NAMES, SHAPES)), steps_per_epoch=100,
                         where=where)
    assert client.aggregates, "the config's servers should aggregate"
    params = [np.zeros(shape, np.float32) for shape in SHAPES]
    step = client.start(params)
    for _ in range(3):
        client.begin_step(step, params)
        for name, shape in zip(NAMES, SHAPES):
            client.push(name, gradient(where.rank, step, shape))
        out = [np.full(shape, np.nan, np.float32) for shape in SHAPES]
        client.wait(out)
        for name, shape, mean in zip(NAMES, SHAPES, out):
            expected = (gradient(0, step, shape) + gradient(1, step, shape)) / np.float32(2)
            np.testing.assert_allclose(mean, expected, rtol=1e-6, atol=1e-7, err_msg=name)
        step += 1


def init_gloo():
    """The gloo group that computes the reference means (TAMP_TEST_RENDEZVOUS: a file)."""
    dist.init_process_group("gloo", init_method=f"file://{os.environ['TAMP_TEST_RENDEZVOUS']}",
                            rank=tamp.rank(), world_size=tamp.size())


def local_batch(step):
    torch.manual_seed(100 * step + tamp.rank())
    return torch.randn(16, 784), torch.randint(0, 10, (16,))


def mean_of_local_gradients(model, x, y):
    """The workers' mean gradient at `model`'s weights, through gloo."""
    reference = Mlp()
    reference.load_state_dict(model.state_dict())
    torch.nn.functional.cross_entropy(reference(x), y).backward()
    means = []
    for param in reference.parameters():
        dist.all_reduce(param.grad)
        means.append(param.grad / tamp.size())
    return means


def dump(model, out_path):
    with open(out_path, "wb") as out:
        for param in model.parameters():
            out.write(param.detach().numpy().tobytes())


def check_ddp_comm_hook(out_path):
    torch.manual_seed(5)
    net = Mlp()
    # Small buckets, the first one included (DDP reads that size from this variable; and
    # torch 1.13 splits the first step's buckets only with find_unused_parameters): several
    # buckets per step, whose futures the hook completes only once the last one is in.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 16384
    model = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.05,
                                                      find_unused_parameters=True)
    buckets = []

    def counting_hook(state, bucket) -> torch.futures.Future[torch.Tensor]:
        buckets.append(bucket.index())
        return tamp.torch.comm_hook(state, bucket)

    model.register_comm_hook(tamp.torch.CommHookState(named_parameters=net.named_parameters()),
                             counting_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = local_batch(step)
        means = mean_of_local_gradients(net, x, y)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        for (name, param), mean in zip(net.named_parameters(), means):
            torch.testing.assert_close(param.grad, mean, rtol=1e-5, atol=1e-6, msg=name)
        optimizer.step()
    print(f"rank {tamp.rank()}: buckets per step {buckets}")
    assert max(buckets) >= 1, f"one bucket per step only: {buckets}"
    dump(net, out_path)


MAX_NORM = 0.05


def check_optimizer_state_broadcast(model, optimizer):
    """Horovod's broadcast_optimizer_state and broadcast_object before the first step: a
    fresh optimizer's state goes without a word; rank 0's momentum buffers and rate (a
    checkpoint loaded on rank 0 alone) reach the other worker bit for bit (the buffers are
    as large as the model: two rounds), so does an object of three rounds, and every
    worker's parameters stay rank 0's. Returns the optimizer that holds the state."""
    before = [param.detach().clone() for param in model.parameters()]
    # An entry that is not the job's (a buffer's) gets rank 0's values from
    # broadcast_parameters(state_dict).
    seen = torch.full((3,), float(tamp.rank()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tamp.torch.broadcast_parameters(dict(model.state_dict(), seen=seen), root_rank=0)
        tamp.torch.broadcast_optimizer_state(optimizer, root_rank=0)
        assert not caught, [str(w.message) for w in caught]
    assert torch.equal(seen, torch.zeros(3)), f"the buffer is {seen}, not rank 0's"
    loaded = torch.optim.SGD(model.parameters(), lr=0.0, momentum=0.9)
    buffers = [torch.from_numpy(gradient(7, index, tuple(param.shape)))
               for index, param in enumerate(model.parameters())]
    if tamp.rank() == 0:  # As if from a checkpoint, on rank 0 only.
        loaded.param_groups[0]["lr"] = 0.25
        for param, buffer in zip(model.parameters(), buffers):
            loaded.state[param]["momentum_buffer"] = buffer.clone()
    tamp.torch.broadcast_optimizer_state(loaded, root_rank=0)
    assert loaded.param_groups[0]["lr"] == 0.25, loaded.param_groups[0]["lr"]
    for (name, param), buffer in zip(model.named_parameters(), buffers):
        assert torch.equal(loaded.state[param]["momentum_buffer"], buffer), name
    big = {"epoch": 3, "blob": bytes(range(256)) * 2000}  # 512,000 bytes; the model 203,560.
    # Three rounds; past _MANY_ROUNDS (lowered to 2 here, 100 really) rank 0 says why it
    # takes long, once.
    saved, tamp._torch_broadcast._MANY_ROUNDS = tamp._torch_broadcast._MANY_ROUNDS, 2
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = tamp.torch.broadcast_object(big if tamp.rank() == 0 else None)
    finally:
        tamp._torch_broadcast._MANY_ROUNDS = saved
    said = [str(w.message) for w in caught]
    assert said == ([] if tamp.rank() else [said[0]]), said
    if tamp.rank() == 0:
        assert "travel in 3 rounds of 203560 bytes" in said[0], said
        assert caught[0].filename == __file__, caught[0].filename
    assert got == big, "broadcast_object: rank 0's object did not arrive whole"
    for (name, param), old in zip(model.named_parameters(), before):
        assert torch.equal(param.detach(), old), f"{name} changed in the broadcasts"
    return loaded


def check_no_state_after_the_first_step(loaded):
    """After the first step the servers' weights cannot carry objects: broadcast_object
    refuses, broadcast_optimizer_state warns that a state with tensors must be equal."""
    try:
        tamp.torch.broadcast_object(1)
        raise AssertionError("broadcast_object after the first step went through")
    except RuntimeError as refused:
        assert "only before the job's first step" in str(refused), refused
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tamp.torch.broadcast_optimizer_state(loaded)
        assert len(caught) == 1 and "every worker must hold the same" in str(
            caught[0].message), [str(w.message) for w in caught]


def check_distributed_optimizer(out_path):
    """DistributedOptimizer in AGGREGATE mode: step() steps the wrapped SGD on the mean; at
    the third step, on the mean clipped between synchronize() and step(). The LR scheduler
    was created before DistributedOptimizer() (on the optimizer it wraps), and a checkpoint's
    state was loaded into the wrapped one (new param_groups lists): the scheduler still halves
    the wrapped one's rate after two steps, and sees every step (no warning). At the fourth
    step, with weight decay, a parameter frozen since registration gets no gradient and
    stays as it was, as torch's SGD leaves it, also where zero_grad() left it a zeroed one.
    After shutdown() the optimizer refuses to step."""
    torch.manual_seed(5)
    model = Mlp()
    sgd = torch.optim.SGD(model.parameters(), lr=0.125)
    schedule = torch.optim.lr_scheduler.StepLR(sgd, step_size=2, gamma=0.5)
    optimizer = tamp.torch.DistributedOptimizer(sgd, named_parameters=model.named_parameters())
    assert optimizer is sgd, "DistributedOptimizer() wraps the optimizer in place"
    optimizer.load_state_dict(sgd.state_dict())  # As resuming from a checkpoint.
    loaded = check_optimizer_state_broadcast(model, optimizer)
    for step in range(4):
        rate = 0.125 if step < 2 else 0.0625
        assert optimizer.param_groups[0]["lr"] == rate, (step, optimizer.param_groups[0]["lr"])
        x, y = local_batch(step)
        means = mean_of_local_gradients(model, x, y)
        before = [p.detach().clone() for p in model.parameters()]
        decay = 0.0
        if step == 3:
            model.fc2.bias.requires_grad_(False)
            decay = optimizer.param_groups[0]["weight_decay"] = 0.01
        # At the frozen step torch 1.13's default: the frozen parameter keeps a zeroed .grad.
        optimizer.zero_grad(set_to_none=step != 3)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        scale = 1.0
        if step == 2:
            # Horovod's clipping idiom: synchronize() leaves the mean in .grad, the script
            # clips it, and step() under skip_synchronize() steps on the clipped mean.
            optimizer.synchronize()
            for (name, param), mean in zip(model.named_parameters(), means):
                torch.testing.assert_close(param.grad, mean, rtol=1e-5, atol=1e-6, msg=name)
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM).item()
            assert norm > 2 * MAX_NORM, f"the mean's norm {norm} is not clipped"
            scale = MAX_NORM / (norm + 1e-6)
            with optimizer.skip_synchronize():
                optimizer.step()
        else:
            optimizer.step()
        for (name, param), old, mean in zip(model.named_parameters(), before, means):
            if not param.requires_grad:
                assert torch.equal(param.detach(), old), f"{name} moved, frozen"
                assert param.grad is None, f"{name} has a .grad, frozen"
                continue
            torch.testing.assert_close(param.detach(), old - rate * (scale * mean + decay * old),
                                       rtol=1e-5, atol=1e-6, msg=name)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            schedule.step()
        assert not caught, [str(w.message) for w in caught]
    check_no_state_after_the_first_step(loaded)
    dump(model, out_path)
    # After shutdown() backward pushes nothing, and step() says why it does not step.
    tamp.torch.shutdown()
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    try:
        optimizer.step()
        raise AssertionError("step() after shutdown() went through")
    except RuntimeError as refused:
        assert "shutdown() closed the job" in str(refused), refused


def check_mismatched_broadcasts(out_path):
    """Rank 0 broadcasts an object where rank 1 broadcasts its parameters: rank 1 is told,
    naming both calls, and its parameters are as they were. (Rank 0's one-round object went;
    with more rounds it would be told, after cluster.rpc_timeout_ms, that worker 1 did not
    follow.) Nothing is written to out_path: the job cannot train on."""
    torch.manual_seed(5)
    model = Mlp()
    tamp.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                    named_parameters=model.named_parameters())
    if tamp.rank() == 0:
        assert tamp.torch.broadcast_object({"epoch": 3}) == {"epoch": 3}
        return
    with torch.no_grad():
        for param in model.parameters():
            param.add_(1.0)  # Not rank 0's: a broadcast would show.
    before = [param.detach().clone() for param in model.parameters()]
    try:
        tamp.torch.broadcast_parameters(model.state_dict())
        raise AssertionError("broadcast_parameters took rank 0's object as weights")
    except RuntimeError as refused:
        assert ("rank 0 called broadcast_object() where this worker called "
                "broadcast_parameters()") in str(refused), refused
    for (name, param), old in zip(model.named_parameters(), before):
        assert torch.equal(param.detach(), old), f"{name} changed in a refused broadcast"


CHECKS = {"ddp": check_ddp_comm_hook, "optimizer": check_distributed_optimizer,
          "mismatch": check_mismatched_broadcasts}


def main():
    where = tamp.init()
    if sys.argv[1] == "client":
        check_client_mean(where)
    else:
        tamp.torch.init(steps_per_epoch=100)
        init_gloo()
        CHECKS[sys.argv[1]](sys.argv[2])
        tamp.torch.shutdown()
        # gloo's threads, left to the interpreter's exit, may be torn down while running
        # ("terminate called without an active exception"): end the group first.
        dist.destroy_process_group()
    print(f"rank {where.rank}: aggregate mode ({sys.argv[1]}) OK")


if __name__ == "__main__":
    main()
