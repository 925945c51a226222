"""tamp.Client.resume(): a process replacing the job's only worker.

Job (tests/python_test.sh): write_exact_config's MLP 784-64-10, 1 worker, codec none both
ways, plain SGD at 0.125, 100 steps per epoch for 2 epochs. The first client takes two steps
and "dies"; its replacement resumes at step 2 (the dead one pushed none of it, so no step
is skipped) with the shards' weights, and one step later they are exact SGD on its gradient. Once
the run is over, resume() hands over the final weights and total_steps; start() refuses.
"""

import os
import unittest

import numpy as np

import tamp

NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
SHAPES = [(64, 784), (64,), (10, 64), (10,)]
LEARNING_RATE = np.float32(0.125)


def step(client, at, params, rng):
    client.begin_step(at, params)
    grads = [rng.standard_normal(shape).astype(np.float32) for shape in SHAPES]
    before = [p.copy() for p in params]
    for index in reversed(range(len(NAMES))):
        client.push(NAMES[index], grads[index])
    client.wait(params)
    return before, grads


class ResumeTest(unittest.TestCase):
    def test_resume_rejoins_then_ends_with_the_final_weights(self):
        tamp.init()
        self.assertFalse(tamp.restarted())
        os.environ["TAMP_RESTART"] = "abc"  # Not "not restarted": a fresh start into a running job.
        with self.assertRaisesRegex(ValueError, "TAMP_RESTART=abc: must be a whole number"):
            tamp.restarted()
        os.environ["TAMP_RESTART"] = "1"
        self.assertTrue(tamp.restarted())
        rng = np.random.default_rng(3)
        tensors = list(zip(NAMES, SHAPES))
        first = tamp.Client(tensors, steps_per_epoch=100)
        params = [np.zeros(shape, np.float32) for shape in SHAPES]
        self.assertEqual(first.start(params), 0)
        for at in range(2):
            step(first, at, params, rng)
        totals = first.totals()
        with first:  # Leaving the block closes the client; later calls are refused.
            self.assertFalse(first.closed)
        self.assertTrue(first.closed)
        with self.assertRaisesRegex(RuntimeError, "push: this tamp.Client is closed"):
            first.push(NAMES[0], np.zeros(SHAPES[0], np.float32))
        with self.assertRaisesRegex(RuntimeError, "begin_step: this tamp.Client is closed"):
            first.begin_step(2, params)
        self.assertEqual(first.totals(), totals)
        first.close()  # Again: nothing.

        replacement = tamp.Client(tensors, steps_per_epoch=100)
        resumed = [np.full(shape, 7.0, np.float32) for shape in SHAPES]
        # Step 2 holds no push of the dead one: the replacement takes it, none is skipped.
        self.assertEqual(replacement.resume(resumed), 2)
        for name, got, want in zip(NAMES, resumed, params):
            np.testing.assert_array_equal(got, want, err_msg=name)
        before, grads = step(replacement, 2, resumed, rng)
        for name, got, was, grad in zip(NAMES, resumed, before, grads):
            np.testing.assert_array_equal(got, was - LEARNING_RATE * grad, err_msg=name)

        for at in range(3, replacement.total_steps):
            step(replacement, at, resumed, rng)
        after_the_end = tamp.Client(tensors, steps_per_epoch=100)
        final = [np.zeros(shape, np.float32) for shape in SHAPES]
        with self.assertRaisesRegex(RuntimeError, "the run is over"):
            after_the_end.start(final)
        self.assertEqual(after_the_end.resume(final), replacement.total_steps)
        for name, got, want in zip(NAMES, final, resumed):
            np.testing.assert_array_equal(got, want, err_msg=name)


if __name__ == "__main__":
    unittest.main()
