"""DistributedOptimizer's machinery for tamp.torch (whose docstring documents it): the job's
parameters of an optimizer, the hooks that push each gradient as backward accumulates it,
and the methods the wrapped optimizer's class gains. Works on tamp.torch's session (the
job's client and registered tensors), passed in; imports nothing of tamp.torch.

Threading: the training thread's (backward's hooks run on it for CPU tensors).
"""

import contextlib
import math
from typing import Dict, Iterable, List, Optional, Tuple, Union

import torch


def named_tensors(params: Union[Dict[str, torch.Tensor], Iterable[Tuple[str, torch.Tensor]]],
                  caller: str, argument: str) -> List[Tuple[str, torch.Tensor]]:
    """`params` (a dict, or an iterable of (name, tensor) pairs) as a list of pairs; a
    TypeError naming `argument` and what it holds instead, a ValueError when it holds
    none."""
    if isinstance(params, torch.nn.Module):
        raise TypeError(f"{caller}: {argument} is a {type(params).__name__} module; pass its "
                        "named_parameters() (or its state_dict())")
    try:
        items = list(params.items() if isinstance(params, dict) else params)
    except TypeError:
        raise TypeError(f"{caller}: {argument} must be a dict or (name, tensor) pairs, got a "
                        f"{type(params).__name__}") from None
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"{caller}: {argument} must hold (name, tensor) pairs, as "
                            f"model.named_parameters() yields them; got a {type(item).__name__}")
    if not items:
        # Most often a named_parameters() generator that an earlier call used up.
        raise ValueError(f"{caller}: {argument} holds no tensors; an iterator such as "
                         "model.named_parameters() is used up by one call: pass a fresh "
                         "model.named_parameters() (or a list of it) to each")
    return items


def _grad_accumulated_hook(param: torch.Tensor, hook) -> tuple:
    """Calls hook() once backward has accumulated param.grad. Returns what to keep while
    the hook is wanted: its handle first (.remove() removes it)."""
    if hasattr(param, "register_post_accumulate_grad_hook"):  # torch >= 2.1
        return (param.register_post_accumulate_grad_hook(lambda _: hook()),)
    # torch < 2.1: the hook of the parameter's gradient accumulator runs after it has written
    # .grad; the accumulator lives as long as a reference to it.
    accumulator = param.expand_as(param).grad_fn.next_functions[0][0]
    return accumulator.register_hook(lambda *_: hook()), accumulator


# The torch optimizers whose rules the servers' optimizers follow (optim/optimizer.h), with
# the settings the servers' versions fix.
_SERVER_RULES = {torch.optim.SGD: ("sgd", {"dampening": 0.0}),
                 torch.optim.Adam: ("adam", {"amsgrad": False})}


def servers_run(optimizer: torch.optim.Optimizer) -> bool:
    """Whether the servers' optimizers (the config's optimizer.name) include the wrapped
    optimizer's rule."""
    return getattr(optimizer, "_tamp_base", type(optimizer)) in _SERVER_RULES


def _shown(value) -> str:
    """A config value (fp32) as it was written: 0.05, not 0.05000000074505806."""
    if isinstance(value, tuple):
        return "(" + ", ".join(_shown(v) for v in value) + ")"
    return f"{value:.7g}" if isinstance(value, float) else str(value)


def unused_settings(optimizer: torch.optim.Optimizer, servers: Optional[dict]) -> List[str]:
    """The wrapped optimizer's settings that differ from the servers' optimizer (the config's
    `optimizer` section, tamp.Config.optimizer), which steps in its place."""
    rule = _SERVER_RULES.get(getattr(optimizer, "_tamp_base", type(optimizer)))
    if servers is None or rule is None or rule[0] != servers["name"]:
        return [f"{type(optimizer).__name__} itself (the servers run "
                f"{servers['name'] if servers else 'none'})"]
    expected = dict(servers, **rule[1])
    del expected["name"]
    differ = []
    for index, group in enumerate(optimizer.param_groups):
        for key, value in expected.items():
            if key not in group:
                continue
            mine = group[key]
            if isinstance(value, tuple):
                same = all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(mine, value))
            elif isinstance(value, bool):
                same = bool(mine) == value
            else:
                same = math.isclose(float(mine), value, rel_tol=1e-6, abs_tol=1e-12)
            if not same:
                where = f"param_groups[{index}] " if len(optimizer.param_groups) > 1 else ""
                differ.append(f"{where}{key}={mine} (the servers': {_shown(value)})")
    return differ


