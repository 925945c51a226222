"""Tamp's worker for Python: push gradients, pull updates, from any array library.

`tamp.init()` reads where this worker sits in the job (config, rank, servers); `tamp.Client`
is one worker's client of the job's parameter servers (worker/client.h), taking numpy
arrays, torch CPU tensors, or any host fp32 array exposing the buffer protocol or
`__dlpack__`, without copying them. `tamp.torch` builds PyTorch's conventions on it.

Blocking and threading: Client() connects (blocks), start(), wait() and rejoin() block until
the servers answer, push() blocks only while it compresses; all release the GIL while they
block. One client serves one training thread: call it from one thread at a time. The arrays
passed to a call must not be touched by anyone else until it returns; the client keeps no
reference to them afterwards.

Errors: the C++ client's message, as ValueError (bad arguments: a tensor's dtype, layout,
size or name), RuntimeError (a call out of order: a tensor pushed twice, wait() before every
tensor was pushed), ConnectionError (a server gone or unreachable) or DroppedError (a
RuntimeError: a SYNC barrier dropped this worker; call rejoin()). A refused call changes no
state: the step goes on. After a ConnectionError the client is only good for closing.

Example (numpy, the MLP of `model { kind: MLP hidden: [64] }`):

    import numpy as np, tamp
    tamp.init()    # TAMP_CONFIG, TAMP_RANK, TAMP_SERVERS, as `tamp run CONFIG -- CMD` sets
    params = [np.zeros((64, 784), np.float32), np.zeros(64, np.float32),
              np.zeros((10, 64), np.float32), np.zeros(10, np.float32)]
    names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    client = tamp.Client([(n, p.shape) for n, p in zip(names, params)],
                         steps_per_epoch=100)
    step = client.start(params)           # The servers' initial weights, into params.
    while step < client.total_steps:
        client.begin_step(step, params)
        for name, grad in backward(params):   # Last layer first, as produced.
            client.push(name, grad)
        client.wait(params)                   # Adds the servers' update to params.
        step += 1
"""

import numbers
import operator
import os
import sys
import warnings
from collections import abc
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from tamp import _tamp
from tamp._tamp import Config, DroppedError
from tamp._tamp import Client as _NativeClient

__all__ = [
    "Client", "Config", "DroppedError", "Placement", "count_steps", "init", "load_config",
    "local_rank", "placement", "rank", "size",
]


class Placement(NamedTuple):
    """Where this worker sits: the job's config, its rank, the servers' addresses."""
    config: Config
    rank: int
    servers: List[str]
    num_workers: int
    local_rank: int = 0   # Among the workers on this host, e.g. to pick a GPU.
    source: str = ""      # Which launcher's variables said so: "tamp", "torchrun", "slurm"...


_placement: Optional[Placement] = None


def _warn_at_caller(message: str) -> None:
    """warnings.warn(message) at the first frame outside this package: the user's line."""
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 2  # stacklevel 2: whoever called this function.
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, stacklevel=level)


def load_config(config: Union[Config, str, "os.PathLike[str]"]) -> Config:
    """A Config from a Config, a file's path (a str or os.PathLike; an existing file even
    where its path holds a '{'), or the text of one (a str with a '{')."""
    if isinstance(config, Config):
        return config
    if isinstance(config, os.PathLike):
        config = os.fspath(config)
    if not isinstance(config, str):
        raise TypeError(f"config must be a tamp.Config, a path or a config's text, got a "
                        f"{type(config).__name__}")
    if "{" in config and not os.path.isfile(config):
        return Config.from_text(config)
    return Config.from_file(config)


def init(config: Union[Config, str, None] = None, rank: Optional[int] = None,
         servers: Union[Sequence[str], str, None] = None,
         num_workers: Optional[int] = None) -> Placement:
    """Reads this worker's placement; keyword arguments stand in for the environment.

    The C++ workers' rules (job/placement.h WorkerPlacementFromEnv, README "Using it"):
    config: TAMP_CONFIG (a path); the rest from `tamp run`'s TAMP_RANK, TAMP_NUM_WORKERS,
    TAMP_LOCAL_RANK and TAMP_SERVERS, else torchrun's RANK, WORLD_SIZE and LOCAL_RANK (servers
    from TAMP_SERVERS or the config's cluster.server_addresses), else Slurm's or Kubernetes'.
    rank=, servers= ("host:port,..." or a list, shard order) and num_workers= stand for
    TAMP_RANK, TAMP_SERVERS and TAMP_NUM_WORKERS. Raises ValueError naming the variable that
    is missing or wrong; a refusal leaves the previous placement in force.
    """
    global _placement
    overrides: Dict[str, str] = {}
    if rank is not None:
        overrides["TAMP_RANK"] = str(rank)
    if servers is not None:
        overrides["TAMP_SERVERS"] = servers if isinstance(servers, str) else ",".join(servers)
    if num_workers is not None:
        overrides["TAMP_NUM_WORKERS"] = str(num_workers)
    if config is None:
        path = _tamp.config_path_from_env({})
        try:
            config = load_config(path)
        except OSError as unreadable:  # The variable's value is wrong.
            raise ValueError(f"TAMP_CONFIG: {unreadable}") from None
    config = load_config(config)
    where = _tamp.placement_from_env(config, overrides)
    _placement = Placement(config, where["rank"], where["servers"], config.num_workers,
                           where["local_rank"], where["source"])
    return _placement


