"""The MLP of examples/mlp_fashion.pbtxt (784-1024-1024-10) in PyTorch, trained through Tamp.

The config's `model { kind: MLP hidden: [1024, 1024] }` names its tensors as PyTorch does
(fc1.weight [1024, 784], fc1.bias, ...): the servers initialise them (init_seed) and run the
config's optimizer and schedule, as for the C++ worker.

    tamp run examples/mlp_fashion.pbtxt -- /usr/bin/python3 examples/pytorch/mlp.py
"""

import os

import torch

import train


class Mlp(torch.nn.Module):
    def __init__(self, hidden=(1024, 1024)):
        super().__init__()
        widths = (784,) + tuple(hidden) + (10,)
        for layer in range(len(widths) - 1):
            setattr(self, f"fc{layer + 1}", torch.nn.Linear(widths[layer], widths[layer + 1]))
        self.layers = len(widths) - 1

    def forward(self, x):
        for layer in range(1, self.layers + 1):
            x = getattr(self, f"fc{layer}")(x)
            x = torch.relu(x) if layer < self.layers else x
        return x


if __name__ == "__main__":
    train.run(Mlp(), os.path.join(os.path.dirname(__file__), "..", "mlp_fashion.pbtxt"))
