"""tamp.torch: Tamp for PyTorch, in Horovod's and BytePS's conventions.

    import tamp.torch
    tamp.torch.init(steps_per_epoch=len(loader))      # Placement from TAMP_* (tamp run)
    optimizer = tamp.torch.DistributedOptimizer(optimizer,
                                                named_parameters=model.named_parameters())
    tamp.torch.broadcast_parameters(model.state_dict(), root_rank=0)
    for x, y in loader:                     # Per step, as without Tamp:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()     # Each gradient is pushed as backward produces it.
        optimizer.step()                    # Waits for the servers' answers and steps.

The job's tensors are the model's parameters, registered (names, shapes, order) by the first
of broadcast_parameters(), DistributedOptimizer() and the first comm_hook() call; later
calls must pass the same tensors. The first of them also starts the job: every worker's
parameters become the job's initial weights (the servers' seeded initialisation for the
config's built-in models, `model { kind: MLP }` or CNN, whose tensors PyTorch names the
same; rank 0's with `model { kind: REGISTERED }`).

Two modes, chosen by the config:
- The servers run the optimizer (the default): step() adds the servers' update to the
  parameters; the wrapped optimizer's own step() does not run (the config's optimizer
  section is the one that counts).
- `server { mode: AGGREGATE }`: the servers answer the mean gradient; step() writes it into
  the parameters' .grad and runs the wrapped optimizer. DDP's comm_hook needs this mode.

Horovod's controls of a step: DistributedOptimizer(..., backward_passes_per_step=N) pushes
each gradient once N backward passes have accumulated it (their sum); a parameter without a
gradient in a step (unused by that forward, or frozen since registration: AGGREGATE mode then
leaves its .grad None) is pushed as zeros; synchronize() completes the
exchange early (in AGGREGATE mode the mean is then in .grad, to clip), and step() inside
`with optimizer.skip_synchronize():` steps on it.

Progress: report_step(loss, step_ms) after each step(), report_eval(accuracy) after a test
evaluation and report_done(accuracy, step_ms_median) at the end print the WorkerEvent JSON
lines tamp_worker prints, so `tamp run CONFIG -- python3 train.py` shows the same progress
line and writes the same summary (bytes, compression, accuracy, step time). Under `tamp
run`, a script that does not call them gets them printed for it (tamp/_reports.py).

Blocking and threading: backward's hooks push (compressing on backward's thread); step()
blocks until every answer is in. One training thread; fp32 contiguous tensors, all on the
CPU or all on one CUDA device (then Tamp compresses on the GPU where its codecs allow, on
torch's current stream: docs/python.md "Device tensors").
Errors are tamp's (ValueError, RuntimeError, ConnectionError, DroppedError) and name the
tensor; a refused call changes nothing. A worker a SYNC barrier dropped rejoins inside
step(): that step's update is the other workers' replica, and the optimizer does not step.
"""

import atexit
import warnings
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch

import tamp
from tamp import (_torch_broadcast, _torch_collectives, _torch_optimizer, _torch_session,
                  _torch_tensors)
from tamp._torch_describe import describe_model

__all__ = [
    "Adasum", "Average", "CommHookState", "Compression", "DistributedOptimizer", "Sum",
    "allgather", "allreduce", "allreduce_", "barrier", "broadcast", "broadcast_",
    "broadcast_object", "broadcast_optimizer_state",
    "broadcast_parameters", "comm_hook", "current_step", "describe_model", "init",
    "local_rank", "rank",
    "report_done", "report_eval", "report_step", "shutdown", "size", "total_steps",
]

_run: Dict[str, Optional[int]] = {"steps_per_epoch": None, "total_steps": None, "report": None}


class Compression:
    """Horovod's gradient compressions, for scripts that name them: Tamp compresses as the
    config's compression section says, so DistributedOptimizer(compression=) only checks
    that a Horovod compression was meant (and says that fp16 is the config's business)."""
    none = "Compression.none"
    fp16 = "Compression.fp16"


