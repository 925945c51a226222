"""tamp.torch's collectives for what a script exchanges besides its gradients: Horovod's
allreduce (a metric averaged over the workers), allgather, broadcast of a tensor and barrier.

They run on torch.distributed's default group, over gloo, which the first of them
initialises where the script has not (torch.distributed.init_process_group with tamp.rank()
and tamp.size(); its rendezvous from MASTER_ADDR and MASTER_PORT, which `tamp run` sets). The
gradients never travel this way: they go through the servers, compressed. Every worker calls
each collective, in the same order (as Horovod's); they block until every worker has.

Imports nothing of tamp.torch.
"""

import operator
import os
from typing import List, Optional, Tuple

import torch
import torch.distributed as dist

import tamp

AVERAGE, SUM = "Average", "Sum"  # tamp.torch.Average and .Sum.


def _group(caller: str) -> None:
    """torch.distributed's default group, initialised over gloo where the script has not."""
    if not dist.is_available():
        raise RuntimeError(f"{caller}: this torch has no torch.distributed")
    if dist.is_initialized():
        if dist.get_world_size() != tamp.size():
            raise RuntimeError(
                f"{caller}: the script's torch.distributed group has {dist.get_world_size()} "
                f"processes, the Tamp job {tamp.size()} workers: the collectives need one "
                "process per worker")
        return
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not os.environ.get(name)]
    if missing:
        raise RuntimeError(
            f"{caller}: needs torch.distributed's rendezvous, and {' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not set: `tamp run` sets them; under "
            "Slurm or Kubernetes set MASTER_ADDR (rank 0's host) and MASTER_PORT (a free port "
            "there), or call torch.distributed.init_process_group() first")
    dist.init_process_group("gloo", rank=tamp.rank(), world_size=tamp.size())


def _check_tensor(caller: str, tensor) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{caller}: expected a torch.Tensor, got {type(tensor).__name__}")


# What gloo reduces, gathers and broadcasts (bool and bfloat16 fail inside it, and leave the
# group out of step).
_GLOO_DTYPES = (torch.float16, torch.float32, torch.float64, torch.int8, torch.uint8,
                torch.int32, torch.int64)


def _agreed(caller: str, tensor: torch.Tensor, same_shape: bool) -> List[Tuple[int, ...]]:
    """Every worker's shape, once all have said theirs and their dtype: ValueError on every
    worker alike, naming each rank's, where a dtype is not gloo's, the dtypes differ, or the
    shapes do (beyond dimension 0 where not `same_shape`). Checked before the data moves: a
    mismatch inside gloo returns wrong values, or breaks the group."""
    said: List = [None] * tamp.size()
    dist.all_gather_object(said, (tuple(tensor.shape), str(tensor.dtype)))
    described = ", ".join(f"rank {r}: {list(shape)} {dtype}" for r, (shape, dtype) in
                          enumerate(said))
    unsupported = sorted({dtype for _, dtype in said} - {str(t) for t in _GLOO_DTYPES})
    if unsupported:
        raise ValueError(f"{caller}: {', '.join(unsupported)} tensors do not travel over gloo "
                         f"({described}): convert to one of "
                         f"{', '.join(str(t).replace('torch.', '') for t in _GLOO_DTYPES)}")
    key = (lambda shape: shape) if same_shape else (lambda shape: shape[1:])
    if len({(key(shape), dtype) for shape, dtype in said}) != 1:
        raise ValueError(f"{caller}: the workers' tensors differ "
                         f"{'in shape' if same_shape else 'beyond dimension 0'} or dtype "
                         f"({described}): every worker passes its own of the same kind")
    return [shape for shape, _ in said]


def _op(caller: str, average: Optional[bool], op: Optional[str]) -> str:
    """Horovod's choice of reduction: `op`, or the deprecated `average` (True: Average)."""
    if average is not None and op is not None:
        raise ValueError(f"{caller}: give op or average (Horovod's older name), not both")
    if op is None:
        op = AVERAGE if average is None or average else SUM
    if op not in (AVERAGE, SUM):
        raise ValueError(f"{caller}: op {op!r}: tamp.torch.Average or tamp.torch.Sum (Adasum "
                         "is not supported)")
    return op


