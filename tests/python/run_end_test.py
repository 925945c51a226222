"""tamp.torch at the end of the run: the job (tests/python_test.sh: the MLP 784-64-10, codec
none, SGD at 0.125 on the servers, training.max_steps 3) takes 3 steps; a backward after them is refused naming
the tensor and the run's length, and so is a step(); the weights stay the third step's."""

import unittest

import torch

import tamp
import tamp.torch
from torch_worker import Mlp


class RunEndTest(unittest.TestCase):
    def test_pushes_after_the_last_step_are_refused_by_name(self):
        tamp.torch.init(steps_per_epoch=100)
        model = Mlp()
        optimizer = tamp.torch.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.125),
            named_parameters=model.named_parameters())
        x = torch.randn(8, 784)
        for _ in range(3):
            optimizer.zero_grad()
            model(x).square().mean().backward()
            optimizer.step()
        self.assertEqual(tamp.torch.current_step(), 3)
        self.assertEqual(tamp.torch.total_steps(), 3)  # training.max_steps.
        final = [p.detach().clone() for p in model.parameters()]
        optimizer.zero_grad()
        with self.assertRaises(RuntimeError) as raised:
            model(x).square().mean().backward()
        for words in ('"fc2.bias"', "the run's 3 steps are done", "current_step()",
                      "total_steps()"):
            self.assertIn(words, str(raised.exception))
        with self.assertRaises(RuntimeError) as raised:
            optimizer.step()
        self.assertIn("the run's 3 steps are done", str(raised.exception))
        for param, old in zip(model.parameters(), final):
            self.assertTrue(torch.equal(param.detach(), old))
        tamp.torch.shutdown()


if __name__ == "__main__":
    unittest.main()