# Horovod's reduction ops: Tamp's pushes are averaged (Average); the others are refused there.
# allreduce() takes Average and Sum.
Average, Sum, Adasum = _torch_collectives.AVERAGE, _torch_collectives.SUM, "Adasum"
# Horovod's collectives for what a script exchanges besides its gradients (a metric's
# average, say), on torch.distributed's gloo group: tamp/_torch_collectives.py.
allreduce = _torch_collectives.allreduce
allreduce_ = _torch_collectives.allreduce_
allgather = _torch_collectives.allgather
broadcast = _torch_collectives.broadcast
broadcast_ = _torch_collectives.broadcast_
barrier = _torch_collectives.barrier
_session: Optional["_torch_session.Session"] = None

rank = tamp.rank
size = tamp.size
local_rank = tamp.local_rank  # torch.cuda.set_device(tamp.torch.local_rank()), as Horovod's.


def init(config=None, rank: Optional[int] = None, servers=None,
         num_workers: Optional[int] = None, steps_per_epoch: Optional[int] = None,
         total_steps: Optional[int] = None, report: Optional[bool] = None,
         keep_freed_memory: bool = True) -> tamp.Placement:
    """tamp.init() (placement from the environment unless given) and the run's length.

    steps_per_epoch: this worker's optimizer steps per epoch (len(loader)); total_steps
    defaults to the config's epochs (cut at training.max_steps) of those. The servers'
    learning-rate schedule needs them; the first registration raises without them.
    report: print the progress events `tamp run` reads by itself where the script does not
    (a STEP per step, a DONE at the end: tamp/_reports.py); None: under `tamp run` only.
    keep_freed_memory: tamp.keep_freed_memory(), as the C++ worker does: torch's per-step
    buffers are then reused instead of faulted in anew each step (a warning where malloc
    refuses); False leaves malloc as it is.
    RuntimeError while a job's client is open (shutdown() closes it), and nothing changes.
    """
    if _session is not None:
        raise RuntimeError("tamp.torch.init: this process's job is running (registered "
                           f"{len(_session.names)} tensors); call tamp.torch.shutdown() first")
    for name, count in (("steps_per_epoch", steps_per_epoch), ("total_steps", total_steps)):
        if count is not None:
            tamp._check_count("tamp.torch.init", name, count)
    where = tamp.init(config, rank, servers, num_workers)
    if keep_freed_memory:
        try:
            tamp.keep_freed_memory()
        except RuntimeError as refused:
            _warn(f"tamp.torch.init: {refused}")
    _run["steps_per_epoch"] = steps_per_epoch
    _run["total_steps"] = total_steps
    _run["report"] = report if report is not None else where.source == "tamp"
    return where


def current_step() -> int:
    """The step the next optimizer.step() completes, counted from 0; 0 before the job
    started. A worker that resumed in place of a dead one (tamp.restarted()) or rejoined
    after a SYNC barrier dropped it is at the other workers' step: a training loop that
    counts its own steps takes this one, to feed the batches of that step and to stop at
    the run's end."""
    return 0 if _session is None or _session.step is None else _session.step


def total_steps() -> int:
    """The run's steps (init()'s total_steps, else the config's epochs of steps_per_epoch,
    cut at training.max_steps): a training loop ends when current_step() reaches it, as the
    servers take no step past it. ValueError before init(steps_per_epoch=...)."""
    if _run["total_steps"] is not None:
        return _run["total_steps"]
    if _run["steps_per_epoch"] is None:
        raise ValueError("tamp.torch.total_steps: call tamp.torch.init(steps_per_epoch=...) "
                         "first: the run's length is the config's epochs of those steps")
    return tamp.count_steps(tamp.placement().config, _run["steps_per_epoch"])


def shutdown() -> None:
    """Ends this worker's reports (the automatic DONE) and closes the job's client (waits
    for RPCs in flight); the job's DistributedOptimizer stops pushing, and its step() raises
    RuntimeError; init() starts anew."""
    global _session
    if _session is not None and _session.step is not None:
        _session.reports.finish(_session.step)
    if _session is not None and _session.optimizer is not None:
        _session.optimizer._tamp_hand_over(
            "tamp.torch.shutdown() closed the job it stepped through; to train on through "
            "Tamp, call tamp.torch.init() and DistributedOptimizer() again")
    if _session is not None:
        _session.client.close()  # Not left to the garbage collector: a hook may hold it.
    _session = None


