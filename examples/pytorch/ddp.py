"""A DistributedDataParallel script switched to Tamp: the MLP of mlp.py on Fashion-MNIST.

It is DDP's usual loop, with its process group from torchrun's variables (which `tamp run`
sets as torchrun does). Two lines make it Tamp's: tamp.torch.init() and the communication
hook, which pushes each gradient bucket to the servers and gives DDP the workers' mean
(compressed as the config says). The config must say `server { mode: AGGREGATE }`.

    tamp run examples/pytorch/mlp_fashion_ddp.pbtxt -- /usr/bin/python3 examples/pytorch/ddp.py
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import fashion_mnist
import tamp.torch
from mlp import Mlp
from train import config_optimizer, set_threads


def main():
    set_threads(1)
    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
    rank, workers = dist.get_rank(), dist.get_world_size()
    config = tamp.init(os.environ.get("TAMP_CONFIG") or os.path.join(
        os.path.dirname(__file__), "mlp_fashion_ddp.pbtxt")).config
    data_dir = config.data_dir or fashion_mnist.DEFAULT_DIR
    images, labels = fashion_mnist.load("train", data_dir, config.train_limit)
    shard = fashion_mnist.Shard(images, labels, rank, workers, config.batch_size,
                                config.shuffle_seed)

    torch.manual_seed(config.shuffle_seed)
    net = Mlp()
    model = DistributedDataParallel(net)  # Broadcasts rank 0's weights, as without Tamp.
    # The switch to Tamp:
    tamp.torch.init(config, steps_per_epoch=shard.steps_per_epoch)
    model.register_comm_hook(tamp.torch.CommHookState(net.named_parameters()),
                             tamp.torch.comm_hook)

    optimizer = config_optimizer(model.parameters(), config)
    total = tamp.count_steps(config, shard.steps_per_epoch)
    step = 0
    for epoch in range(config.epochs):
        for x, y in shard.epoch(epoch):
            if step == total:
                break
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()  # Mean in .grad.
            optimizer.step()
            step += 1
    if rank == 0:
        test_images, test_labels = fashion_mnist.load("t10k", data_dir)
        accuracy = fashion_mnist.accuracy(net, test_images, test_labels)
        print(f"final test accuracy {accuracy:.4f} after {step} steps", flush=True)
        tamp.torch.report_eval(accuracy)
    tamp.torch.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
