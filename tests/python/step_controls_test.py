"""DistributedOptimizer's Horovod step controls in one process, exact to the bit.

Job as torch_test.py's (1 worker, codec none, SGD at 0.125 without momentum, run by the
servers), with DistributedOptimizer(backward_passes_per_step=2): gradient accumulation,
a parameter that gets no gradient (pushed as zeros), synchronize() and skip_synchronize().
The model has a frozen parameter (requires_grad False) in the optimizer, as
`optim(model.parameters())` puts it there: it is not a job tensor and never moves.
The tests share one session; each leaves the step it took complete.
"""

import unittest
import warnings

import torch

import tamp
import tamp.torch

LEARNING_RATE = 0.125
PASSES = 2


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(784, 64)
        self.fc2 = torch.nn.Linear(64, 10)
        self.scale = torch.nn.Parameter(torch.full((10,), 0.5), requires_grad=False)

    def forward(self, x, skip_fc2=False):
        hidden = torch.relu(self.fc1(x))
        return hidden[:, :10] if skip_fc2 else self.fc2(hidden) * self.scale


def loss_of(model, seed, skip_fc2=False):
    torch.manual_seed(seed)
    x = torch.randn(16, 784)
    return torch.nn.functional.cross_entropy(model(x, skip_fc2), torch.randint(0, 10, (16,)))


class StepControlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tamp.torch.init(steps_per_epoch=100)
        cls.model = Mlp()
        cls.optimizer = tamp.torch.DistributedOptimizer(
            torch.optim.SGD(cls.model.parameters(), lr=1.0),
            named_parameters=cls.model.named_parameters(), backward_passes_per_step=PASSES)

    @classmethod
    def tearDownClass(cls):
        tamp.torch.shutdown()

    def snapshot(self):
        return {name: p.detach().clone() for name, p in self.model.named_parameters()}

    def assertMovedBy(self, before, grads):
        """Each trainable parameter is exactly its value before minus 0.125 x its pushed
        gradient; the frozen one has not moved."""
        for name, param in self.model.named_parameters():
            moved = before[name] - LEARNING_RATE * grads[name] if param.requires_grad else 0.5
            torch.testing.assert_close(param.detach(), torch.broadcast_to(
                torch.as_tensor(moved), param.shape), rtol=0, atol=0, msg=name)

    def accumulate(self, seeds, skip_fc2=False):
        """zero_grad, then one backward per seed; the accumulated gradients (None: none)."""
        self.optimizer.zero_grad(set_to_none=True)
        for seed in seeds:
            loss_of(self.model, seed, skip_fc2).backward()
        return {name: None if p.grad is None else p.grad.clone()
                for name, p in self.model.named_parameters() if p.requires_grad}

    def test_gradients_of_the_passes_are_summed_and_pushed_once(self):
        before = self.snapshot()
        grads = self.accumulate([1, 2])
        separately = []
        for seed in (1, 2):
            reference = Mlp()
            reference.load_state_dict(self.model.state_dict())
            loss_of(reference, seed).backward()
            separately.append({n: p.grad for n, p in reference.named_parameters()
                               if p.requires_grad})
        for name in grads:
            torch.testing.assert_close(grads[name], separately[0][name] + separately[1][name],
                                       msg=name)
        self.optimizer.step()
        self.assertMovedBy(before, grads)

    def test_a_pass_too_many_is_refused_and_step_applies_the_first_passes(self):
        before = self.snapshot()
        grads = self.accumulate([3, 4])
        with self.assertRaises(RuntimeError) as raised:
            loss_of(self.model, 5).backward()
        self.assertIn('"fc2.bias"', str(raised.exception))
        self.assertIn("backward_passes_per_step=2", str(raised.exception))
        self.optimizer.step()
        self.assertMovedBy(before, grads)

    def test_fewer_passes_push_what_accumulated(self):
        before = self.snapshot()
        grads = self.accumulate([6])
        self.optimizer.step()
        self.assertMovedBy(before, grads)

    def test_a_parameter_without_gradient_is_pushed_as_zeros(self):
        before = self.snapshot()
        grads = self.accumulate([7, 8], skip_fc2=True)
        self.assertIsNone(grads["fc2.weight"])
        self.optimizer.step()
        zeros = {name: torch.zeros_like(before[name]) for name in grads}
        self.assertMovedBy(before, {name: zeros[name] if g is None else g
                                    for name, g in grads.items()})
        self.assertTrue(torch.equal(self.model.fc2.weight.grad, zeros["fc2.weight"]))

    def test_synchronize_applies_the_update_and_step_does_not_wait_again(self):
        before = self.snapshot()
        grads = self.accumulate([9, 10])
        step = tamp.torch.current_step()
        self.optimizer.synchronize()
        self.assertMovedBy(before, grads)
        self.assertEqual(tamp.torch.current_step(), step + 1)
        self.optimizer.synchronize()  # Once per step: no second exchange.
        with self.optimizer.skip_synchronize():
            self.optimizer.step()
        self.assertMovedBy(before, grads)
        self.assertEqual(tamp.torch.current_step(), step + 1)

    def test_clipping_after_synchronize_is_named_as_changing_nothing(self):
        # Horovod's recipe clips the mean between synchronize() and step(); here the servers'
        # update has been applied by then (a user's clipped run matched the unclipped one).
        before = self.snapshot()
        grads = self.accumulate([13, 14])
        self.optimizer.synchronize()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1e-3)
        self.optimizer._tamp_late_change_named = False  # Once per optimizer: this test's.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with self.optimizer.skip_synchronize():
                self.optimizer.step()
        self.assertEqual(len(caught), 1, [str(w.message) for w in caught])
        self.assertIn("needs server { mode: AGGREGATE }: in server-optimizer mode "
                      "synchronize() has applied the servers' update", str(caught[0].message))
        self.assertEqual(caught[0].filename, __file__)  # The script's step().
        self.assertMovedBy(before, grads)  # By the unclipped gradients.

    def test_step_under_skip_synchronize_without_synchronize_is_refused(self):
        before = self.snapshot()
        grads = self.accumulate([11, 12])
        with self.assertRaises(RuntimeError) as raised:
            with self.optimizer.skip_synchronize():
                self.optimizer.step()
        self.assertIn("synchronize() first", str(raised.exception))
        self.assertTrue(all(torch.equal(p.detach(), before[name])
                            for name, p in self.model.named_parameters()))
        self.optimizer.step()
        self.assertMovedBy(before, grads)

    def test_a_trainable_parameter_the_names_miss_is_refused(self):
        extra = torch.nn.Parameter(torch.zeros(3, 2))
        with self.assertRaises(ValueError) as raised:
            tamp.torch.DistributedOptimizer(
                torch.optim.SGD(list(self.model.parameters()) + [extra], lr=1.0),
                named_parameters=self.model.named_parameters())
        self.assertIn("shape [3, 2]", str(raised.exception))
        self.assertIn("not in named_parameters", str(raised.exception))

    def test_backward_passes_per_step_is_validated(self):
        for bad in (0, -1, 1.5, True, "2"):
            with self.assertRaises(ValueError) as raised:
                tamp.torch.DistributedOptimizer(torch.optim.SGD(self.model.parameters(), lr=1.0),
                                                backward_passes_per_step=bad)
            self.assertIn("backward_passes_per_step", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