atexit.register(shutdown)  # A script that never calls shutdown() still ends its reports.


def _started(caller: str) -> "_torch_session.Session":
    if _session is None or _session.step is None:
        raise RuntimeError(f"{caller}: the job has not started (broadcast_parameters(), "
                           "DistributedOptimizer() or CommHookState() starts it)")
    return _session


def _print_event(line: str) -> None:
    print(line, flush=True)


def _warn(message: str, stacklevel: int = 2) -> None:
    """warnings.warn(message) at the caller's caller (`stacklevel` as warnings.warn's, from
    the caller), and under `tamp run` the message on stdout too: the launcher shows a
    worker's stdout, while its stderr, where Python's warnings go, only reaches its log."""
    warnings.warn(message, stacklevel=stacklevel + 1)
    if _run["report"]:
        _print_event(f"warning: {message}")


def report_step(loss: float, step_ms: float, thread_cpu_ms: float = 0.0) -> None:
    """Prints the step the last step() completed as a WorkerEvent JSON line on stdout (its
    loss and wall time `step_ms`, with the step's bytes per shard and the client's
    timeline), as tamp_worker does: `tamp run` shows it and sums it into the summary.
    `step_ms` spans the whole step, through optimizer.step(): time before it (set-up, an
    evaluation) is not counted as the step's compute; a step_ms that ends before step()
    returns leaves the event's split (compute ... other_ms) more than the step.
    `thread_cpu_ms`: the training thread's CPU time in the step (time.thread_time()), or 0."""
    session = _started("report_step")
    if not step_ms >= 0:
        raise ValueError(f"report_step: step_ms must be >= 0, got {step_ms}")
    if not thread_cpu_ms >= 0:
        raise ValueError(f"report_step: thread_cpu_ms must be >= 0, got {thread_cpu_ms}")
    session.reports.script_step(session.step, float(loss), float(step_ms), float(thread_cpu_ms))


def report_eval(test_accuracy: float) -> None:
    """Prints a test evaluation after the steps completed so far (WorkerEvent EVAL)."""
    session = _started("report_eval")
    if not 0 <= test_accuracy <= 1:
        raise ValueError(f"report_eval: test_accuracy must be in [0, 1], got {test_accuracy}")
    session.reports.script_eval(session.step, float(test_accuracy))


def report_done(test_accuracy: Optional[float], step_ms_median: float) -> None:
    """Prints the end of this worker's run (WorkerEvent DONE): its final test accuracy (None
    when it did not evaluate: the event leaves it out) and median step time; `tamp run` waits
    for it to summarize."""
    session = _started("report_done")
    if test_accuracy is not None and not 0 <= test_accuracy <= 1:
        raise ValueError(f"report_done: test_accuracy must be in [0, 1], got {test_accuracy}")
    if not step_ms_median >= 0:
        raise ValueError(f"report_done: step_ms_median must be >= 0, got {step_ms_median}")
    session.reports.script_done(session.step,
                                None if test_accuracy is None else float(test_accuracy),
                                float(step_ms_median))


def _check_initialized() -> None:
    """RuntimeError before tamp.torch.init() (tamp.init() alone is not enough), ValueError
    after one without steps_per_epoch."""
    if _run["steps_per_epoch"] is None:
        # Before init() a call out of order; after init() without it, an argument missing.
        error = RuntimeError if _run["report"] is None else ValueError
        raise error("tamp.torch: call tamp.torch.init(steps_per_epoch=...) first: the "
                    "servers' learning-rate schedule needs the run's length")


