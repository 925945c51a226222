"""broadcast_object's machinery for tamp.torch (whose docstring documents it): rank 0's
object, pickled and carried in rounds through the servers' copy of the job's weights, the
one store every worker reads. Works on tamp.torch's session, passed in; imports nothing of
tamp.torch.

Each round is one broadcast of the job's weights (Client.broadcast(), a collective): rank 0
writes the next part of the message into a scratch copy of the parameters' layout, and
every worker reads it back. Round 0 starts with a header, so the others learn how many
rounds follow. A last broadcast of rank 0's own parameters leaves the servers (and every
worker) with the job's weights again, so it is allowed only where broadcast_parameters() is:
before the job's first step.
"""

import math
import pickle
import struct

import numpy as np
import torch

# Version 1 of the message: magic, then the pickled object's length (little-endian uint64),
# then the pickled object.
_MAGIC = b"TAMPOBJ1"
_HEADER = struct.Struct("<8sQ")


def broadcast_object(session, obj, is_root: bool, caller: str):
    """Rank 0's `obj`, on every worker (rank 0, `is_root`, gets `obj` itself); every worker
    calls it (a collective). `session`: tamp.torch's, started, before its first step."""
    params = session.params
    elements = sum(param.numel() for param in params)
    capacity = 4 * elements  # Bytes per round.
    if capacity < _HEADER.size:
        raise ValueError(f"{caller}: the job's {elements} parameters hold fewer than the "
                         f"{_HEADER.size} bytes of a broadcast's header")
    staging = torch.empty(elements, dtype=torch.float32)  # On the CPU: the bytes are packed
    raw = staging.numpy().view(np.uint8)                   # and read here.
    device = params[0].device
    scratch = staging if device.type == "cpu" else torch.empty(elements, dtype=torch.float32,
                                                                device=device)
    views, offset = [], 0
    for param in params:  # The parameters' layout over the scratch, in registration order.
        views.append(scratch[offset:offset + param.numel()].view(param.shape))
        offset += param.numel()

    message = b""
    if is_root:
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        message = _HEADER.pack(_MAGIC, len(payload)) + payload
    parts, rounds, length = [], 1, 0
    while len(parts) < rounds:
        if is_root:
            part = message[len(parts) * capacity:(len(parts) + 1) * capacity]
            raw[:len(part)] = np.frombuffer(part, dtype=np.uint8)
        if scratch is not staging:
            scratch.copy_(staging)
        session.broadcast(views)
        if scratch is not staging:
            staging.copy_(scratch)
        if not parts:
            magic, length = _HEADER.unpack_from(raw)
            if magic != _MAGIC:
                raise RuntimeError(
                    f"{caller}: rank 0's broadcast did not carry an object: every worker must "
                    "call the same broadcasts in the same order (rank 0 called "
                    "broadcast_parameters() where this worker called "
                    f"{caller}?)")
            rounds = math.ceil((_HEADER.size + length) / capacity)
        parts.append(raw.tobytes() if not is_root else b"")
    # The job's weights again: rank 0's parameters, on the servers and every worker.
    session.broadcast(params)
    if is_root:
        return obj
    received = b"".join(parts)[_HEADER.size:_HEADER.size + length]
    return pickle.loads(received)
