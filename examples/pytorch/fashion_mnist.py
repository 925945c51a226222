"""Fashion-MNIST for the PyTorch examples, served as the C++ worker serves it.

The same files (Debian's dataset-fashion-mnist), normalisation (worker/fashion_mnist.h:
(pixel / 255 - 0.2860) / 0.3530) and sharding (worker/batcher.h: worker r of W owns
examples [r*N/W, (r+1)*N/W), floor((N/W) / batch) steps per epoch). The per-epoch shuffle
is numpy's, seeded by (shuffle_seed, epoch, rank), not the C++ worker's Philox stream: the
same distribution of batches, not the same batches.
"""

import gzip
import os

import numpy as np
import torch

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = np.float32(0.2860), np.float32(0.3530)


def _read_idx(path: str, header_bytes: int) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=header_bytes)


def load(split: str, directory: str = DEFAULT_DIR, limit: int = 0):
    """(images [N, 784] normalised fp32, labels [N] int64) of split "train" or "t10k", the
    first `limit` examples (0: all), as data.train_limit."""
    images = _read_idx(os.path.join(directory, f"{split}-images-idx3-ubyte.gz"), 16)
    labels = _read_idx(os.path.join(directory, f"{split}-labels-idx1-ubyte.gz"), 8)
    if limit:
        images, labels = images[:limit * 784], labels[:limit]
    images = (images.reshape(-1, 784).astype(np.float32) / np.float32(255) - MEAN) / STD
    return torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64))


class Shard:
    """Worker `rank` of `workers`'s shuffled batches of (images, labels)."""

    def __init__(self, images, labels, rank: int, workers: int, batch_size: int, seed: int):
        size = len(images)
        first, shard = size * rank // workers, size // workers
        self.images, self.labels = images[first:first + shard], labels[first:first + shard]
        self.batch_size, self.seed, self.rank = batch_size, seed, rank
        self.steps_per_epoch = shard // batch_size

    def epoch(self, epoch: int):
        order = torch.from_numpy(
            np.random.default_rng([self.seed, epoch, self.rank]).permutation(len(self.images)))
        for step in range(self.steps_per_epoch):
            batch = order[step * self.batch_size:(step + 1) * self.batch_size]
            yield self.images[batch], self.labels[batch]


@torch.no_grad()
def accuracy(model, images, labels, batch_size: int = 1000) -> float:
    correct = 0
    for first in range(0, len(images), batch_size):
        logits = model(images[first:first + batch_size])
        correct += (logits.argmax(1) == labels[first:first + batch_size]).sum().item()
    return correct / len(images)