def _register(named: Sequence[Tuple[str, torch.Tensor]], caller: str,
              hint: Optional[str] = None) -> _torch_session.Session:
    """The session of `named`: created by the first caller, checked against it after. A
    refusal (ValueError) ends with `hint` in parentheses, when given: the caller's way out."""
    global _session
    try:
        for name, tensor in named:
            _torch_tensors.check_tensor(name, tensor)
        if _session is None:
            _check_initialized()
            _session = _torch_session.Session(
                named, caller, _run["steps_per_epoch"], _run["total_steps"],
                bool(_run["report"]), _warn, _print_event)
        else:
            _session.check_same(named, caller)
    except ValueError as refused:
        if isinstance(refused, _torch_session.NotInOptimizerError):  # Its own way out.
            raise ValueError(str(refused)) from None
        if hint is None:
            raise
        raise ValueError(f"{refused} ({hint})") from None
    return _session


def _check_root_rank(caller: str, root_rank: int) -> None:
    if root_rank != 0:
        raise ValueError(f"{caller}: root_rank {root_rank}: Tamp starts every worker from rank "
                         "0's weights (or the servers' initialisation)")


def broadcast_parameters(params, root_rank: int = 0) -> None:
    """Makes rank 0's `params` (a state_dict or named_parameters()) every worker's and the
    job's weights; blocks until the servers answer; every worker calls it. Registering the
    job's tensors (the first of broadcast_parameters(), DistributedOptimizer() and
    CommHookState()) starts the job from its initial weights (the servers' initialisation,
    or rank 0's with model.kind REGISTERED); called after that and before the first step
    (Horovod's order: DistributedOptimizer(), a checkpoint loaded on rank 0, then this), it
    sends rank 0's weights to the servers and every worker takes them. Entries that are not
    the job's tensors (buffers such as BatchNorm's running statistics, frozen parameters)
    get rank 0's values too, before the first step (broadcast_object()); a second name for a
    tensor's memory (tied weights) is skipped. After the first step it changes nothing (the
    servers hold the job's weights), and a UserWarning names the entries left as they are."""
    _check_root_rank("broadcast_parameters", root_rank)
    given = _torch_optimizer.named_tensors(params, "broadcast_parameters", "params")
    named, others = (_session.job_entries(given) if _session is not None
                     else _trainable_entries(given))
    # Horovod's broadcast of a whole state_dict, before anything registered the parameters.
    from_state_dict = _session is None and not all(
        isinstance(tensor, torch.nn.Parameter) for _, tensor in named)
    state_dict_hint = (
        "broadcast_parameters takes the job's trainable parameters, e.g. "
        "model.named_parameters(); a state_dict's buffers, such as BatchNorm's running "
        "statistics, are not part of a Tamp job: pass a whole state_dict only after "
        "DistributedOptimizer() first registered the parameters")
    if from_state_dict:
        for name, tensor in named:  # A buffer said as one, not as a dtype to convert.
            if isinstance(tensor, torch.Tensor) and not tensor.is_floating_point():
                raise ValueError(f'broadcast_parameters: "{name}" ({tensor.dtype}) is a buffer '
                                 f"of the state_dict, not a parameter: {state_dict_hint}")
    session = _register(named, "broadcast_parameters",
                        hint=state_dict_hint if from_state_dict else None)
    started = session.step is not None
    session.start()
    if not _before_first_step(session):
        # Parameters that still hold what the client last wrote into them (the job's
        # weights: a resumed run's start, the last step's update, a replacement process's
        # rejoin) lose nothing to the broadcast having no effect: only a change since (a
        # checkpoint loaded into them) is worth a warning.
        resync = tamp.placement().config.resync_steps
        changed = session.changed_since_job_weights([tensor for _, tensor in named])
        ignored = [] if not changed else [
            "rank 0's parameters are not sent (the servers hold the job's weights); a worker "
            "whose parameters changed since (a checkpoint loaded mid-run) now differs from the "
            "others " + (f"until the next resync (training.resync_steps {resync})" if resync
                         else "to the end of the run (training.resync_steps is 0: no resync)")]
        if others:
            ignored.append(f"{len(others)} entries that are not the job's tensors are left as "
                           f"each worker has them ({', '.join(others[:5])}"
                           f"{', ...' if len(others) > 5 else ''})")
        if ignored:
            _warn(f"broadcast_parameters: the job is at step {session.step}: "
                  f"{'; '.join(ignored)}; broadcasts take effect before the first step only")
        return
    if started:
        _torch_broadcast.broadcast_parameters(session)
    if others:
        _torch_broadcast.broadcast_entries(session, dict(given), others, tamp.rank() == 0)


