"""One of two workers of a `server { mode: AGGREGATE }` job (codec none both ways, the MLP
784-64-10; tests/python_modes_test.sh). Checks:

Run as `aggregate_worker.py client` or `aggregate_worker.py ddp OUT`, each on a fresh job:
1. client: tamp.Client's wait(out) writes the mean of the two workers' gradients into `out`, to fp32
   rounding (each rank's gradient is a known function of rank and step).
2. ddp: the DDP comm hook: with model.register_comm_hook(CommHookState(...), comm_hook), the
   gradients DDP leaves after backward are the mean over the workers of their local
   gradients (computed by an undistributed copy and averaged through gloo).
   Writes the DDP model's parameters to OUT for the replicas to be compared.
"""

import os
import sys

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
    client = tamp.Client(list(zip(NAMES, SHAPES)), steps_per_epoch=100, total_steps=100,
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


def check_ddp_comm_hook(rendezvous, out_path):
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}",
                            rank=tamp.rank(), world_size=tamp.size())
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
    reference = Mlp()
    for step in range(3):
        torch.manual_seed(100 * step + tamp.rank())
        x, y = torch.randn(16, 784), torch.randint(0, 10, (16,))
        reference.load_state_dict(net.state_dict())
        reference.zero_grad()
        torch.nn.functional.cross_entropy(reference(x), y).backward()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        for (name, param), ref in zip(net.named_parameters(), reference.parameters()):
            mean = ref.grad.clone()
            dist.all_reduce(mean)
            torch.testing.assert_close(param.grad, mean / 2, rtol=1e-5, atol=1e-6, msg=name)
        optimizer.step()
    print(f"rank {tamp.rank()}: buckets per step {buckets}")
    assert max(buckets) >= 1, f"one bucket per step only: {buckets}"
    with open(out_path, "wb") as out:
        for param in net.parameters():
            out.write(param.detach().numpy().tobytes())


def main():
    if not tamp.AGGREGATE_MODE:
        print("SKIP: this Tamp's client has no aggregate mode (Client::aggregates())")
        return
    where = tamp.init()
    if sys.argv[1] == "client":
        check_client_mean(where)
    else:
        tamp.torch.init(steps_per_epoch=100, total_steps=100)
        check_ddp_comm_hook(os.environ["TAMP_TEST_RENDEZVOUS"], sys.argv[2])
    print(f"rank {where.rank}: aggregate mode ({sys.argv[1]}) OK")


if __name__ == "__main__":
    main()