def placement() -> Placement:
    """The placement init() read; RuntimeError before init()."""
    if _placement is None:
        raise RuntimeError("tamp: call tamp.init() (or tamp.torch.init()) first")
    return _placement


def rank() -> int:
    return placement().rank


def size() -> int:
    return placement().num_workers


def local_rank() -> int:
    return placement().local_rank


def restarted() -> bool:
    """Whether this process replaces a dead worker of its rank: TAMP_RESTART is a number >= 1
    (`tamp run --restart_workers`, deploy/). Such a worker calls resume() instead of start().
    ValueError naming TAMP_RESTART when it is set to anything but a whole number."""
    return _tamp.restarted_from_env()


def keep_freed_memory() -> None:
    """Makes glibc's malloc keep freed memory for reuse, as tamp_worker and tamp_server do
    (base/malloc_settings.h): a training step frees and allocates the same megabytes again,
    which by default come back as fresh pages, a page fault per 4 KiB (thousands a step for
    the examples' CNN). Afterwards blocks up to 32 MiB come from the heap and freed memory
    stays there (up to 1 GiB), at the cost of keeping the process's peak heap. Process-wide;
    tamp.torch.init() calls it unless told not to. RuntimeError when malloc refuses (another
    allocator replaces glibc's, e.g. a sanitizer's)."""
    _tamp.keep_freed_memory()


def _check_count(caller: str, name: str, value) -> None:
    """ValueError naming `name` unless `value` is an integer >= 1 (a count: steps, passes; a
    numpy integer too), and below 2**63."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{caller}: {name} must be an int >= 1, got {value!r}")
    if value >= 2**63:
        raise ValueError(f"{caller}: {name} must be below 2**63, got {value!r}")


def _tensor_specs(caller: str, tensors) -> List[Tuple[str, List[int]]]:
    """[(name, [dims])] from `tensors`, or ValueError naming the entry that is not a (str
    name, sequence of ints) pair: a float dimension is not cut to an int, nor a dict taken for
    its keys."""
    if isinstance(tensors, (str, bytes, abc.Mapping)) or not isinstance(tensors, abc.Iterable):
        raise ValueError(f"{caller}: tensors must be a list of (name, shape) pairs, got "
                         f"{type(tensors).__name__}")
    specs = []
    for index, entry in enumerate(tensors):
        if (isinstance(entry, (str, bytes)) or not isinstance(entry, abc.Sequence)
                or len(entry) != 2):
            raise ValueError(f"{caller}: tensors[{index}] must be a (name, shape) pair, got "
                             f"{entry!r}")
        name, shape = entry
        if not isinstance(name, str):
            raise ValueError(f"{caller}: tensors[{index}]: the name must be a str, got {name!r}")
        try:
            if isinstance(shape, (str, bytes)):
                raise TypeError
            dims = [operator.index(d) for d in shape]  # A float or a bool is no dimension.
            if any(isinstance(d, bool) for d in shape):
                raise TypeError
        except TypeError:
            raise ValueError(f"{caller}: tensor \"{name}\": the shape must be a sequence of "
                             f"ints, got {shape!r}") from None
        specs.append((name, dims))
    return specs


def count_steps(config: Config, steps_per_epoch: int) -> int:
    """Steps in the run: training.epochs passes of steps_per_epoch, cut at training.max_steps.

    The servers' own computation (job/config.h TotalSteps), which they check every
    worker's total against.
    """
    _check_count("count_steps", "steps_per_epoch", steps_per_epoch)
    return _tamp.total_steps(config, steps_per_epoch)


class Client(_NativeClient):
    """One worker's client of the job in placement() (init() first).

    tensors: [(name, shape)], the job's tensors in the order every call passes them (the
    model's order; with `model { kind: MLP }` or CNN exactly the config's tensors, else
    ValueError names the first difference). steps_per_epoch: the worker's steps per pass
    over its data; total_steps defaults to count_steps(config, steps_per_epoch). The servers'
    learning-rate schedule needs both. where: a Placement, default placement().

    Methods (from the extension): start(params) -> first step; resume(params) -> first step,
    for a process replacing a dead worker (restarted(): it rejoins the run at the others'
    step, or returns total_steps with the final weights once the run is over);
    broadcast(params): before the first step, by every worker: worker 0's params replace the
    job's weights and every worker's params get them;
    begin_step(step, params);
    push(name or index, gradient); wait(out); rejoin(params, cause) -> next step; report()
    and totals() as dicts; tensor_names, tensor_shapes, aggregates; close(): waits for the
    RPCs in flight and closes the connections (later calls raise RuntimeError; totals() and
    the properties stay), also on leaving a `with tamp.Client(...) as client:` block.
    """

    def __init__(self, tensors: Sequence[Tuple[str, Sequence[int]]], steps_per_epoch: int,
                 total_steps: Optional[int] = None, where: Optional[Placement] = None):
        _check_count("Client", "steps_per_epoch", steps_per_epoch)
        if total_steps is not None:
            _check_count("Client", "total_steps", total_steps)
        where = where if where is not None else placement()
        steps = total_steps if total_steps is not None else count_steps(where.config,
                                                                        steps_per_epoch)
        # What the config says that has no effect: it stands, but the user may not know.
        for note in where.config.notes:
            _warn_at_caller(f"tamp: {note}")
        super().__init__(where.config, where.rank, where.servers,
                         _tensor_specs("Client", tensors),
                         steps_per_epoch, steps)
        self.total_steps = steps
        self.rank = where.rank
        for note in self.layout_notes:
            _warn_at_caller(f"tamp: {note}")

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
