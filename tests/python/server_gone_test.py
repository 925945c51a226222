"""A server that is gone: the step's push or wait raises ConnectionError naming it.

Job as binding_test.py's; TAMP_TEST_DOOMED_PID is a server's process id, which this test
kills between two steps.
"""

import os
import signal
import unittest

import numpy as np

import tamp

NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
SHAPES = [(64, 784), (64,), (10, 64), (10,)]


class ServerGoneTest(unittest.TestCase):
    def test_server_gone_raises_connection_error(self):
        where = tamp.init()
        client = tamp.Client(list(zip(NAMES, SHAPES)), steps_per_epoch=100)
        params = [np.zeros(shape, np.float32) for shape in SHAPES]
        step = client.start(params)
        grads = [np.ones(shape, np.float32) for shape in SHAPES]

        def one_step():
            client.begin_step(step, params)
            for name, grad in zip(NAMES, grads):
                client.push(name, grad)
            client.wait(params)

        one_step()
        step += 1
        os.kill(int(os.environ["TAMP_TEST_DOOMED_PID"]), signal.SIGKILL)
        with self.assertRaises(ConnectionError) as raised:
            one_step()
        # The C++ client names the shard, its address and the chunk.
        self.assertIn(f"shard 1 ({where.servers[1]})", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
