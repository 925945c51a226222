"""One of two workers of a `model { kind: REGISTERED }` job (tests/python_modes_test.sh):
a model the C++ worker does not have (LayerNorm, a residual block) whose tensors the
workers register. Each rank initialises it from its own seed; broadcast_parameters() must
leave rank 0's weights as they were and give them to rank 1; weights rank 0 loads after
the job started (a checkpoint, Horovod's order) must reach every worker through another
broadcast before the first step. Writes the weights after the broadcasts to argv[1] and
after training to argv[2], for the replicas to be compared.
"""

import sys

import torch

import tamp
import tamp.torch


class Residual(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(784, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.block = torch.nn.Linear(32, 32)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        h = self.embed(x)
        return self.head(h + torch.relu(self.block(self.norm(h))))


def dump(model, path):
    with open(path, "wb") as out:
        for param in model.parameters():
            out.write(param.detach().numpy().tobytes())


def check_weights_loaded_after_the_start_are_broadcast(model):
    """Horovod's order: DistributedOptimizer() (the job started), a checkpoint loaded on rank
    0, broadcast_parameters(): every worker ends with the checkpoint's weights (here rank
    0's initial ones, halved; each worker builds them from rank 0's seed). A worker may see
    them earlier (its start came after rank 0's broadcast): only the end is checked."""
    torch.manual_seed(10)
    checkpoint = {name: value * 0.5 for name, value in Residual().state_dict().items()}
    if tamp.torch.rank() == 0:
        model.load_state_dict(checkpoint)
    tamp.torch.broadcast_parameters(model.state_dict(), root_rank=0)
    for name, value in model.state_dict().items():
        assert torch.equal(value, checkpoint[name]), f"{name}: not rank 0's loaded weights"


def main():
    tamp.torch.init(steps_per_epoch=10)
    torch.manual_seed(10 + tamp.torch.rank())
    model = Residual()
    own = [p.detach().clone() for p in model.parameters()]
    optimizer = tamp.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                                named_parameters=model.named_parameters())
    # The job started from rank 0's weights (rank 1's are now the same).
    if tamp.torch.rank() == 0:
        assert all(torch.equal(p, q) for p, q in zip(model.parameters(), own)), \
            "rank 0's initial weights changed"
    check_weights_loaded_after_the_start_are_broadcast(model)
    dump(model, sys.argv[1])
    for step in range(tamp.count_steps(tamp.placement().config, 10)):
        torch.manual_seed(1000 * step + tamp.torch.rank())
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(torch.randn(16, 784)),
                                          torch.randint(0, 10, (16,))).backward()
        optimizer.step()
    dump(model, sys.argv[2])
    print(f"rank {tamp.torch.rank()}: registered layout OK")


if __name__ == "__main__":
    main()
