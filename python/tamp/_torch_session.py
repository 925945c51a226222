"""tamp.torch's session: the job's client, the tensors registered with it and the step under
way, with what every front end of tamp.torch does to them (push, wait and begin the next
step, rejoin after a drop or a failed step, broadcast). tamp.torch (whose docstring
documents the behaviour) makes one per job and hands it to its other modules; this module
imports nothing of tamp.torch.

Threading: the training thread's (the client's).
"""

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

import tamp
from tamp import _torch_tensors
from tamp._reports import Reports


class NotInOptimizerError(ValueError):
    """A tensor the job registered from a state_dict is not among the optimizer's
    parameters: the refusal names it and both causes a state_dict leaves open."""


class Session:
    """The job's client, the registered tensors and the step under way."""

    def __init__(self, named: Sequence[Tuple[str, torch.Tensor]], caller: str,
                 steps_per_epoch: int, total_steps: Optional[int], report: bool,
                 warn: Callable[..., None], print_event: Callable[[str], None]):
        self.names = [name for name, _ in named]
        self.params = [tensor.detach() for _, tensor in named]  # Same memory, no autograd.
        # Registered as trainable parameters (named_parameters()); a state_dict's entries
        # are not known to be (a state_dict also holds frozen parameters and buffers).
        self.trainable = [tensor.requires_grad for _, tensor in named]
        self.client = tamp.Client([(name, tensor.shape) for name, tensor in named],
                                  steps_per_epoch, total_steps)
        # `tamp run` says the config's notes itself, and the layout's (job/job_layout.h
        # LayoutNotes) where it knows the layout (a built-in model); a REGISTERED one's only
        # the workers know.
        if (report and tamp.rank() == 0
                and tamp.placement().config.model_kind == "REGISTERED"):
            for note in self.client.layout_notes:
                print_event(f"warning: tamp: {note}")
        self.step: Optional[int] = None  # The step under way; None before start().
        self._job_weights: List[Tuple[int, int]] = []  # _mark_job_weights()'s.
        # Why the last step failed (its wait raised), until recover() rejoined the run.
        self.failed: Optional[str] = None
        self.registered_by = caller
        # The DistributedOptimizer whose hooks push (the latest one created), if any.
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.reports = Reports(self.client, report,
                               lambda completed: max(completed - 1, 0) // steps_per_epoch,
                               print_event)
        self.warn = warn  # tamp.torch's: at the script's line, and on stdout under tamp run.

    def job_entries(self, named: Sequence[Tuple[str, torch.Tensor]]
                    ) -> Tuple[List[Tuple[str, torch.Tensor]], List[str]]:
        """`named` split into the job's entries, under their registered names in their
        order (for check_same; up to the first one missing), and the names of the others
        (buffers, frozen parameters). A registered tensor's memory under another name counts
        as that tensor (DistributedOptimizer() without named_parameters registered it as
        "param.G.I"; a tied weight's second name) once."""
        index_of = {name: index for index, name in enumerate(self.names)}
        by_memory = {_torch_tensors.memory(param): index
                     for index, param in enumerate(self.params)}
        by_memory.pop(None, None)
        found: Dict[int, torch.Tensor] = {}
        others = []
        for name, tensor in named:
            if name in index_of:
                found.setdefault(index_of[name], tensor)
            elif _torch_tensors.memory(tensor) in by_memory:
                found.setdefault(by_memory[_torch_tensors.memory(tensor)], tensor)
            else:
                others.append(name)
        job = []
        for index, name in enumerate(self.names):
            if index not in found:
                break
            job.append((name, found[index]))
        return job, others

    def names_by_memory(self, named: Sequence[Tuple[str, torch.Tensor]]
                        ) -> List[Tuple[str, torch.Tensor]]:
        """`named` with the registered name of each tensor whose memory is a registered
        tensor's; the others keep theirs (for check_same to name)."""
        by_memory = {_torch_tensors.memory(param): name
                     for name, param in zip(self.names, self.params)}
        by_memory.pop(None, None)
        return [(by_memory.get(_torch_tensors.memory(tensor), name), tensor)
                for name, tensor in named]

    def check_same(self, named: Sequence[Tuple[str, torch.Tensor]], caller: str) -> None:
        """ValueError naming the first tensor of `named` that is not the registered one."""
        registered_by = ("" if caller == self.registered_by else
                         f" ({self.registered_by}() registered the job's tensors first)")
        for index, (name, tensor) in enumerate(named):
            if index >= len(self.names):
                raise ValueError(f'{caller}: tensor "{name}" was not registered (the job has '
                                 f"{len(self.names)} tensors: {', '.join(self.names)})"
                                 f"{registered_by}")
            registered = self.params[index]
            if (name != self.names[index] and self.registered_by != caller and
                    not self.trainable[index] and
                    self.names[index] not in {other for other, _ in named}):
                raise NotInOptimizerError(
                    f'{caller}: "{self.names[index]}" {list(registered.shape)}, tensor {index} '
                    f"of the job as {self.registered_by}() registered it from a state_dict, "
                    "is not among this optimizer's parameters: either it is a frozen "
                    "parameter (requires_grad=False) or a buffer, which a state_dict holds "
                    "too (call DistributedOptimizer() first, or pass broadcast_parameters() "
                    "model.named_parameters()), or this optimizer leaves out a trainable "
                    "parameter (one DistributedOptimizer() steps every trainable parameter of "
                    "the job; for settings per layer, give it param_groups)")
            if name != self.names[index] or tensor.shape != registered.shape:
                raise ValueError(f'{caller}: tensor {index} is "{name}" {list(tensor.shape)}; '
                                 f'the job registered "{self.names[index]}" '
                                 f"{list(registered.shape)} there")
            if tensor.data_ptr() != registered.data_ptr():
                raise ValueError(f'{caller}: tensor "{name}" is not the registered tensor\'s '
                                 "memory (a copy?)")
        if len(named) < len(self.names):
            raise ValueError(f'{caller}: tensor "{self.names[len(named)]}" is registered but '
                             f"missing here{registered_by}; a frozen parameter or a buffer "
                             "registered then is not among the trainable parameters here: call "
                             "DistributedOptimizer() first, or pass broadcast_parameters() "
                             "model.named_parameters()")

    def start(self) -> None:
        """Copies the job's initial weights into the parameters, once; begins the first step."""
        if self.step is None:
            stream = _torch_tensors.stream(self.params[0])
            params = self._exported_params()
            # A process replacing a dead worker rejoins the run (tamp.restarted()).
            step = (self.client.resume(params, stream=stream) if tamp.restarted()
                    else self.client.start(params, stream=stream))
            if step < self.client.total_steps:
                self.client.begin_step(step, params, stream=stream)
            self.step = step
            self.reports.count_from_now()
            self._mark_job_weights()

    def _mark_job_weights(self) -> None:
        """The client has just written the job's weights into the parameters: what
        changed_since_job_weights() compares with."""
        self._job_weights = _versions(self.params)

    def changed_since_job_weights(self, tensors: Sequence[torch.Tensor]) -> bool:
        """Whether `tensors` (the registered tensors, in order) are no longer what the client
        last wrote into them: other memory, or written in place since (load_state_dict(), a
        wrapped optimizer's step); the client's own writes do not count."""
        return _versions(tensors) != self._job_weights

    def broadcast(self, tensors: Sequence[torch.Tensor]) -> None:
        """Client.broadcast() of `tensors` (the registered tensors' shapes, in their memory):
        rank 0's become the servers' weights and every worker's."""
        self.client.broadcast([_torch_tensors.exported(tensor) for tensor in tensors],
                              stream=_torch_tensors.stream(tensors[0]))

    def _exported_params(self) -> list:
        """The parameters as the client takes them; the client reads an export and leaves it
        as it was, so one serves every call of a step."""
        return [_torch_tensors.exported(param) for param in self.params]

    def follow_memory(self, params: Sequence[torch.Tensor]) -> List[int]:
        """Where the script rebound a parameter's memory since the last step (p.data = ...,
        as re-initialising or pruning code does), the registered tensor follows it, as
        torch's optimizers follow their parameters: the answers go where the model reads.
        ValueError naming the tensor when the new memory does not fit (dtype, shape,
        layout), and nothing changes. Returns the indices of the tensors that moved."""
        moved = []
        for index, param in enumerate(params):
            registered = self.params[index]
            if param.data_ptr() == registered.data_ptr():  # Two reads per tensor and step.
                continue
            moved.append(index)
            name = self.names[index]
            try:
                _torch_tensors.check_tensor(name, param)
            except ValueError as refused:
                raise ValueError(f"{refused} (its memory was replaced after registration: "
                                 "p.data = ... or model.to(...)?)") from None
            if param.shape != registered.shape:
                raise ValueError(f'tensor "{name}": its memory was replaced after '
                                 f"registration by one of shape {list(param.shape)}; the job "
                                 f"registered {list(registered.shape)}")
        for index in moved:
            self.params[index] = params[index].detach()
        return moved

    def push(self, index: int, gradient: torch.Tensor) -> None:
        """Pushes the registered tensor `index`'s gradient in the step under way."""
        self.recover()
        if self.step >= self.client.total_steps:
            raise RuntimeError(
                f'tensor "{self.names[index]}": the run\'s {self.client.total_steps} steps are '
                "done (training.epochs of init(steps_per_epoch=...), cut at "
                "training.max_steps, or init(total_steps=...)): end the training loop when "
                "tamp.torch.current_step() reaches tamp.torch.total_steps()")
        if (gradient.dtype != torch.float32 or gradient.layout != torch.strided
                or not gradient.is_contiguous()):  # Attribute and flag reads.
            raise ValueError(_torch_tensors.gradient_refusal(self.names[index], gradient))
        self.client.push(index, _torch_tensors.exported(gradient),
                         stream=_torch_tensors.stream(gradient))

    def finish_step(self, out: List[torch.Tensor], loss: Optional[float] = None) -> bool:
        """Waits for the step's answers into `out`; begins the next step. False when a SYNC
        barrier had dropped this worker: the parameters are the others' replica, `out` is
        not an answer. `loss`: the step's, when known, for the automatic reports."""
        stepped = True
        params = self._exported_params()
        # Server-optimizer mode answers into the parameters themselves.
        answers = (params if out is self.params else
                   [_torch_tensors.exported(tensor) for tensor in out])
        try:
            self.client.wait(answers, stream=_torch_tensors.stream(out[0]))
            self.step += 1
            self.reports.step_completed(self.step, loss)
            if out is self.params:
                self._mark_job_weights()
        except tamp.DroppedError as dropped:
            self.rejoin(str(dropped))
            stepped = False
        except (ValueError, RuntimeError) as error:
            # Raised to the script; the next push or step() rejoins (recover()).
            self.failed = f"step {self.step} failed ({error})"
            raise
        if self.step < self.client.total_steps:
            self.client.begin_step(self.step, params,
                                   stream=_torch_tensors.stream(self.params[0]))
        return stepped

    def rejoin(self, cause: str) -> None:
        """Takes the other workers' replica and goes on at their step (Client.rejoin())."""
        self.step = self.client.rejoin(self._exported_params(), cause,
                                       stream=_torch_tensors.stream(self.params[0]))
        self.reports.count_from_now()
        self._mark_job_weights()

    def recover(self) -> None:
        """Before the first push after a step whose wait raised (a push the servers refused,
        as a non-finite gradient under validation.nonfinite_policy REJECT): rejoins the run at
        the others' step with their replica, so a script that caught the error goes on, and
        says so. RuntimeError naming the failed step where rejoining is refused (server mode
        AGGREGATE, a server gone)."""
        if self.failed is None:
            return
        try:
            self.rejoin(self.failed)
        except (ValueError, RuntimeError) as refused:
            raise RuntimeError(f"tamp.torch: {self.failed}, and this worker cannot go on: "
                               f"{refused}") from None
        self.warn(f"tamp.torch: {self.failed}; rejoined the run at step {self.step} with the "
              "other workers' weights", stacklevel=4)
        self.failed = None
        if self.step < self.client.total_steps:
            self.client.begin_step(self.step, self._exported_params(),
                                   stream=_torch_tensors.stream(self.params[0]))


def _versions(tensors: Sequence[torch.Tensor]) -> List[Tuple[int, int]]:
    """Each tensor's memory and in-place write count (torch's version counter, which a
    detached view shares; the client's writes through DLPack do not move it)."""
    return [(tensor.data_ptr(), tensor._version) for tensor in tensors]

