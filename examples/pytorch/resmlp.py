"""A model the C++ worker does not have, trained through Tamp: a residual MLP with
LayerNorm (784 -> 256, two pre-norm residual blocks of 256 -> 512 -> 256, LayerNorm, 10).

Its config (resmlp_fashion.pbtxt) says `model { kind: REGISTERED }`: the job's tensors are
the ones the workers register, and rank 0's initial weights become everyone's
(broadcast_parameters).

    tamp run examples/pytorch/resmlp_fashion.pbtxt -- /usr/bin/python3 examples/pytorch/resmlp.py
"""

import os

import torch

import train


class Block(torch.nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, hidden)
        self.down = torch.nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class ResMlp(torch.nn.Module):
    def __init__(self, width=256, hidden=512, blocks=2):
        super().__init__()
        self.embed = torch.nn.Linear(784, width)
        self.blocks = torch.nn.Sequential(*(Block(width, hidden) for _ in range(blocks)))
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.norm(self.blocks(self.embed(x))))


if __name__ == "__main__":
    torch.manual_seed(1)  # Rank 0's initialisation is the job's.
    train.run(ResMlp(), os.path.join(os.path.dirname(__file__), "resmlp_fashion.pbtxt"))
