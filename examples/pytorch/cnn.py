"""The CNN of examples/cnn_fashion.pbtxt in PyTorch, trained through Tamp.

`model { kind: CNN conv_channels: [32, 64] kernel_size: 5 fc_hidden: [128] }` is, in
job/model_layout.h's terms: conv1 (1 -> 32, 5x5, 'same' padding), ReLU, 2x2 max-pool;
conv2 (32 -> 64), ReLU, pool; flattened as (channel, y, x); fc1 (64*7*7 -> 128), ReLU;
fc2 (128 -> 10). The tensors carry PyTorch's names and layouts, so the servers initialise
them and run the config's optimizer.

    tamp run examples/cnn_fashion.pbtxt -- /usr/bin/python3 examples/pytorch/cnn.py
"""

import os

import torch

import train


class Cnn(torch.nn.Module):
    def __init__(self, channels=(32, 64), kernel=5, fc_hidden=(128,)):
        super().__init__()
        side, previous = 28, 1
        for layer, out in enumerate(channels, start=1):
            setattr(self, f"conv{layer}",
                    torch.nn.Conv2d(previous, out, kernel, padding=kernel // 2))
            previous, side = out, side // 2
        widths = (previous * side * side,) + tuple(fc_hidden) + (10,)
        for layer in range(len(widths) - 1):
            setattr(self, f"fc{layer + 1}", torch.nn.Linear(widths[layer], widths[layer + 1]))
        self.convs, self.fcs = len(channels), len(widths) - 1

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        for layer in range(1, self.convs + 1):
            x = torch.nn.functional.max_pool2d(torch.relu(getattr(self, f"conv{layer}")(x)), 2)
        x = x.flatten(1)
        for layer in range(1, self.fcs + 1):
            x = getattr(self, f"fc{layer}")(x)
            x = torch.relu(x) if layer < self.fcs else x
        return x


if __name__ == "__main__":
    train.run(Cnn(), os.path.join(os.path.dirname(__file__), "..", "cnn_fashion.pbtxt"))
