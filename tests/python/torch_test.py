"""tamp.torch in one process: DistributedOptimizer's exact steps and every refusal.

Job as binding_test.py's (1 worker, codec none, SGD at 0.125 without momentum, run by the
servers). The tests share one session (a client that left cannot come back to a 1-worker
SYNC run at step > 0): each leaves the step it took complete, and each refusal must hold
whether or not the session has started.
"""

import contextlib
import io
import json
import os
import socket
import time
import types
import unittest
import warnings

import torch

import tamp
import tamp.torch

LEARNING_RATE = 0.125


class Mlp(torch.nn.Module):
    def __init__(self, hidden=64, dtype=torch.float32):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, hidden).to(dtype)
        self.fc2 = torch.nn.Linear(hidden, 10).to(dtype)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def loss_of(model):
    torch.manual_seed(7)
    x = torch.randn(16, 784)
    return torch.nn.functional.cross_entropy(model(x), torch.randint(0, 10, (16,)))


class TorchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tamp.torch.init(steps_per_epoch=100)
        cls.model = Mlp()
        # lr 1.0: were the wrapped optimizer's step to run, the weights would move 8 times
        # as far as the servers' SGD (0.125) moves them.
        with warnings.catch_warnings(record=True) as cls.setup_warnings:
            warnings.simplefilter("always")
            cls.optimizer = tamp.torch.DistributedOptimizer(
                torch.optim.SGD(cls.model.parameters(), lr=1.0),
                named_parameters=cls.model.named_parameters())
        cls.initial = {name: p.detach().clone() for name, p in cls.model.named_parameters()}

    @classmethod
    def tearDownClass(cls):
        tamp.torch.shutdown()

    def step_warnings(self, set_to_none=True):
        """The warnings of a step: backward (gradients set anew), then step()."""
        self.optimizer.zero_grad(set_to_none=set_to_none)
        loss_of(self.model).backward()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.optimizer.step()
        return [str(w.message) for w in caught]

    def assertRefused(self, error, call, *words):
        with self.assertRaises(error) as raised:
            call()
        for word in words:
            self.assertIn(word, str(raised.exception))

    def test_collectives_need_a_rendezvous_then_reduce_gather_and_broadcast(self):
        # One worker here (tests/python_test.sh's 2-worker run checks the numbers across
        # workers: torch_worker.py). Refusals before anything is initialised.
        saved = {name: os.environ.pop(name, None) for name in ("MASTER_ADDR", "MASTER_PORT")}
        try:
            self.assertFalse(torch.distributed.is_initialized())
            self.assertRefused(RuntimeError, lambda: tamp.torch.allreduce(torch.ones(2)),
                               "allreduce: needs torch.distributed's rendezvous",
                               "MASTER_ADDR and MASTER_PORT are not set", "`tamp run` sets them")
            self.assertRefused(ValueError, lambda: tamp.torch.allreduce(torch.ones(2), op="Adasum"),
                               "Adasum is not supported")
            self.assertRefused(ValueError, lambda: tamp.torch.allreduce(torch.ones(2), average=True,
                                                                        op=tamp.torch.Sum),
                               "not both")
            self.assertRefused(TypeError, lambda: tamp.torch.allreduce([1.0]), "torch.Tensor")
            self.assertRefused(ValueError, lambda: tamp.torch.broadcast(torch.ones(1), 1),
                               "root_rank 1", "0 to 0")
            self.assertFalse(torch.distributed.is_initialized())  # Nothing started.
            with socket.socket() as probe:  # A free port for the rendezvous.
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            values = torch.tensor([1.5, -2.0])
            self.assertTrue(torch.equal(tamp.torch.allreduce(values), values))  # Mean of one.
            self.assertRefused(ValueError, lambda: tamp.torch.allreduce(torch.ones(2, dtype=torch.int64)),
                               "the average of a torch.int64 tensor", "op=tamp.torch.Sum")
            self.assertRefused(ValueError, lambda: tamp.torch.allreduce(torch.ones(2, dtype=torch.bool),
                                                                        op=tamp.torch.Sum),
                               "torch.bool tensors do not travel over gloo", "float32")
            self.assertEqual(tamp.torch.allreduce(torch.tensor([3]), op=tamp.torch.Sum).item(), 3)
            self.assertTrue(torch.equal(tamp.torch.allgather(values), values))
            self.assertTrue(torch.equal(tamp.torch.broadcast(values, 0), values))
            in_place = values.clone()
            self.assertIs(tamp.torch.allreduce_(in_place), in_place)
            tamp.torch.barrier()
            self.assertEqual(torch.distributed.get_backend(), "gloo")
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def test_start_copies_the_servers_seeded_init(self):
        # torch initialises biases uniformly, not to zero: zeros are the servers'.
        self.assertTrue(torch.all(self.initial["fc1.bias"] == 0))
        bound = (6 / 784) ** 0.5
        self.assertLessEqual(self.initial["fc1.weight"].abs().max().item(), bound)
        self.assertGreater(self.initial["fc1.weight"].abs().max().item(), 0.95 * bound)

    def test_steps_apply_the_servers_sgd_exactly(self):
        model, optimizer = self.model, self.optimizer
        for _ in range(2):
            before = [p.detach().clone() for p in model.parameters()]
            optimizer.zero_grad()
            loss_of(model).backward()
            grads = [p.grad.clone() for p in model.parameters()]
            optimizer.step()
            for (name, param), old, grad in zip(model.named_parameters(), before, grads):
                torch.testing.assert_close(param.detach(), old - LEARNING_RATE * grad,
                                           rtol=0, atol=0, msg=name)

    def test_settings_the_servers_do_not_share_are_named(self):
        messages = [str(w.message) for w in self.setup_warnings]
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("lr=1.0 (the servers': 0.125)", messages[0])
        self.assertNotIn("momentum", messages[0])  # 0 on both sides.
        adam = torch.optim.Adam(Mlp().parameters(), lr=0.125)
        servers = tamp.placement().config.optimizer
        self.assertEqual(tamp._torch_optimizer.unused_settings(adam, servers),
                         ["Adam itself (the servers run sgd)"])

    def test_a_changed_learning_rate_is_named_once(self):
        optimizer = self.optimizer
        optimizer.param_groups[0]["lr"] = 0.5  # As an LR scheduler would.
        try:
            for expected_warnings in (1, 0):
                caught = self.step_warnings()
                self.assertEqual(len(caught), expected_warnings)
                if caught:
                    self.assertIn("learning rate changed (param_groups[0] to 0.5: an LR "
                                  "scheduler?)", caught[0])
        finally:
            optimizer.param_groups[0]["lr"] = 1.0

    def test_a_changed_learning_rate_of_a_later_group_is_named(self):
        model = self.model
        groups = torch.optim.SGD([{"params": [model.fc1.weight, model.fc1.bias]},
                                  {"params": [model.fc2.weight, model.fc2.bias], "lr": 0.25}],
                                 lr=1.0)
        optimizer = tamp.torch.DistributedOptimizer(groups,
                                                    named_parameters=model.named_parameters())
        try:
            optimizer.param_groups[1]["lr"] = 0.125  # A scheduler of the second group alone.
            optimizer.zero_grad(set_to_none=True)
            loss_of(model).backward()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                optimizer.step()
            changed = [str(w.message) for w in caught if "an LR scheduler" in str(w.message)]
            self.assertEqual(len(changed), 1)
            self.assertIn("changed (param_groups[1] to 0.125: an LR scheduler?)", changed[0])
        finally:
            tamp.torch.DistributedOptimizer(self.optimizer,
                                            named_parameters=model.named_parameters())

    def test_broadcast_optimizer_state_says_the_servers_state_counts(self):
        fresh = torch.optim.SGD(self.model.parameters(), lr=0.0, momentum=0.9)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tamp.torch.broadcast_optimizer_state(fresh)  # The servers' optimizer steps.
        self.assertEqual(caught, [])
        loaded = torch.optim.SGD(self.model.parameters(), lr=0.0, momentum=0.9)
        for param in self.model.parameters():
            loaded.state[param]["momentum_buffer"] = torch.zeros_like(param)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tamp.torch.broadcast_optimizer_state(loaded)  # A checkpoint's state, unused.
        self.assertEqual(len(caught), 1)
        self.assertIn("goes unused: the servers run the config's optimizer",
                      str(caught[0].message))
        self.assertRefused(ValueError, lambda: tamp.torch.broadcast_optimizer_state(
            loaded, root_rank=1), "root_rank 1")
        self.assertEqual(tamp.torch.local_rank(), 0)

    def test_broadcast_parameters_of_the_registered_tensors_is_accepted(self):
        before = [p.detach().clone() for p in self.model.parameters()]
        tamp.torch.broadcast_parameters(self.model.state_dict(), root_rank=0)
        tamp.torch.broadcast_parameters(self.model.named_parameters(), root_rank=0)
        for param, old in zip(self.model.parameters(), before):
            self.assertTrue(torch.equal(param.detach(), old))  # Started once, not again.
        self.assertRefused(ValueError, lambda: tamp.torch.broadcast_parameters(
            self.model.state_dict(), root_rank=1), "root_rank 1")

    def test_backward_twice_refused_and_step_applies_the_first(self):
        model, optimizer = self.model, self.optimizer
        before = [p.detach().clone() for p in model.parameters()]
        optimizer.zero_grad()
        loss_of(model).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        self.assertRefused(RuntimeError, lambda: loss_of(model).backward(), '"fc2.bias"',
                           "2 times in one step", "backward_passes_per_step=1")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            optimizer.step()
        self.assertEqual([str(w.message) for w in caught], [])  # No clipping to name.
        for (name, param), old, grad in zip(model.named_parameters(), before, grads):
            torch.testing.assert_close(param.detach(), old - LEARNING_RATE * grad, rtol=0,
                                       atol=0, msg=name)

    def test_reports_are_the_workers_events(self):
        model, optimizer = self.model, self.optimizer
        # Outside the script's step (its clock starts after this): no compute of the step,
        # though the client's step began before it.
        time.sleep(0.25)
        optimizer.zero_grad()
        loss_of(model).backward()
        optimizer.step()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            tamp.torch.report_step(0.5, 12.25, 3.5)
            tamp.torch.report_eval(0.75)
            tamp.torch.report_done(0.75, 11.5)
        step, evaluation, done = [json.loads(line) for line in printed.getvalue().splitlines()]
        completed = tamp.torch.current_step()
        raw = 4 * sum(p.numel() for p in model.parameters())
        self.assertEqual((step["kind"], step["worker"], step["step"], step["total_steps"]),
                         ("STEP", 0, completed, 200))
        self.assertEqual((step["loss"], step["step_ms"], step["epoch"], step["thread_cpu_ms"]),
                         (0.5, 12.25, 0, 3.5))
        # The 250 ms before the script's step are not its compute (they were, counted from
        # the client's begin_step, once: compute_ms above the whole step_ms).
        self.assertLess(step["compute_ms"], 100)
        # Codec none: each shard's payloads carry the step's raw bytes, plus their headers.
        self.assertEqual(step["step_raw_bytes_pushed"], raw)
        self.assertEqual(len(step["step_shard_bytes_pushed"]), 2)
        self.assertGreater(sum(step["step_shard_bytes_pushed"]), raw)
        self.assertLess(sum(step["step_shard_bytes_pushed"]), raw + 1024)
        self.assertEqual(step["step_shard_bytes_pulled"], step["step_shard_bytes_pushed"])
        self.assertGreaterEqual(step["bytes_pushed"], sum(step["step_shard_bytes_pushed"]))
        self.assertEqual((evaluation["kind"], evaluation["step"], evaluation["test_accuracy"]),
                         ("EVAL", completed, 0.75))
        self.assertEqual((done["kind"], done["step"], done["epoch"], done["test_accuracy"],
                          done["step_ms_median"]), ("DONE", completed, 0, 0.75, 11.5))
        self.assertEqual(done["bytes_pushed"], step["bytes_pushed"])
        self.assertRefused(ValueError, lambda: tamp.torch.report_step(0.5, -1.0), "step_ms")
        self.assertRefused(ValueError, lambda: tamp.torch.report_step(0.5, 1.0, float("nan")),
                           "thread_cpu_ms")
        self.assertRefused(ValueError, lambda: tamp.torch.report_eval(1.5), "test_accuracy")
        self.assertRefused(ValueError, lambda: tamp.torch.report_done(0.5, float("nan")),
                           "step_ms_median")

    def test_a_later_distributed_optimizer_takes_over_between_steps(self):
        model, first = self.model, self.optimizer
        first.zero_grad()
        loss_of(model).backward()  # Inside a step: no other may take over.
        self.assertRefused(RuntimeError, lambda: tamp.torch.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.125),
            named_parameters=model.named_parameters()), "inside a step", "step() first")
        first.step()
        later = tamp.torch.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.125),
                                                named_parameters=model.named_parameters())
        type(self).optimizer = later  # The other tests' from now on.
        self.assertRefused(RuntimeError, first.step, "replaced this one")
        self.assertRefused(RuntimeError, first.synchronize, "replaced this one")
        self.test_steps_apply_the_servers_sgd_exactly()  # One push per tensor: later's.

    def test_wrapping_the_wrapped_optimizer_again_hooks_anew(self):
        again = tamp.torch.DistributedOptimizer(self.optimizer,
                                                named_parameters=self.model.named_parameters())
        self.assertIs(again, self.optimizer)
        self.assertIs(type(again).__base__, torch.optim.SGD)  # Not a subclass of a subclass.
        # One push per tensor and one exchange per step() (a step() that resolved to itself
        # would exchange again and again).
        step = tamp.torch.current_step()
        self.test_steps_apply_the_servers_sgd_exactly()
        self.assertEqual(tamp.torch.current_step(), step + 2)

    def test_arguments_of_the_wrong_kind_are_named(self):
        self.assertRefused(TypeError, lambda: tamp.torch.DistributedOptimizer(
            self.model, named_parameters=self.model.named_parameters()),
            "expected a torch.optim.Optimizer, got a Mlp")
        for bad, words in ((self.model.parameters(), "(name, tensor) pairs"),
                           (["fc1.weight"], "got a str"), (3, "got a int")):
            self.assertRefused(TypeError, lambda: tamp.torch.DistributedOptimizer(
                torch.optim.SGD(self.model.parameters(), lr=0.125), named_parameters=bad),
                "named_parameters", words)
        self.assertRefused(TypeError, lambda: tamp.torch.broadcast_parameters(self.model),
                           "params is a Mlp module", "named_parameters()")
        self.assertRefused(TypeError, lambda: tamp.torch.CommHookState(self.model.parameters()),
                           "CommHookState: named_parameters", "(name, tensor) pairs")
        used_up = self.model.named_parameters()
        list(used_up)  # As a first call would have.
        self.assertRefused(ValueError, lambda: tamp.torch.broadcast_parameters(used_up),
                           "broadcast_parameters: params holds no tensors",
                           "pass a fresh model.named_parameters()")
        self.test_steps_apply_the_servers_sgd_exactly()  # Still the job's one optimizer.

    def test_init_while_the_job_runs_is_refused(self):
        placement = tamp.placement()
        self.assertRefused(RuntimeError, lambda: tamp.torch.init(steps_per_epoch=7),
                           "job is running", "registered 4 tensors", "shutdown() first")
        self.assertIs(tamp.placement(), placement)
        self.assertEqual(tamp.torch._run["steps_per_epoch"], 100)
        self.test_steps_apply_the_servers_sgd_exactly()

    def test_model_other_than_the_jobs_refused(self):
        other = Mlp(hidden=32)
        self.assertRefused(ValueError, lambda: tamp.torch.DistributedOptimizer(
            torch.optim.SGD(other.parameters(), lr=1.0),
            named_parameters=other.named_parameters()), '"fc1.weight"', "[32, 784]", "[64, 784]")

    def test_tensor_lists_must_agree(self):
        other = Mlp()
        self.assertRefused(ValueError, lambda: tamp.torch.broadcast_parameters(
            dict(list(self.model.state_dict().items())[:3])), '"fc2.bias"', "missing")
        self.assertRefused(ValueError, lambda: tamp.torch.broadcast_parameters(
            other.state_dict()), '"fc1.weight"', "not the registered tensor")

    def test_a_broadcast_past_the_first_step_of_the_jobs_weights_says_nothing(self):
        # As a resumed run's script does: its parameters hold what the client wrote into them
        # (the start's weights, each step's update), so the broadcast losing nothing to
        # having no effect is not worth a warning.
        model, optimizer = self.model, self.optimizer
        optimizer.zero_grad(set_to_none=True)
        loss_of(model).backward()
        optimizer.step()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tamp.torch.broadcast_parameters(model.named_parameters(), root_rank=0)
        self.assertEqual([str(w.message) for w in caught], [])

    def test_state_dict_with_buffers_and_tied_weights_is_taken(self):
        # Horovod's broadcast_parameters(model.state_dict()) after DistributedOptimizer(),
        # past the first step: buffers are left as they are (a warning names them), a tied
        # weight's second name is the same memory; the job's tensors are checked as ever.
        before = [p.detach().clone() for p in self.model.parameters()]
        state = dict(self.model.state_dict())
        state["bn.running_mean"] = torch.zeros(4)
        state["bn.num_batches_tracked"] = torch.zeros((), dtype=torch.int64)
        state["tied.weight"] = self.model.fc1.weight
        self.model.load_state_dict(self.model.state_dict())  # A checkpoint loaded mid-run.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tamp.torch.broadcast_parameters(state, root_rank=0)
        self.assertEqual(len(caught), 1)
        self.assertIn("rank 0's parameters are not sent (the servers hold the job's "
                      "weights); a worker whose parameters changed since (a checkpoint loaded "
                      "mid-run) now differs from the others to the end of the run "
                      "(training.resync_steps is 0: no resync); 2 entries that are not the "
                      "job's tensors are left as each worker has them", str(caught[0].message))
        self.assertIn("bn.running_mean, bn.num_batches_tracked", str(caught[0].message))
        for param, old in zip(self.model.parameters(), before):
            self.assertTrue(torch.equal(param.detach(), old))
        state["fc2.bias"] = state["fc2.bias"].clone()
        self.assertRefused(ValueError, lambda: tamp.torch.broadcast_parameters(state),
                           '"fc2.bias"', "not the registered tensor")

    def test_a_first_broadcast_registers_trainable_memory_once(self):
        model = Mlp()
        model.fc2.weight.requires_grad_(False)
        model.tied = model.fc1  # Two names for fc1's tensors in a state_dict.
        entries, frozen = tamp.torch._trainable_entries(list(model.named_parameters()))
        self.assertEqual([name for name, _ in entries], ["fc1.weight", "fc1.bias", "fc2.bias"])
        self.assertEqual(frozen, ["fc2.weight"])
        entries, frozen = tamp.torch._trainable_entries(list(model.state_dict().items()))
        self.assertEqual([name for name, _ in entries],
                         ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"])
        self.assertEqual(frozen, [])

    def test_a_channels_last_tensor_is_refused_saying_so(self):
        weight = torch.zeros(8, 3, 5, 5).to(memory_format=torch.channels_last)
        self.assertRefused(ValueError,
                           lambda: tamp._torch_tensors.check_tensor("conv.weight", weight),
                           '"conv.weight"', "not contiguous", "torch.channels_last")
        self.assertRefused(ValueError, lambda: tamp._torch_tensors.check_tensor(
            "fc.weight", torch.zeros(4, 6).t()), '"fc.weight"', "not contiguous")

    def test_the_registered_memory_under_other_names_is_taken(self):
        # As a DistributedOptimizer without named_parameters registers them ("param.G.I"),
        # then Horovod's broadcast of the model's state_dict: the same memory, other names.
        renamed = [(f"param.0.{i}", p) for i, p in enumerate(self.model.parameters())]
        job, others = tamp.torch._session.job_entries(renamed + renamed[:1])
        self.assertEqual([name for name, _ in job], ["fc1.weight", "fc1.bias", "fc2.weight",
                                                     "fc2.bias"])
        self.assertEqual(others, [])
        job, _ = tamp.torch._session.job_entries(renamed[:1] + renamed[2:])
        self.assertEqual([name for name, _ in job], ["fc1.weight"])  # Up to the one missing.
        tamp.torch.broadcast_parameters(renamed)

    def test_clipping_after_backward_is_named_once_and_changes_nothing(self):
        model = self.model
        # Hooked anew: the once of an earlier test's late change (a refused second backward
        # adds to a pushed gradient) does not carry over.
        optimizer = tamp.torch.DistributedOptimizer(self.optimizer,
                                                    named_parameters=model.named_parameters())
        for attempt in range(2):
            before = [p.detach().clone() for p in model.parameters()]
            optimizer.zero_grad()
            loss_of(model).backward()
            grads = [p.grad.clone() for p in model.parameters()]
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-6)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                optimizer.step()
            named = [str(w.message) for w in caught if "after backward pushed it" in
                     str(w.message)]
            self.assertEqual(len(named), 1 if attempt == 0 else 0, named)
            if named:
                self.assertIn("compression { clip_norm }", named[0])
                self.assertEqual(caught[0].filename, __file__)  # The script's line.
            for (name, param), old, grad in zip(model.named_parameters(), before, grads):
                torch.testing.assert_close(param.detach(), old - LEARNING_RATE * grad,
                                           rtol=0, atol=0, msg=name)

    def test_non_fp32_model_refused(self):
        other = Mlp(dtype=torch.float64)
        for params in (other.state_dict(), other.named_parameters()):
            with self.assertRaises(ValueError) as raised:
                tamp.torch.broadcast_parameters(params)
            for words in ('"fc1.weight"', "float32", "float64", "model.float()"):
                self.assertIn(words, str(raised.exception))
            self.assertNotIn("buffers", str(raised.exception))  # Not about the dict.

    def test_a_sparse_gradient_is_refused_naming_the_tensor_and_changes_nothing(self):
        model = self.model
        self.optimizer.zero_grad(set_to_none=True)
        # As nn.Embedding(sparse=True) does: fc1.weight's rows as an embedding table.
        rows = torch.nn.functional.embedding(torch.tensor([[0, 3]]), model.fc1.weight,
                                             sparse=True)
        self.assertRefused(ValueError, lambda: rows.sum().backward(), '"fc1.weight"',
                           "sparse", "sparse=False")
        # The refused push counted for nothing: the step goes on as any other.
        self.test_steps_apply_the_servers_sgd_exactly()

    def test_a_refused_sparse_gradient_made_dense_as_told_completes_the_step(self):
        model, optimizer = self.model, self.optimizer
        before = model.fc1.weight.detach().clone()
        optimizer.zero_grad(set_to_none=True)
        rows = torch.nn.functional.embedding(torch.tensor([1, 5, 5]), model.fc1.weight,
                                             sparse=True)
        self.assertRefused(ValueError, lambda: rows.sum().backward(), '"fc1.weight"',
                           "param.grad = param.grad.to_dense()")
        model.fc1.weight.grad = model.fc1.weight.grad.to_dense()  # What the message says.
        optimizer.step()
        expected = before.clone()
        expected[1] -= LEARNING_RATE
        expected[5] -= 2 * LEARNING_RATE  # Row 5 taken twice.
        torch.testing.assert_close(model.fc1.weight.detach(), expected, rtol=0, atol=0)

    def test_a_model_converted_after_registration_is_refused_naming_the_tensor(self):
        model, optimizer = self.model, self.optimizer
        model.fc2.double()  # torch < 2.1 drops fc2's gradient accumulators, and the hooks.
        try:
            optimizer.zero_grad(set_to_none=True)
            model.fc2(torch.relu(model.fc1(torch.randn(4, 784))).double()).sum().backward()
            self.assertRefused(ValueError, optimizer.step, '"fc2.', "torch.float64",
                               "model.float()", "replaced after registration")
        finally:
            model.fc2.float()  # New memory again, fp32, and its gradients.
        optimizer.step()  # Follows the memory, pushes fc2's gradients, and hooks it anew.
        optimizer.zero_grad(set_to_none=True)
        loss_of(model).backward()
        self.assertEqual(optimizer._tamp_passes_done, [1, 1, 1, 1])  # Each hook pushed.
        optimizer.step()
        self.test_steps_apply_the_servers_sgd_exactly()

    def test_replaced_parameter_memory_takes_the_servers_updates(self):
        model, optimizer = self.model, self.optimizer
        old_memory = model.fc2.bias.data_ptr()
        model.fc2.bias.data = model.fc2.bias.data.clone()  # As re-initialising code does.
        self.assertNotEqual(model.fc2.bias.data_ptr(), old_memory)
        self.test_steps_apply_the_servers_sgd_exactly()  # Into the new memory.
        # Memory that does not fit is refused by step(), naming it; the step stays open.
        saved = model.fc2.bias.data
        model.fc2.bias.data = torch.zeros(20)[::2]
        try:
            optimizer.zero_grad(set_to_none=True)
            loss_of(model).backward()
            self.assertRefused(ValueError, optimizer.step, '"fc2.bias"', "not contiguous",
                               "replaced after registration")
        finally:
            model.fc2.bias.data = saved
        before = model.fc2.bias.detach().clone()
        optimizer.step()
        self.assertFalse(torch.equal(model.fc2.bias.detach(), before))

    def test_a_tied_weight_under_two_names_is_one_tensor_of_the_job(self):
        # named_parameters gathered from two modules sharing fc1.weight: pushed twice, it was
        # stepped twice.
        named = list(self.model.named_parameters()) + [("tied.weight", self.model.fc1.weight)]
        job = tamp.torch._torch_optimizer.job_parameters(
            torch.optim.SGD(self.model.parameters(), lr=1.0), named)
        self.assertEqual([name for name, _ in job],
                         ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"])

    def test_horovods_order_names_the_optimizers_parameters_by_memory(self):
        # Without named_parameters, after a registration (Horovod scripts broadcast the
        # state_dict first): the registered names, where "param.0.0" was refused.
        self.assertEqual(
            [name for name, _ in tamp.torch._session.names_by_memory(
                [("param.0.0", self.model.fc1.weight), ("param.0.9", torch.zeros(2))])],
            ["fc1.weight", "param.0.9"])
        self.assertIs(tamp.torch.DistributedOptimizer(self.optimizer), self.optimizer)
        self.test_steps_apply_the_servers_sgd_exactly()

    def test_a_state_dict_entry_missing_from_the_optimizer_is_named_with_both_causes(self):
        # A job registered from a state_dict (Horovod's order) with "pos" first, which the
        # optimizer's parameters leave out: frozen, a buffer, or an optimizer over part of
        # the model; the state_dict does not say which, so the refusal names "pos" and both.
        pos = torch.zeros(12, 64)
        job = types.SimpleNamespace(
            names=["pos", "fc1.weight"], params=[pos, self.model.fc1.weight.detach()],
            trainable=[False, False], registered_by="broadcast_parameters")
        named = [("fc1.weight", self.model.fc1.weight)]
        with self.assertRaises(tamp.torch._torch_session.NotInOptimizerError) as raised:
            tamp.torch._torch_session.Session.check_same(job, named, "DistributedOptimizer")
        message = str(raised.exception)
        self.assertIn('"pos" [12, 64], tensor 0 of the job as broadcast_parameters() '
                      "registered it from a state_dict, is not among this optimizer's "
                      "parameters: either it is a frozen parameter", message)
        self.assertIn("call DistributedOptimizer() first", message)
        self.assertIn("or this optimizer leaves out a trainable parameter", message)
        # Registered trainable (named_parameters()): the plain mismatch, as before.
        job.trainable = [True, True]
        with self.assertRaises(ValueError) as raised:
            tamp.torch._torch_session.Session.check_same(job, named, "DistributedOptimizer")
        self.assertNotIsInstance(raised.exception,
                                 tamp.torch._torch_session.NotInOptimizerError)
        self.assertIn('the job registered "pos" [12, 64] there', str(raised.exception))

    def test_add_param_group_after_registration_is_refused_changing_nothing(self):
        groups = len(self.optimizer.param_groups)
        self.assertRefused(RuntimeError, lambda: self.optimizer.add_param_group(
            {"params": [torch.nn.Parameter(torch.zeros(3))]}),
            "add_param_group() after DistributedOptimizer() registered the job's tensors")
        self.assertEqual(len(self.optimizer.param_groups), groups)

    def test_a_parameter_unfrozen_after_registration_does_not_train_and_is_named_once(self):
        extra = torch.nn.Parameter(torch.ones(3), requires_grad=False)  # Frozen: not the job's.
        optimizer = tamp.torch.DistributedOptimizer(
            torch.optim.SGD(list(self.model.parameters()) + [extra], lr=1.0),
            named_parameters=list(self.model.named_parameters()) + [("extra", extra)])
        try:
            extra.requires_grad_(True)  # Progressive unfreezing.
            for expected_warnings in (1, 0):
                optimizer.zero_grad(set_to_none=True)
                (loss_of(self.model) + extra.sum()).backward()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    optimizer.step()
                said = [str(w.message) for w in caught if "were frozen when" in str(w.message)]
                self.assertEqual(len(said), expected_warnings, said)
                if said:
                    self.assertIn("1 parameters of the optimizer (shapes [3])", said[0])
                    self.assertEqual(caught[0].filename, __file__)
                self.assertIsNone(extra.grad)
                self.assertTrue(torch.equal(extra.detach(), torch.ones(3)))
        finally:  # The class's optimizer steps the job again.
            tamp.torch.DistributedOptimizer(self.optimizer,
                                            named_parameters=self.model.named_parameters())

    def test_settings_per_param_group_are_said_to_need_aggregate_mode(self):
        model = self.model
        groups = [{"params": [model.fc1.weight, model.fc1.bias], "lr": 0.125},
                  {"params": [model.fc2.weight, model.fc2.bias], "lr": 0.5}]
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                tamp.torch.DistributedOptimizer(torch.optim.SGD(groups, lr=0.125),
                                                named_parameters=model.named_parameters())
            said = [str(w.message) for w in caught]
            self.assertEqual(len(said), 1, said)
            self.assertIn("param_groups[1] lr=0.5 (the servers': 0.125)", said[0])
            self.assertIn("holds one setting for every tensor, so settings per param_groups "
                          "need server { mode: AGGREGATE }", said[0])
        finally:  # The class's optimizer steps the job again.
            tamp.torch.DistributedOptimizer(self.optimizer,
                                            named_parameters=self.model.named_parameters())

    def test_horovods_arguments_are_taken_or_refused_by_name(self):
        def wrap_again(**horovod):
            return tamp.torch.DistributedOptimizer(
                self.optimizer, named_parameters=self.model.named_parameters(), **horovod)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            wrap_again(compression=tamp.torch.Compression.none, op=tamp.torch.Average,
                       gradient_predivide_factor=2.0, num_groups=3)
            self.assertEqual(caught, [])
            wrap_again(compression=tamp.torch.Compression.fp16)
        self.assertEqual(len(caught), 1)
        self.assertIn("compression=Compression.fp16 is Horovod's; Tamp compresses as the "
                      "config's compression section says", str(caught[0].message))
        self.assertEqual(caught[0].filename, __file__)
        self.assertRefused(ValueError, lambda: wrap_again(op=tamp.torch.Sum), "op='Sum'",
                           "Tamp averages")
        self.assertRefused(ValueError, lambda: wrap_again(gradient_predivide_factor=0),
                           "gradient_predivide_factor must be a number > 0")
        self.assertRefused(TypeError, lambda: wrap_again(compression="bf16"),
                           "compression='bf16'")
        self.test_steps_apply_the_servers_sgd_exactly()

    def test_sparse_as_dense_pushes_a_sparse_gradient_dense(self):
        model = self.model
        # fc1.weight [64, 784] as an embedding table of 64 rows: a sparse gradient.
        rows = torch.tensor([1, 5, 5])
        optimizer = tamp.torch.DistributedOptimizer(
            self.optimizer, named_parameters=model.named_parameters(), sparse_as_dense=True)
        try:
            before = model.fc1.weight.detach().clone()
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.embedding(rows, model.fc1.weight, sparse=True).sum().backward()
            optimizer.step()
            expected = before.clone()
            expected[1] -= LEARNING_RATE
            expected[5] -= 2 * LEARNING_RATE  # Row 5 taken twice.
            torch.testing.assert_close(model.fc1.weight.detach(), expected, rtol=0, atol=0)
        finally:
            tamp.torch.DistributedOptimizer(self.optimizer,
                                            named_parameters=model.named_parameters())
        sparse = torch.zeros(2, 3).to_sparse()
        self.assertIn("DistributedOptimizer(sparse_as_dense=True)",
                      tamp._torch_tensors.gradient_refusal("emb.weight", sparse))

    def test_a_parameter_frozen_after_registration_is_named_once(self):
        model = self.model
        model.fc2.bias.requires_grad_(False)
        try:
            for expected_warnings in (1, 0):
                before = model.fc2.bias.detach().clone()
                # torch 1.13's default zero_grad() leaves the frozen parameter a zeroed .grad:
                # frozen all the same (the warning depended on set_to_none=True).
                caught = self.step_warnings(set_to_none=False)
                self.assertEqual(len(caught), expected_warnings)
                if caught:
                    self.assertIn('"fc2.bias" frozen', caught[0])
                    self.assertIn("server { mode: AGGREGATE }", caught[0])
                # SGD without momentum or decay on the zeros pushed for it.
                self.assertTrue(torch.equal(model.fc2.bias.detach(), before))
        finally:
            model.fc2.bias.requires_grad_(True)

    def test_dgc_momentum_refuses_a_wrapped_momentum_in_aggregate_mode(self):
        text = ('version: 1 name: "t" cluster { num_servers: 1 num_workers: 2 } '
                'model { kind: MLP hidden: [8] init_seed: 1 } data { batch_size: 4 } '
                'training { epochs: 1 } server { mode: AGGREGATE } compression { '
                'default_compression { push { name: "topk" ratio: 0.5 } '
                'push_feedback { kind: DGC_MOMENTUM } } }')
        config = tamp.Config.from_text(text)
        self.assertEqual((config.aggregates, config.dgc_momentum), (True, True))
        params = [torch.nn.Parameter(torch.zeros(3))]
        check = tamp._torch_optimizer.check_momentum_applied_once
        self.assertRefused(ValueError, lambda: check(
            torch.optim.SGD(params, lr=0.1, momentum=0.9), config), "SGD has momentum=0.9",
            "DGC_MOMENTUM", "momentum=0")
        self.assertRefused(ValueError, lambda: check(torch.optim.Adam(params), config),
                           "Adam has betas[0]=0.9")
        check(torch.optim.SGD(params, lr=0.1), config)  # Plain SGD, as DGC's.
        # The servers' optimizer steps in the other mode (the config check's business), and
        # RESIDUAL keeps no momentum.
        check(torch.optim.SGD(params, lr=0.1, momentum=0.9),
              tamp.Config.from_text(text.replace("server { mode: AGGREGATE } ",
                                                 "optimizer { learning_rate: 0.1 } ")))
        check(torch.optim.SGD(params, lr=0.1, momentum=0.9),
              tamp.Config.from_text(text.replace("DGC_MOMENTUM", "RESIDUAL")))

    def test_comm_hook_needs_aggregate_mode(self):
        self.assertRefused(RuntimeError, lambda: tamp.torch.CommHookState(
            named_parameters=self.model.named_parameters()), "AGGREGATE")
        self.assertRefused(RuntimeError, tamp.torch.CommHookState, "AGGREGATE")


if __name__ == "__main__":
    unittest.main()