def _trainable_entries(named: Sequence[Tuple[str, torch.Tensor]]
                       ) -> Tuple[List[Tuple[str, torch.Tensor]], List[str]]:
    """`named` before any registration, split into the entries to register and the names of
    frozen parameters (named_parameters() hands them over; a state_dict's entries carry no
    requires_grad); a second name for an earlier entry's memory (tied weights) is in
    neither."""
    entries, frozen, seen = [], [], set()
    for name, tensor in named:
        if isinstance(tensor, torch.nn.Parameter) and not tensor.requires_grad:
            frozen.append(name)
            continue
        memory = _torch_tensors.memory(tensor)
        if memory is not None:
            if memory in seen:
                continue
            seen.add(memory)
        entries.append((name, tensor))
    return entries, frozen


def _before_first_step(session: "_torch_session.Session") -> bool:
    """Broadcasts can still replace the job's weights: step 0 under way (not a process that
    replaced a dead worker, which took the others' replica mid-run)."""
    return session.step == 0 and not tamp.restarted()


def broadcast_object(obj, root_rank: int = 0, name: Optional[str] = None):
    """Horovod's: rank 0's `obj` (anything pickle takes), returned on every worker (rank 0
    gets `obj` itself); every worker calls it, in the same order as the other broadcasts (a
    collective). Before the job's first step only (RuntimeError after): it travels through
    the servers' copy of the job's weights in rounds of the model's size, which then holds
    rank 0's parameters, as after broadcast_parameters() (every worker's parameters become
    rank 0's). Needs the job started (DistributedOptimizer() or broadcast_parameters()).

    `name` is Horovod's label, unused. After the first step, broadcast() carries a tensor.

    Example (resuming on rank 0 from a checkpoint that every worker must follow):
        start_epoch = tamp.torch.broadcast_object(checkpoint["epoch"] if rank0 else None)
    """
    _check_root_rank("broadcast_object", root_rank)
    session = _started("broadcast_object")
    if not _before_first_step(session):
        raise RuntimeError("broadcast_object: objects travel only before the job's first "
                           f"step (this worker is at step {session.step}): call it at the "
                           "start, with broadcast_parameters(); later, tamp.torch.broadcast() "
                           "and allreduce() carry tensors between the workers")
    return _torch_broadcast.broadcast_object(session, obj, tamp.rank() == 0,
                                             "broadcast_object")


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int = 0) -> None:
    """Horovod's: rank 0's optimizer state (its state_dict(): per-parameter buffers such as
    momentum, and param_groups' settings) loaded into every worker's `optimizer`; every
    worker calls it. In server-optimizer mode it sends nothing: the servers' optimizer is the
    one that steps (the wrapped one's state is unused, and a UserWarning says so when it
    holds tensors, a checkpoint's). In AGGREGATE mode every worker's
    optimizer steps on the same mean, so states that start equal stay equal: before the
    job's first step it sends rank 0's (broadcast_object(), which also makes rank 0's
    parameters every worker's); after it, a UserWarning if the state holds tensors (they
    must be the same on every worker; Tamp cannot send them then). Needs the job started."""
    _check_root_rank("broadcast_optimizer_state", root_rank)
    session = _started("broadcast_optimizer_state")
    holds_tensors = any(isinstance(value, torch.Tensor)
                        for state in optimizer.state.values() for value in state.values())
    if not session.client.aggregates:
        if holds_tensors:
            _warn(f"broadcast_optimizer_state: rank {tamp.rank()}'s optimizer holds state (a "
                  "checkpoint's?), which goes unused: the servers run the config's optimizer "
                  "from their own state (fresh, or their checkpoint's: checkpoint.dir)")
        return
    if _before_first_step(session):
        state = _torch_broadcast.broadcast_object(session, optimizer.state_dict(),
                                                  tamp.rank() == 0,
                                                  "broadcast_optimizer_state")
        if tamp.rank() != 0:
            optimizer.load_state_dict(state)
        return
    if holds_tensors:
        _warn(f"broadcast_optimizer_state: rank {tamp.rank()}'s optimizer holds state and "
              f"the job is at step {session.step}: Tamp sends state only before the first "
              "step, so every worker must hold the same, or in AGGREGATE mode their replicas "
              "drift apart")


