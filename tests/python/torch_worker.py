"""One worker of a 2-worker job training the MLP 784-64-10 with tamp.torch (the config's
model, tests/python_test.sh); writes its final parameters to argv[1] for the replicas to be
compared byte for byte. Each rank trains on its own random batches.

    torch_worker.py WEIGHTS [nan_at=K]   rank 1's batch of step K is NaN: the servers refuse
                                          its push, step() raises, the script catches it and
                                          goes on (the next push rejoins the run).

With MASTER_ADDR and MASTER_PORT set, it then checks Horovod's collectives (allreduce,
allgather, broadcast, barrier) across the two workers."""

import os
import sys

import numpy
import torch

import tamp.torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def check_collectives():
    """Horovod's collectives across the two workers (MASTER_ADDR/PORT: tests/python_test.sh)."""
    rank = tamp.torch.rank()
    mean = tamp.torch.allreduce(torch.tensor([rank + 1.0, 10.0 * rank]))
    assert mean.tolist() == [1.5, 5.0], mean
    total = tamp.torch.allreduce(torch.tensor([rank + 1]), op=tamp.torch.Sum)
    assert total.tolist() == [3], total
    gathered = tamp.torch.allgather(torch.full((rank + 1, 2), float(rank)))  # 1 row, then 2.
    assert gathered.tolist() == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]], gathered
    root = tamp.torch.broadcast(torch.tensor([7.0 * rank]), root_rank=1)
    assert root.tolist() == [7.0], root
    try:
        tamp.torch.allgather(torch.zeros(1, rank + 1))  # Trailing shapes differ: both refuse.
        raise AssertionError("allgather took tensors of different trailing shapes")
    except ValueError as refused:
        assert "rank 0: [1, 1] torch.float32, rank 1: [1, 2] torch.float32" in str(refused), refused
    for call in (lambda: tamp.torch.allreduce(torch.zeros(2 + rank)),  # Shapes differ.
                 lambda: tamp.torch.broadcast(torch.zeros(2 + rank), root_rank=0),
                 lambda: tamp.torch.allreduce(torch.zeros(2, dtype=torch.bool), op="Sum")):
        try:
            call()
            raise AssertionError("a collective took tensors it cannot move")
        except ValueError as refused:  # On both workers, and the group goes on.
            assert "rank 0: [2]" in str(refused) and "rank 1: [" in str(refused), refused
    # A view with gaps, in place: its values only, the memory between left alone.
    m = torch.arange(6.0).reshape(2, 3) + 10 * rank
    tamp.torch.allreduce_(m[:, 1], op=tamp.torch.Sum)
    assert m.tolist() == [[10.0 * rank, 12.0, 2 + 10.0 * rank],
                          [3 + 10.0 * rank, 18.0, 5 + 10.0 * rank]], m
    tamp.torch.broadcast_(m[:, 2], root_rank=numpy.int64(1))  # numpy's integers are ranks.
    assert m[:, 2].tolist() == [12.0, 15.0], m
    tamp.torch.barrier()
    print(f"rank {rank}: collectives ok")


def main():
    steps_per_epoch = 10
    tamp.torch.init(steps_per_epoch=steps_per_epoch)
    torch.manual_seed(100 + tamp.torch.rank())  # Different data and torch init per rank.
    model = Mlp()
    optimizer = tamp.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                                named_parameters=model.named_parameters())
    tamp.torch.broadcast_parameters(model.state_dict(), root_rank=0)
    nan_at = int(sys.argv[2].split("=")[1]) if len(sys.argv) > 2 else None
    initial = [p.detach().clone() for p in model.parameters()]
    losses = []
    while tamp.torch.current_step() < tamp.torch.total_steps():
        x = torch.randn(32, 784)
        y = torch.randint(0, 10, (32,))
        if tamp.torch.rank() == 1 and tamp.torch.current_step() == nan_at:
            x[0, 0] = float("nan")
            nan_at = None  # Once.
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        try:
            optimizer.step()
        except ValueError as refused:  # The NaN batch's push, refused by the servers.
            assert "NaN" in str(refused) and len(sys.argv) > 2, refused
            print(f"rank {tamp.torch.rank()} caught: {refused}")
            continue
        losses.append(loss.item())
    moved = sum((p.detach() - q).abs().sum().item() for p, q in zip(model.parameters(), initial))
    assert moved > 0, "training did not move the weights"
    if os.environ.get("MASTER_PORT"):  # The run given a rendezvous (tests/python_test.sh).
        check_collectives()
    with open(sys.argv[1], "wb") as out:
        for param in model.parameters():
            out.write(param.detach().numpy().tobytes())
    print(f"rank {tamp.torch.rank()}: {len(losses)} steps, loss {losses[0]:.3f} -> "
          f"{losses[-1]:.3f}, weights moved {moved:.3f}")


if __name__ == "__main__":
    main()
