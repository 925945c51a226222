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

import os
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

from tamp._tamp import Config, DroppedError
from tamp._tamp import Client as _NativeClient

__all__ = [
    "Client", "Config", "DroppedError",
    "Placement", "count_steps", "init", "load_config", "placement", "rank", "size",
]


class Placement(NamedTuple):
    """Where this worker sits: the job's config, its rank, the servers' addresses."""
    config: Config
    rank: int
    servers: List[str]
    num_workers: int


_placement: Optional[Placement] = None


def load_config(config: Union[Config, str]) -> Config:
    """A Config from a Config, the text of one (it has a '{'), or a file's path."""
    if isinstance(config, Config):
        return config
    if "{" in config:
        return Config.from_text(config)
    return Config.from_file(config)


def _environment(name: str, *fallbacks: str) -> Optional[str]:
    for variable in (name,) + fallbacks:
        value = os.environ.get(variable)
        if value:
            return value
    return None


def _integer(value, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: expected an integer, got {value!r}") from None


def init(config: Union[Config, str, None] = None, rank: Optional[int] = None,
         servers: Union[Sequence[str], str, None] = None,
         num_workers: Optional[int] = None) -> Placement:
    """Reads this worker's placement; keyword arguments override the environment.

    config: TAMP_CONFIG (a path or the config's text); rank: TAMP_RANK, else torchrun's RANK;
    servers: TAMP_SERVERS ("host:port,host:port", shard order); num_workers: TAMP_NUM_WORKERS,
    else the config's cluster.num_workers (they must agree). Raises ValueError naming what is
    missing or wrong; a refusal leaves the previous placement in force.
    """
    global _placement
    config = config if config is not None else _environment("TAMP_CONFIG")
    if config is None:
        raise ValueError("tamp.init: no config: pass config= or set TAMP_CONFIG")
    config = load_config(config)
    rank = rank if rank is not None else _environment("TAMP_RANK", "RANK")
    if rank is None:
        raise ValueError("tamp.init: no rank: pass rank= or set TAMP_RANK (or torchrun's RANK)")
    rank = _integer(rank, "tamp.init: rank")
    servers = servers if servers is not None else _environment("TAMP_SERVERS")
    if servers is None:
        raise ValueError("tamp.init: no servers: pass servers= or set TAMP_SERVERS "
                         "(host:port,... in shard order)")
    if isinstance(servers, str):
        servers = [address for address in servers.split(",") if address]
    servers = list(servers)
    if len(servers) != config.num_servers:
        raise ValueError(f"tamp.init: {len(servers)} server addresses for a job of "
                         f"{config.num_servers} (cluster.num_servers)")
    num_workers = num_workers if num_workers is not None else _environment("TAMP_NUM_WORKERS")
    num_workers = config.num_workers if num_workers is None else _integer(
        num_workers, "tamp.init: num_workers")
    if num_workers != config.num_workers:
        raise ValueError(f"tamp.init: {num_workers} workers, but the config's "
                         f"cluster.num_workers is {config.num_workers}")
    if not 0 <= rank < num_workers:
        raise ValueError(f"tamp.init: rank {rank} is out of range for {num_workers} workers")
    _placement = Placement(config, rank, servers, num_workers)
    return _placement


def placement() -> Placement:
    """The placement init() read; RuntimeError before init()."""
    if _placement is None:
        raise RuntimeError("tamp: call tamp.init() first")
    return _placement


def rank() -> int:
    return placement().rank


def size() -> int:
    return placement().num_workers


def restarted() -> bool:
    """Whether this process replaces a dead worker of its rank: TAMP_RESTART is a number >= 1
    (`tamp run --restart_workers`, deploy/). Such a worker calls resume() instead of start()."""
    try:
        return int(os.environ.get("TAMP_RESTART", "0")) >= 1
    except ValueError:
        return False


def count_steps(config: Config, steps_per_epoch: int) -> int:
    """Steps in the run: training.epochs passes of steps_per_epoch, cut at training.max_steps."""
    steps = steps_per_epoch * config.epochs
    return min(steps, config.max_steps) if config.max_steps else steps


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
    begin_step(step, params);
    push(name or index, gradient); wait(out); rejoin(params, cause) -> next step; report()
    and totals() as dicts; tensor_names, tensor_shapes, aggregates.
    """

    def __init__(self, tensors: Sequence[Tuple[str, Sequence[int]]], steps_per_epoch: int,
                 total_steps: Optional[int] = None, where: Optional[Placement] = None):
        where = where if where is not None else placement()
        steps = total_steps if total_steps is not None else count_steps(where.config,
                                                                        steps_per_epoch)
        super().__init__(where.config, where.rank, where.servers,
                         [(name, [int(d) for d in shape]) for name, shape in tensors],
                         steps_per_epoch, steps)
        self.total_steps = steps
        self.rank = where.rank