def _check_horovod_arguments(compression, op, gradient_predivide_factor) -> None:
    """DistributedOptimizer()'s Horovod arguments: refused (naming them) where Tamp cannot
    do what they ask, warned of where the config decides instead."""
    if compression not in (Compression.none, Compression.fp16):
        raise TypeError(f"DistributedOptimizer: compression={compression!r}: Horovod's "
                        "Compression.none or Compression.fp16 (tamp.torch.Compression); Tamp's "
                        "codecs are the config's compression section")
    if op != Average:
        raise ValueError(f"DistributedOptimizer: op={op!r}: Tamp averages the workers' "
                         "gradients (Horovod's Average); Sum and Adasum are not supported")
    if not (isinstance(gradient_predivide_factor, (int, float))
            and gradient_predivide_factor > 0):
        raise ValueError("DistributedOptimizer: gradient_predivide_factor must be a number > 0, "
                         f"got {gradient_predivide_factor!r}")
    if compression == Compression.fp16:
        _warn("DistributedOptimizer: compression=Compression.fp16 is Horovod's; Tamp "
              "compresses as the config's compression section says (fp16 pushes: "
              "default_compression { push { name: \"fp16\" } }), so the argument changes "
              "nothing", stacklevel=3)


def DistributedOptimizer(optimizer: torch.optim.Optimizer,
                         named_parameters: Optional[Iterable[Tuple[str, torch.nn.Parameter]]] = None,
                         compression=Compression.none, backward_passes_per_step: int = 1,
                         op=Average, gradient_predivide_factor: float = 1.0, num_groups: int = 0,
                         groups=None, sparse_as_dense: bool = False) -> torch.optim.Optimizer:
    """`optimizer`, pushing each gradient as backward produces it and stepping through Tamp.

    The result is `optimizer` itself, its class swapped in place for a subclass that
    pushes and steps through Tamp: LR schedulers and checkpoints work on it, created or
    loaded before or after. Registers the parameters (named_parameters; without it
    "param.G.I") and starts the job: blocks until the servers answer (load a checkpoint's
    weights before). backward_passes_per_step: backward passes accumulated into .grad
    before each push (Horovod's; the pushed gradient is their sum). A parameter that gets
    no gradient in a step is pushed as zeros by step() (or synchronize()).

    Horovod's signature: compression (Compression.none; Compression.fp16 is warned of and
    left to the config's compression section), op (Average only: ValueError otherwise),
    gradient_predivide_factor (> 0; the average is the same), num_groups and groups (no
    effect: each gradient is pushed as soon as backward produces it), sparse_as_dense
    (sparse gradients, as nn.Embedding(sparse=True) gives, are pushed dense; without it they
    are refused naming the tensor).
    """
    _check_initialized()
    tamp._check_count("DistributedOptimizer", "backward_passes_per_step",
                      backward_passes_per_step)
    _check_horovod_arguments(compression, op, gradient_predivide_factor)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("DistributedOptimizer: expected a torch.optim.Optimizer, got a "
                        f"{type(optimizer).__name__}")
    named = _torch_optimizer.job_parameters(optimizer, named_parameters)
    if named_parameters is None and _session is not None:
        # Horovod's order (broadcast_parameters(model.state_dict()) first): the registered
        # names, by memory, for "param.G.I".
        named = _session.names_by_memory(named)
    _torch_optimizer.check_momentum_applied_once(optimizer, tamp.placement().config)
    session = _register(named, "DistributedOptimizer", hint=(
        "if this is a second optimizer over part of the model: one DistributedOptimizer() "
        "steps every trainable parameter of the job; for settings per layer, give one "
        "optimizer param_groups") if _session is not None else None)
    wrapped = _torch_optimizer.wrap(optimizer, session, named, backward_passes_per_step,
                                    bool(sparse_as_dense))
    if not wrapped._tamp.client.aggregates:
        unused = _torch_optimizer.unused_settings(optimizer,
                                                  tamp.placement().config.optimizer)
        if unused:
            _warn("DistributedOptimizer: in server-optimizer mode the servers run the "
                  "config's optimizer section and the wrapped optimizer never steps, so these "
                  f"of its settings are not used: {', '.join(unused)}; "
                  + ("the config's optimizer section holds one setting for every tensor, so "
                     "settings per param_groups need server { mode: AGGREGATE }, where the "
                     "wrapped optimizer steps"
                     if any(setting.startswith("param_groups[") for setting in unused) else
                     "set them in the config's optimizer section (or use server { mode: "
                     "AGGREGATE } to step the wrapped optimizer)"
                     if _torch_optimizer.servers_run(optimizer) else
                     "the servers run only SGD and Adam: to train with this optimizer, use "
                     "server { mode: AGGREGATE }, where the wrapped optimizer steps"))
    return wrapped


