"""The WorkerEvent lines a tamp.torch worker prints on stdout for `tamp run` (its progress
line and run summary; `tamp summarize` reads them from saved output).

A script reports itself with tamp.torch.report_step/report_eval/report_done, as
examples/pytorch/train.py does. Where it does not, and reports are automatic (under `tamp
run` by default), the worker prints them itself: a STEP per completed step (its wall time
since the previous one; the loss when step(closure) returned one, else none), and a DONE at
the end (shutdown() or the interpreter's exit) with the median step time and the last
accuracy report_eval() gave, if any. A script that calls report_step() takes over the STEP
lines from then on; report_done() the DONE.

Threading: the training thread's (the same as the client's).
"""

import statistics
import time
from typing import Callable, List, Optional


class Reports:
    def __init__(self, client, automatic: bool, epoch_of: Callable[[int], int],
                 emit: Callable[[str], None]):
        self._client = client
        self._automatic = automatic
        self._epoch_of = epoch_of
        self._emit = emit
        self._script_steps = False  # report_step() was called: the script reports steps.
        self._done = False  # A DONE line was printed.
        # The last completed step's automatic STEP line, held until the script has had its
        # chance to report that step itself (printed at the next step, or at the end).
        self._pending: Optional[str] = None
        self._step_ms: List[float] = []  # For DONE's median.
        self._accuracy: Optional[float] = None
        self._last_step_end = time.perf_counter()
        # The last completed step as the client timed it: from the step() before it (where
        # the client began it) to its own end.
        self._client_step_ms = 0.0

    def step_completed(self, completed_steps: int, loss: Optional[float]) -> None:
        """After each completed step (the client's report is that step's)."""
        now = time.perf_counter()
        step_ms = 1000 * (now - self._last_step_end)
        self._last_step_end = now
        self._client_step_ms = step_ms
        if not self._automatic or self._script_steps:
            return
        self._step_ms.append(step_ms)
        self._flush()
        self._pending = self._client.step_event(completed_steps, self._epoch_of(completed_steps),
                                                loss, step_ms, 0.0)

    def count_from_now(self) -> None:
        """The next step's time counts from now (after the start, or a rejoin: a step that
        completed no update counts for none)."""
        self._last_step_end = time.perf_counter()

    def script_step(self, completed_steps: int, loss: float, step_ms: float,
                    thread_cpu_ms: float) -> None:
        if not self._script_steps:  # From now on, the script's.
            self._script_steps = True
            self._pending = None
            self._step_ms.clear()
        self._step_ms.append(step_ms)
        # The script's clock starts later than the client's step (after its evaluation, or
        # the set-up before its first step): that time is no compute of this step.
        outside_ms = max(0.0, self._client_step_ms - step_ms)
        self._emit(self._client.step_event(completed_steps, self._epoch_of(completed_steps),
                                           loss, step_ms, thread_cpu_ms, outside_ms))

    def script_eval(self, completed_steps: int, test_accuracy: float) -> None:
        self._accuracy = test_accuracy
        self._flush()
        self._emit(self._client.eval_event(completed_steps, self._epoch_of(completed_steps),
                                           test_accuracy))

    def script_done(self, completed_steps: int, test_accuracy: Optional[float],
                    step_ms_median: float) -> None:
        self._flush()
        self._done = True
        self._emit(self._client.done_event(completed_steps, test_accuracy, step_ms_median))

    def finish(self, completed_steps: int) -> None:
        """The end of the worker's run: the automatic DONE, unless the script printed one."""
        self._flush()
        if not self._automatic or self._done:
            return
        self._done = True
        median = statistics.median(self._step_ms) if self._step_ms else 0.0
        self._emit(self._client.done_event(completed_steps, self._accuracy, median))

    def _flush(self) -> None:
        if self._pending is not None:
            self._emit(self._pending)
            self._pending = None