def check_momentum_applied_once(optimizer: torch.optim.Optimizer, config) -> None:
    """ValueError where the job's pushes keep DGC's momentum on the workers (push_feedback
    DGC_MOMENTUM) and, in AGGREGATE mode, the wrapped optimizer has a momentum of its own
    (SGD's momentum, Adam's beta1): applied twice, the job diverges. The config check refuses
    the same of the config's optimizer section; the script's optimizer is checked here."""
    if not (config.aggregates and config.dgc_momentum):
        return
    for index, group in enumerate(optimizer.param_groups):
        where = f"param_groups[{index}] " if len(optimizer.param_groups) > 1 else ""
        if group.get("momentum"):
            own = f"{where}momentum={group['momentum']}"
        elif group.get("betas") and group["betas"][0]:
            own = f"{where}betas[0]={group['betas'][0]} (Adam's first moment, a momentum)"
        else:
            continue
        raise ValueError(
            f"DistributedOptimizer: the wrapped {type(optimizer).__name__} has {own}, but the "
            "config pushes with push_feedback DGC_MOMENTUM, whose momentum correction already "
            "applies momentum on the workers; in AGGREGATE mode the wrapped optimizer steps "
            "on the mean, so momentum would apply twice and the job diverge. Wrap SGD with "
            "momentum=0, as DGC does")


def job_parameters(optimizer: torch.optim.Optimizer, named_parameters
                   ) -> List[Tuple[str, torch.Tensor]]:
    """The job's tensors of `optimizer`: its trainable parameters, named by named_parameters
    (an iterable of (name, tensor) pairs; without it "param.G.I"). ValueError or TypeError
    naming what does not fit."""
    # A frozen parameter (requires_grad False, which torch's optimizers skip) gets no
    # gradient to push.
    in_optimizer = [p for group in optimizer.param_groups for p in group["params"]]
    if named_parameters is None:
        named = [(f"param.{g}.{i}", p) for g, group in enumerate(optimizer.param_groups)
                 for i, p in enumerate(group["params"]) if p.requires_grad]
    else:
        every_named = named_tensors(named_parameters, "DistributedOptimizer",
                                     "named_parameters")
        # A tied weight listed under two names (gathered from two modules) is one tensor of
        # the job, under its first name, as model.named_parameters() lists it once.
        named, seen = [], set()
        for name, p in every_named:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                named.append((name, p))
        optimizer_ids = {id(p) for p in in_optimizer}
        for name, p in named:
            if id(p) not in optimizer_ids:
                raise ValueError(f'DistributedOptimizer: parameter "{name}" is not in the '
                                 "optimizer's param_groups")
        named_ids = {id(p) for _, p in every_named}
        for p in in_optimizer:
            if p.requires_grad and id(p) not in named_ids:
                raise ValueError("DistributedOptimizer: a parameter of shape "
                                 f"{list(p.shape)} in the optimizer's param_groups is not "
                                 "in named_parameters")
    return named