class CommHookState:
    """DDP communication-hook state: model.register_comm_hook(CommHookState(), comm_hook).

    named_parameters: the DDP model's parameters (of the module DDP wraps: no "module."
    prefix); without it, those broadcast_parameters() or DistributedOptimizer() registered.
    Registers and starts the job (blocks until the servers answer). Needs
    `server { mode: AGGREGATE }`: RuntimeError otherwise, and nothing is registered.
    """

    def __init__(self, named_parameters: Optional[Iterable[Tuple[str, torch.Tensor]]] = None):
        created = _session is None
        if named_parameters is not None:
            named = _torch_optimizer.named_tensors(named_parameters, "CommHookState",
                                                   "named_parameters")
            session = _register([(name, p) for name, p in named if p.requires_grad],
                                "CommHookState")
        elif not created:
            session = _session
        else:
            raise RuntimeError("CommHookState: no tensors registered: pass "
                               "CommHookState(named_parameters=model.named_parameters()) or "
                               "call tamp.torch.broadcast_parameters() first")
        if not session.client.aggregates:
            if created:  # A refusal leaves no session behind.
                shutdown()
            raise RuntimeError("CommHookState: the job's servers run the optimizer; a DDP comm "
                               "hook needs `server { mode: AGGREGATE }` in the config")
        session.start()
        self._session = session
        self._index = {p.data_ptr(): i for i, p in enumerate(session.params)}
        self._grads: List[Optional[torch.Tensor]] = [None] * len(session.params)
        self._pending: List[Tuple[torch.futures.Future, torch.Tensor]] = []


def comm_hook(state: CommHookState, bucket) -> torch.futures.Future[torch.Tensor]:
    """Pushes the bucket's gradients; its future gives their mean over the workers, once the
    last bucket of the step has been pushed and the servers have answered."""
    session = state._session
    for param, grad in zip(bucket.parameters(), bucket.gradients()):
        index = state._index.get(param.data_ptr())
        if index is None:
            raise ValueError(f"comm_hook: a parameter of shape {list(param.shape)} is not "
                             "registered with the job")
        session.push(index, grad)
        state._grads[index] = grad
    future = torch.futures.Future()
    state._pending.append((future, bucket.buffer()))
    if bucket.is_last():
        # The mean is written into each bucket's gradient views, i.e. into its buffer.
        stepped = session.finish_step(state._grads)
        for pending, buffer in state._pending:
            if not stepped:
                buffer.zero_()  # Dropped: the replica is the others'; no update this step.
            pending.set_result(buffer)
        state._pending.clear()
    return future
