"""Two workers' clients in one process, one thread each (tests/python_test.sh; the exact job
with 2 workers). wait() must release the GIL: worker 0's wait() blocks until worker 1 has
pushed, which worker 1's thread can only do while worker 0 waits. The servers' SGD step is
then -0.125 times the workers' mean gradient, to fp32 rounding, on both replicas.
"""

import faulthandler
import threading
import unittest

import numpy as np

import tamp

NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
SHAPES = [(64, 784), (64,), (10, 64), (10,)]


def gradients(rank, step):
    rng = np.random.default_rng([rank, step])
    return [rng.standard_normal(shape).astype(np.float32) for shape in SHAPES]


class TwoClientsTest(unittest.TestCase):
    def test_waits_overlap_and_apply_the_mean(self):
        base = tamp.init()
        clients = [tamp.Client(list(zip(NAMES, SHAPES)), steps_per_epoch=10,
                               where=base._replace(rank=rank)) for rank in (0, 1)]
        params = [[np.zeros(shape, np.float32) for shape in SHAPES] for _ in clients]
        before = {}
        errors = []

        def worker(rank):
            try:
                client, mine = clients[rank], params[rank]
                step = client.start(mine)
                for _ in range(3):
                    client.begin_step(step, mine)
                    before[rank, step] = [p.copy() for p in mine]
                    for name, grad in zip(NAMES, gradients(rank, step)):
                        client.push(name, grad)
                    client.wait(mine)
                    step += 1
            except Exception as error:  # Reported by the main thread.
                errors.append(error)

        # A wait() that held the GIL would block every Python thread for good: faulthandler's
        # watchdog (a C thread) then prints the stacks and ends the process.
        faulthandler.dump_traceback_later(60, exit=True)
        other = threading.Thread(target=worker, args=(1,))
        other.start()
        worker(0)
        other.join(timeout=60)
        self.assertFalse(other.is_alive(), "worker 1 is stuck: wait() held the GIL?")
        faulthandler.cancel_dump_traceback_later()
        self.assertEqual(errors, [])
        for name, p0, p1 in zip(NAMES, params[0], params[1]):
            np.testing.assert_array_equal(p0, p1, err_msg=name)
        for step in range(3):
            mean = [(a + b) / np.float32(2) for a, b in zip(gradients(0, step),
                                                            gradients(1, step))]
            after = before[0, step + 1] if step < 2 else params[0]
            for name, old, new, grad in zip(NAMES, before[0, step], after, mean):
                np.testing.assert_allclose(new, old - np.float32(0.125) * grad, rtol=1e-6,
                                           atol=1e-7, err_msg=name)


if __name__ == "__main__":
    unittest.main()
