"""The broadcasts' machinery for tamp.torch (whose docstring documents them): rank 0's
parameters, and rank 0's objects, pickled and carried in rounds through the servers' copy of
the job's weights, the one store every worker reads. Works on tamp.torch's session, passed
in; imports nothing of tamp.torch.

Each round is one broadcast of the job's weights (Client.broadcast(), a collective; a server
sets the next only once every worker has taken the last): rank 0 writes into a scratch copy
of the parameters' layout, and every worker reads it back. An object's round 0 starts with a
header naming the call that sent it and the rounds that follow; a last broadcast of rank 0's
own parameters leaves the servers (and every worker) with the job's weights again, so objects
travel only where broadcast_parameters() does: before the job's first step. Every worker
checks that rank 0's broadcast was the call it made itself (a mismatch is a RuntimeError
naming both, and leaves the parameters as they were).
"""

import math
import pickle
import struct

import numpy as np
import torch

# Version 1 of an object's round 0: magic, the call that sent it (UTF-8, zero-padded), the
# pickled object's length (little-endian uint64), then the pickled object.
_MAGIC = b"TAMPOBJ1"
_HEADER = struct.Struct("<8s32sQ")
# An object of more rounds than this takes long enough to say why (each round is a broadcast
# through the servers, some milliseconds).
_MANY_ROUNDS = 100


class _Scratch:
    """A flat fp32 buffer in the registered tensors' layout: `views` (the tensors' shapes, on
    their device) for Client.broadcast(), `raw` its bytes on the CPU."""

    def __init__(self, params):
        elements = sum(param.numel() for param in params)
        self.capacity = 4 * elements  # Bytes.
        self._host = torch.empty(elements, dtype=torch.float32)
        self.raw = self._host.numpy().view(np.uint8)
        device = params[0].device
        self._device = (self._host if device.type == "cpu" else
                        torch.empty(elements, dtype=torch.float32, device=device))
        self.views, offset = [], 0
        for param in params:
            self.views.append(self._device[offset:offset + param.numel()].view(param.shape))
            offset += param.numel()

    def broadcast(self, session, from_raw: bool):
        """Rank 0's scratch becomes every worker's, `raw` included: what rank 0 wrote into
        `raw` (from_raw), else into `views`."""
        if from_raw and self._device is not self._host:
            self._device.copy_(self._host)
        session.broadcast(self.views)
        if self._device is not self._host:
            self._host.copy_(self._device)

    def header(self):
        """(the call whose object round 0 the scratch holds, or "" for weights; the pickled
        object's length)."""
        if self.capacity < _HEADER.size:
            return "", 0
        magic, caller, length = _HEADER.unpack_from(self.raw)
        if magic != _MAGIC:
            return "", 0
        return caller.rstrip(b"\0").decode("utf-8", "replace"), length


def _mismatch(caller: str, sender: str) -> RuntimeError:
    sent = f"{sender}()" if sender else "broadcast_parameters()"
    return RuntimeError(f"{caller}: rank 0 called {sent} where this worker called {caller}(): "
                        "every worker must call the same broadcasts in the same order; this "
                        "worker's parameters are as they were")


def broadcast_parameters(session, caller: str = "broadcast_parameters") -> None:
    """Rank 0's parameters become every worker's and the servers' (session.params, in
    place); RuntimeError, changing nothing, when rank 0 sent an object instead."""
    scratch = _Scratch(session.params)
    for view, param in zip(scratch.views, session.params):
        view.copy_(param)
    scratch.broadcast(session, from_raw=False)
    sender, _ = scratch.header()
    if sender:
        raise _mismatch(caller, sender)
    with torch.no_grad():
        for view, param in zip(scratch.views, session.params):
            param.copy_(view)


def broadcast_object(session, obj, is_root: bool, caller: str):
    """Rank 0's `obj`, on every worker (rank 0, `is_root`, gets `obj` itself); every worker
    calls it (a collective), from `caller` (the name rank 0's must match). `session`:
    tamp.torch's, started, before its first step."""
    scratch = _Scratch(session.params)
    if scratch.capacity < _HEADER.size:
        raise ValueError(f"{caller}: the job's parameters hold {scratch.capacity // 4} values "
                         f"({scratch.capacity} bytes), fewer than the {_HEADER.size} bytes of "
                         "a broadcast's header")
    message = b""
    if is_root:
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        message = _HEADER.pack(_MAGIC, caller.encode("utf-8")[:32], len(payload)) + payload
    parts, rounds, length = [], 1, 0
    while len(parts) < rounds:
        if is_root:
            part = message[len(parts) * scratch.capacity:(len(parts) + 1) * scratch.capacity]
            scratch.raw[:len(part)] = np.frombuffer(part, dtype=np.uint8)
        scratch.broadcast(session, from_raw=True)
        if not parts:
            sender, length = scratch.header()
            if sender != caller:
                raise _mismatch(caller, sender)
            rounds = math.ceil((_HEADER.size + length) / scratch.capacity)
            if is_root and rounds > _MANY_ROUNDS:
                session.warn(
                    f"{caller}: {length} bytes (of entries that are not the job's tensors: "
                    f"frozen parameters, buffers, objects) travel in {rounds} rounds of "
                    f"{scratch.capacity} bytes, the size of the job's trainable tensors, each a "
                    "broadcast through the servers: this can take minutes. Load them on every "
                    "worker from the same file instead (a frozen backbone's checkpoint), and "
                    "broadcast only what differs between workers",
                    # The script's line: through broadcast_entries() and broadcast_parameters(),
                    # or through tamp.torch's broadcast_object().
                    stacklevel=4 if caller == "broadcast_parameters" else 3)
        parts.append(b"" if is_root else scratch.raw.tobytes())
    # The job's weights again: rank 0's parameters, on the servers and every worker.
    session.broadcast(session.params)
    if is_root:
        return obj
    return pickle.loads(b"".join(parts)[_HEADER.size:_HEADER.size + length])


def broadcast_entries(session, entries, names, is_root: bool) -> None:
    """Rank 0's values of the tensors `entries[name]` for `names` (a state_dict's entries
    that are not the job's: buffers, frozen parameters) copied into every worker's, through
    broadcast_object(); ValueError naming an entry whose shape differs here."""
    sent = {name: entries[name].detach().cpu() for name in names
            if isinstance(entries[name], torch.Tensor)}
    values = broadcast_object(session, sent if is_root else None, is_root,
                              "broadcast_parameters")
    with torch.no_grad():
        for name, value in values.items():
            mine = entries.get(name)
            if not isinstance(mine, torch.Tensor) or mine.shape != value.shape:
                raise ValueError(f'broadcast_parameters: rank 0\'s entry "{name}" is '
                                 f"{list(value.shape)}, this worker's "
                                 f"{list(mine.shape) if isinstance(mine, torch.Tensor) else mine}")
            mine.copy_(value)
