"""tamp.torch.comm_hook's DDP plumbing (bucket order, futures, the mean written back), in
two processes, before the servers' AGGREGATE mode exists: tamp.Client is replaced by a
stand-in with AGGREGATE's answer (wait(out) writes the workers' mean gradient), averaged
through gloo instead of servers. aggregate_worker.py's DDP check then runs unchanged; with
AGGREGATE mode, python_modes_test runs it against real servers. So does the check of
DistributedOptimizer in that mode. argv[1]: where to write the replicas, less the suffix
.ddp or .optimizer."""

import sys

import torch
import torch.distributed as dist
import torch.utils.dlpack

import tamp
import tamp.torch
from aggregate_worker import check_ddp_comm_hook, check_distributed_optimizer, init_gloo


def _tensor(array) -> torch.Tensor:
    """A tensor tamp.torch passed as it is, or as a DLPack capsule (its CPU tensors)."""
    return array if isinstance(array, torch.Tensor) else torch.utils.dlpack.from_dlpack(array)


class MeanThroughGloo:
    """tamp.Client's interface as tamp.torch uses it, answering as AGGREGATE mode does."""

    aggregates = True

    def __init__(self, tensors, steps_per_epoch, total_steps=None, where=None):
        self.names = [name for name, _ in tensors]
        self.total_steps = total_steps
        self.pushed = {}

    def start(self, params, stream=None):
        return 0

    def broadcast(self, params, stream=None):  # Rank 0's values into every worker's.
        for param in params:
            dist.broadcast(_tensor(param), src=0)

    def begin_step(self, step, params, stream=None):
        self.pushed = {}

    def push(self, index, gradient, stream=None):
        if index in self.pushed:
            raise RuntimeError(f'tensor "{self.names[index]}" was already pushed')
        self.pushed[index] = _tensor(gradient).clone()

    def wait(self, out, stream=None):
        for index, target in enumerate(out):
            mean = self.pushed[index]  # KeyError: a tensor was never pushed.
            dist.all_reduce(mean)
            _tensor(target).copy_(mean / dist.get_world_size())

    def close(self):
        self.pushed = {}


if __name__ == "__main__":
    tamp.Client = MeanThroughGloo
    tamp.init()
    tamp.torch.init(steps_per_epoch=100, total_steps=100, report=False)  # A stand-in client.
    init_gloo()
    check_ddp_comm_hook(sys.argv[1] + ".ddp")
    tamp.torch.shutdown()
    check_distributed_optimizer(sys.argv[1] + ".optimizer")
    tamp.torch.shutdown()
    dist.destroy_process_group()  # Before exit, as aggregate_worker.py's main() does.
    print(f"rank {tamp.rank()}: comm_hook and DistributedOptimizer OK")