def _in_place(tensor: torch.Tensor, collective) -> torch.Tensor:
    """`collective` run on `tensor`'s values, which it replaces: on a contiguous copy where the
    tensor is a view with gaps (gloo reads and writes the memory as if contiguous)."""
    with torch.no_grad():
        work = tensor if tensor.is_contiguous() else tensor.contiguous()
        collective(work)
        if work is not tensor:
            tensor.copy_(work)
    return tensor


def _allreduce(caller: str, tensor: torch.Tensor, in_place: bool, average: Optional[bool],
               op: Optional[str]) -> torch.Tensor:
    _check_tensor(caller, tensor)
    op = _op(caller, average, op)
    _group(caller)
    _agreed(caller, tensor, same_shape=True)
    if op == AVERAGE and not tensor.is_floating_point():  # The same dtype on every worker.
        raise ValueError(f"{caller}: the average of a {tensor.dtype} tensor is not one: convert "
                         "it to a floating type, or use op=tamp.torch.Sum")

    def reduce(work: torch.Tensor) -> None:
        dist.all_reduce(work, op=dist.ReduceOp.SUM)
        if op == AVERAGE:
            work.div_(tamp.size())

    return _in_place(tensor if in_place else tensor.detach().clone(), reduce)


def allreduce_(tensor: torch.Tensor, average: Optional[bool] = None,
               name: Optional[str] = None, op: Optional[str] = None) -> torch.Tensor:
    """Horovod's: `tensor`, in place, becomes the Average (the default) or Sum over the
    workers of theirs; returns it. `name` is Horovod's label, unused."""
    return _allreduce("allreduce_", tensor, True, average, op)


def allreduce(tensor: torch.Tensor, average: Optional[bool] = None,
              name: Optional[str] = None, op: Optional[str] = None) -> torch.Tensor:
    """Horovod's: a new tensor, the Average (the default) or Sum over the workers of
    `tensor`, which stays as it is. Example: the mean of a metric,
        accuracy = tamp.torch.allreduce(torch.tensor(correct / total)).item()"""
    return _allreduce("allreduce", tensor, False, average, op)


def allgather(tensor: torch.Tensor, name: Optional[str] = None) -> torch.Tensor:
    """Horovod's: every worker's `tensor` concatenated along dimension 0, in rank order; the
    first dimension may differ between workers, the others and the dtype may not
    (ValueError on every worker, naming the ranks')."""
    _check_tensor("allgather", tensor)
    _group("allgather")
    local = tensor.detach().reshape(1) if tensor.dim() == 0 else tensor.detach()
    shapes = _agreed("allgather", local, same_shape=False)
    longest = max(shape[0] for shape in shapes)
    padded = torch.zeros((longest,) + tuple(local.shape[1:]), dtype=local.dtype,
                         device=local.device)
    padded[:local.shape[0]] = local
    gathered = [torch.empty_like(padded) for _ in range(tamp.size())]
    dist.all_gather(gathered, padded)
    return torch.cat([part[:shape[0]] for part, shape in zip(gathered, shapes)])


def _broadcast(caller: str, tensor: torch.Tensor, root_rank, in_place: bool) -> torch.Tensor:
    _check_tensor(caller, tensor)
    try:  # Python's and numpy's integers; not bools, which are no rank.
        root = operator.index(root_rank) if not isinstance(root_rank, bool) else None
    except TypeError:
        root = None
    if root is None or not 0 <= root < tamp.size():
        raise ValueError(f"{caller}: root_rank {root_rank!r}: a worker's rank, an integer 0 to "
                         f"{tamp.size() - 1}")
    _group(caller)
    _agreed(caller, tensor, same_shape=True)
    return _in_place(tensor if in_place else tensor.detach().clone(),
                     lambda work: dist.broadcast(work, src=root))


def broadcast_(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None) -> torch.Tensor:
    """Horovod's: `tensor`, in place, becomes rank `root_rank`'s; returns it."""
    return _broadcast("broadcast_", tensor, root_rank, True)


def broadcast(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None) -> torch.Tensor:
    """Horovod's: a new tensor, rank `root_rank`'s `tensor`; the given one stays as it is."""
    return _broadcast("broadcast", tensor, root_rank, False)


def barrier() -> None:
    """Returns once every worker has called it."""
    _group("barrier")
    dist.barrier()
