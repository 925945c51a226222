"""Fashion-MNIST for the PyTorch examples, served as the C++ worker serves it.

The same files (Debian's dataset-fashion-mnist), normalisation (worker/fashion_mnist.h:
(pixel / 255 - 0.2860) / 0.3530) and sharding (worker/batcher.h: worker r of W owns
examples [r*N/W, (r+1)*N/W), floor((N/W) / batch) steps per epoch). The per-epoch shuffle
is numpy's, seeded by (shuffle_seed, epoch, rank), not the C++ worker's Philox stream: the
same distribution of batches, not the same batches.
"""

import gzip
import math
import os
import struct

import numpy as np
import torch

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = np.float32(0.2860), np.float32(0.3530)


def read_idx(path: str, expected_dims: int) -> np.ndarray:
    """The array in IDX file `path` (gzip), as uint8 numpy shaped as its header says; raises
    ValueError naming the file when it cannot be read or is not an unsigned-byte IDX file of
    `expected_dims` dimensions whose data is exactly as long as they say."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e}") from e
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file (bad magic)")
    ndims = raw[3]
    if ndims != expected_dims or len(raw) < 4 + 4 * ndims:
        raise ValueError(f"{path}: expected {expected_dims} dimensions, header says {ndims}")
    dims = struct.unpack(f">{ndims}I", raw[4:4 + 4 * ndims])
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndims)
    if data.size != math.prod(dims):
        raise ValueError(
            f"{path}: header promises {math.prod(dims)} bytes of data, file has {data.size}")
    return data.reshape(dims)


def read_split(directory: str, split: str):
    """(images [N, 28, 28], labels [N]) of split "train" or "t10k", raw uint8; raises
    ValueError naming what is wrong (read_idx())."""
    images = read_idx(os.path.join(directory, f"{split}-images-idx3-ubyte.gz"), 3)
    labels = read_idx(os.path.join(directory, f"{split}-labels-idx1-ubyte.gz"), 1)
    if images.shape[1:] != (28, 28) or labels.shape[0] != images.shape[0]:
        raise ValueError(f"{directory}/{split}: expected N x 28 x 28 images and N labels, got "
                         f"{images.shape} and {labels.shape}")
    return images, labels


def load(split: str, directory: str = DEFAULT_DIR, limit: int = 0):
    """(images [N, 784] normalised fp32, labels [N] int64) of split "train" or "t10k", the
    first `limit` examples (0: all), as data.train_limit."""
    images, labels = read_split(directory, split)
    if limit:
        images, labels = images[:limit], labels[:limit]
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