class _DistributedOptimizer(torch.optim.Optimizer):
    """The methods DistributedOptimizer() adds to the wrapped optimizer's class."""

    def _tamp_hook(self, session, named: List[Tuple[str, torch.Tensor]],
                   backward_passes_per_step: int, sparse_as_dense: bool) -> None:
        """Hooks `named`, the job's tensors (registered with `session`, started); the
        DistributedOptimizer that pushed until now (this one too, wrapped again) hands over."""
        if session.optimizer is not None:
            session.optimizer._tamp_hand_over(
                "a later DistributedOptimizer() over the same tensors replaced this one (it "
                "pushes and steps now); step that one")
        self._tamp = session
        self._tamp_params = [p for _, p in named]
        # The optimizer's parameters that are not the job's (frozen at registration): one
        # unfrozen later trains nowhere, and in AGGREGATE mode must not step on its local
        # gradient alone (the replicas would part).
        registered = {id(p) for p in self._tamp_params}
        self._tamp_outside = [p for group in self.param_groups for p in group["params"]
                              if id(p) not in registered]
        self._tamp_unfrozen_named = False  # Once.
        self._tamp_passes = backward_passes_per_step
        self._tamp_sparse_as_dense = sparse_as_dense
        # Per parameter, the backward passes that have accumulated its gradient this step; it
        # is pushed on the last of them (or by synchronize()).
        self._tamp_passes_done = [0] * len(self._tamp_params)
        # Per parameter, the gradient its hook pushed this step and that tensor's version: a
        # change before synchronize() (clipping after backward) comes too late, and is named.
        self._tamp_pushed: List[Optional[Tuple[torch.Tensor, int]]] = \
            [None] * len(self._tamp_params)
        self._tamp_late_change_named = False  # Once.
        self._tamp_frozen_named = False  # Once.
        self._tamp_synchronized = False  # synchronize() ran; step() does not wait again.
        self._tamp_stepped = True  # The last synchronize() was a step (not a rejoin).
        self._tamp_skipping = False  # Inside skip_synchronize().
        # Each group's rate at registration, to say once when a scheduler changes one to no
        # effect; None once said.
        self._tamp_learning_rates: Optional[List[Optional[float]]] = \
            [group.get("lr") for group in self.param_groups]
        # Why this one no longer steps through Tamp (a later DistributedOptimizer() took the
        # hooks over, or shutdown() closed the job); None while it does.
        self._tamp_ended: Optional[str] = None
        self._tamp_hooks = [
            _grad_accumulated_hook(param, lambda i=index, p=param: self._tamp_accumulated(i, p))
            for index, param in enumerate(self._tamp_params)]
        self._tamp.optimizer = self

    def _tamp_hook_again(self, index: int) -> None:
        """Hooks parameter `index` anew where torch < 2.1 dropped its gradient accumulator,
        and the hook on it, with its memory (replaced by one of another dtype or device, as
        model.to() does); until then step() pushed its gradient."""
        kept, param = self._tamp_hooks[index], self._tamp_params[index]
        if len(kept) == 1 or not param.requires_grad:  # torch >= 2.1 hooks the parameter.
            return
        with torch.enable_grad():  # step() runs under no_grad, where expand_as has no graph.
            if param.expand_as(param).grad_fn.next_functions[0][0] is kept[1]:
                return
            kept[0].remove()
            self._tamp_hooks[index] = _grad_accumulated_hook(
                param, lambda i=index, p=param: self._tamp_accumulated(i, p))

    def _tamp_check_between_steps(self, caller: str) -> None:
        if any(self._tamp_passes_done) or self._tamp_synchronized:
            raise RuntimeError(f"{caller}: the current DistributedOptimizer is inside a step "
                               "(gradients pushed, or synchronize() called): call its step() "
                               "first")

    def _tamp_hand_over(self, why: str) -> None:
        """Stops pushing and stepping through Tamp (its hooks are removed); step() then raises
        RuntimeError saying `why`."""
        for kept in self._tamp_hooks:
            kept[0].remove()
        self._tamp_hooks = []
        self._tamp_ended = why

    def _tamp_check_current(self) -> None:
        if self._tamp_ended is not None:
            raise RuntimeError(f"DistributedOptimizer: {self._tamp_ended}")

    def _tamp_accumulated(self, index: int, param: torch.Tensor) -> None:
        done = self._tamp_passes_done[index] + 1
        if done > self._tamp_passes:
            # torch added the refused pass into .grad before this hook: not a change after the
            # push for step() to warn of (clipping).
            if self._tamp_pushed[index] is not None:
                self._tamp_pushed[index] = (param.grad, param.grad._version)
            raise RuntimeError(
                f'tensor "{self._tamp.names[index]}": backward accumulated its gradient '
                f"{done} times in one step, and DistributedOptimizer(backward_passes_per_step="
                f"{self._tamp_passes}) pushed it after {self._tamp_passes}: call step() first")
        if done == self._tamp_passes:
            self._tamp_densify(param)
            self._tamp.push(index, param.grad)  # A refused push counts for nothing.
            self._tamp_pushed[index] = (param.grad, param.grad._version)
        self._tamp_passes_done[index] = done

    def _tamp_densify(self, param: torch.Tensor) -> None:
        """With sparse_as_dense, a sparse .grad (nn.Embedding(sparse=True)) made dense in
        place of it, as Horovod's option does; without, push() refuses it naming the tensor."""
        if self._tamp_sparse_as_dense and param.grad.is_sparse:
            param.grad = param.grad.to_dense()

    @torch.no_grad()
    def synchronize(self) -> None:
        """Completes the step's exchange: pushes what backward has not (a parameter without
        gradient this step as zeros, in .grad; one accumulated fewer than
        backward_passes_per_step times as its .grad is), waits for every answer and applies
        it: the servers' update into the parameters, or in AGGREGATE mode the mean into each
        .grad, where the caller may clip it before stepping under skip_synchronize()."""
        self._tamp_check_current()
        self._tamp_synchronize(loss=None)

    def _tamp_synchronize(self, loss: Optional[float]) -> None:
        """synchronize(), with the step's loss (step(closure)'s) for the reports; the caller
        checked that this optimizer is the current one."""
        if self._tamp_synchronized:
            return
        self._tamp_name_late_changes()
        self._tamp_leave_out_unfrozen()
        for index in self._tamp.follow_memory(self._tamp_params):
            self._tamp_hook_again(index)
        frozen = []  # Frozen since registration: no gradient; torch's optimizers skip them.
        for index, param in enumerate(self._tamp_params):
            if self._tamp_passes_done[index] < self._tamp_passes:
                # Unused in this step's forward: Horovod's zeros. Frozen: zeros too, whatever
                # .grad holds (zero_grad() without set_to_none leaves its zeroed tensor, a
                # script that never zeroes it a stale one).
                if param.grad is None or not param.requires_grad:
                    param.grad = torch.zeros_like(param)
                if not param.requires_grad:
                    frozen.append(index)
                self._tamp_densify(param)
                self._tamp.push(index, param.grad)
                self._tamp_passes_done[index] = self._tamp_passes
        try:
            if not self._tamp.client.aggregates:
                self._tamp_stepped = self._tamp.finish_step(self._tamp.params, loss)
                if frozen:
                    self._tamp_name_frozen(frozen)
            else:
                self._tamp_stepped = self._tamp.finish_step(
                    [p.grad for p in self._tamp_params], loss)
                for index in frozen:  # The wrapped optimizer leaves them as torch's would.
                    self._tamp_params[index].grad = None
        except BaseException:  # A failed step is over too: the next backward pushes anew.
            self._tamp_passes_done = [0] * len(self._tamp_params)
            self._tamp_pushed = [None] * len(self._tamp_params)
            raise
        self._tamp_passes_done = [0] * len(self._tamp_params)
        if self._tamp.client.aggregates:  # The mean is now in .grad, for the caller to clip.
            self._tamp_pushed = [None] * len(self._tamp_params)
        # Server-optimizer mode: step() looks again for gradients changed after the pushes
        # (Horovod's clipping between synchronize() and step() does nothing there).
        self._tamp_synchronized = True

    def _tamp_leave_out_unfrozen(self) -> None:
        """Parameters frozen when DistributedOptimizer() registered the job's tensors and
        trainable now (progressive unfreezing) are not the job's: their gradients are dropped,
        so the wrapped optimizer (AGGREGATE mode) does not step them on one worker's gradient
        alone, and a UserWarning says so, once."""
        unfrozen = [p for p in self._tamp_outside if p.requires_grad and p.grad is not None]
        if not unfrozen:
            return
        for param in unfrozen:
            param.grad = None
        if self._tamp_unfrozen_named:
            return
        self._tamp_unfrozen_named = True
        shapes = ", ".join(str(list(p.shape)) for p in unfrozen[:5])
        self._tamp.warn(
            f"DistributedOptimizer: {len(unfrozen)} parameters of the optimizer (shapes "
            f"{shapes}{', ...' if len(unfrozen) > 5 else ''}) were frozen when "
            "DistributedOptimizer() registered the job's tensors and are trainable now: they "
            "are not the job's, so they do not train (their gradients are dropped, keeping "
            "the workers' replicas equal). To unfreeze layers during training, register them "
            "trainable (create DistributedOptimizer() before freezing them) and freeze them "
            "after", stacklevel=5)  # The script's step() or synchronize().

    def add_param_group(self, param_group: dict) -> None:
        """Refused: the job's tensors were fixed when DistributedOptimizer() registered
        them."""
        raise RuntimeError(
            "DistributedOptimizer: add_param_group() after DistributedOptimizer() registered "
            "the job's tensors: a parameter added now would train on no worker but this one, "
            "or not at all. Give the optimizer every parameter group before "
            "DistributedOptimizer() (a layer to unfreeze later: registered trainable, then "
            "frozen with requires_grad_(False))")

    def _tamp_name_frozen(self, frozen: List[int]) -> None:
        """Warns (once) that parameters frozen after registration still move in
        server-optimizer mode: the servers' optimizer steps every tensor of the job."""
        if self._tamp_frozen_named:
            return
        self._tamp_frozen_named = True
        names = ", ".join(f'"{self._tamp.names[index]}"' for index in frozen[:5])
        self._tamp.warn(
            f"DistributedOptimizer: {names}{', ...' if len(frozen) > 5 else ''} frozen "
            "(requires_grad False) after DistributedOptimizer() registered them: pushed as "
            "zeros, the servers' optimizer still steps them, so momentum and weight decay "
            "still move them. Freeze parameters before DistributedOptimizer(), or use "
            "server { mode: AGGREGATE }, where step() leaves them to the wrapped optimizer, "
            "which skips them", stacklevel=5)  # The script's step() or synchronize().

    def _tamp_name_late_changes(self, stacklevel: int = 5) -> None:
        """Warns (once) when a gradient changed after its hook pushed it: in-place (its
        version moved, as torch.nn.utils.clip_grad_norm_ scales it) or replaced."""
        if self._tamp_late_change_named:
            return
        for index, param in enumerate(self._tamp_params):
            pushed = self._tamp_pushed[index]
            if pushed is None or (param.grad is pushed[0] and param.grad._version == pushed[1]):
                continue
            self._tamp_late_change_named = True
            self._tamp.warn(
                f'DistributedOptimizer: tensor "{self._tamp.names[index]}": its gradient '
                "changed after backward pushed it (torch.nn.utils.clip_grad_norm_ before "
                "step()?), which changes nothing: the push had gone. Clip each worker's "
                "gradient before its push with the config's compression { clip_norm }"
                + (", or the mean: synchronize(), clip .grad, then step() under "
                   "skip_synchronize()" if self._tamp.client.aggregates else
                   "; clipping the mean (Horovod's synchronize(), clip, step() under "
                   "skip_synchronize()) needs server { mode: AGGREGATE }: in server-optimizer "
                   "mode synchronize() has applied the servers' update"),
                stacklevel=stacklevel)  # The script's step() or synchronize().
            return

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Horovod's: step() inside it steps on what synchronize() gave, without waiting."""
        self._tamp_skipping = True
        try:
            yield
        finally:
            self._tamp_skipping = False

    @torch.no_grad()
    def step(self, closure=None):
        """Synchronizes (unless synchronize() already did) and steps: in server-optimizer
        mode the servers' update is the step; in AGGREGATE mode the wrapped optimizer steps on
        the mean gradient. Returns closure()'s loss when given."""
        self._tamp_check_current()
        if self._tamp_skipping and not self._tamp_synchronized:
            raise RuntimeError("step() inside skip_synchronize() needs synchronize() first: "
                               "this step's gradients are pushed but not yet answered")
        if self._tamp_synchronized and not self._tamp.client.aggregates:
            self._tamp_name_late_changes(stacklevel=4)  # The script's step(), via no_grad.
        loss = None
        if closure is not None:
            with torch.enable_grad():  # As torch's optimizers: the closure runs backward.
                loss = closure()
        self._tamp_synchronize(None if loss is None else float(loss))
        self._tamp_synchronized = False
        self._tamp_pushed = [None] * len(self._tamp_params)
        if self._tamp.client.aggregates:
            if self._tamp_stepped:
                self._tamp_base.step(self)
        elif self._tamp_learning_rates is not None:
            changed = [f"param_groups[{index}] to {group.get('lr')}"
                       for index, (group, registered) in
                       enumerate(zip(self.param_groups, self._tamp_learning_rates))
                       if group.get("lr") != registered]
            if changed:
                self._tamp.warn("DistributedOptimizer: the wrapped optimizer's learning rate "
                                f"changed ({', '.join(changed)}: an LR scheduler?), but in "
                                "server-optimizer mode the servers' schedule (the config's "
                                "optimizer.schedule) sets the rate",
                                stacklevel=3)  # The script's step(), through torch.no_grad.
                self._tamp_learning_rates = None  # Once.
        if self._tamp_scheduled is not None:
            count_step_for_scheduler(self._tamp_scheduled)
        return loss


def count_step_for_scheduler(optimizer: torch.optim.Optimizer) -> None:
    """What an LR scheduler's wrapper of optimizer.step() records of a step (torch < 2.2
    counts _step_count, later ones set _opt_called), so that the scheduler created before
    DistributedOptimizer() sees it and does not warn that step() was never called."""
    if hasattr(optimizer, "_step_count"):
        optimizer._step_count += 1
    optimizer._opt_called = True


def wrap(optimizer: torch.optim.Optimizer, session, named: List[Tuple[str, torch.Tensor]],
         backward_passes_per_step: int, sparse_as_dense: bool) -> torch.optim.Optimizer:
    """`optimizer` itself, its class swapped for a subclass with _DistributedOptimizer's
    methods, pushing `named` (registered with `session`) once the job has started. In place,
    so that whatever holds the optimizer (an LR scheduler created before, a checkpoint's
    load_state_dict() through either name) holds the one that steps through Tamp; wrapped
    again, it only hooks anew. Inside a step of the current one, refuses before anything
    changes."""
    if session.optimizer is not None:
        session.optimizer._tamp_check_between_steps("DistributedOptimizer")
    session.start()
    if not hasattr(optimizer, "_tamp_base"):
        base = optimizer.__class__
        methods = {name: value for name, value in _DistributedOptimizer.__dict__.items()
                   if name not in ("__dict__", "__weakref__")}
        optimizer.__class__ = type(base.__name__, (base,), dict(methods, _tamp_base=base))
        # An LR scheduler created before wrapping replaced step() on the instance with its
        # counting wrapper of the base class's step(), which would step without Tamp. In its
        # place, Tamp's step(), which counts the step for that scheduler, with the wrapper's
        # marks (the scheduler checks them on its first step).
        scheduler_wrapper = optimizer.__dict__.get("step")
        optimizer._tamp_scheduled = None
        if scheduler_wrapper is not None:
            def step(*args, **kwargs):
                return type(optimizer).step(optimizer, *args, **kwargs)
            step.__dict__.update(getattr(scheduler_wrapper, "__dict__", {}))
            optimizer.step = step
            optimizer._tamp_scheduled = optimizer
    optimizer._tamp_hook(session, named, backward_passes_per_step, sparse_as_dense)
    return optimizer
