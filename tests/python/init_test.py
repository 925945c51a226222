"""tamp.init(): the placement from the environment, keyword overrides, refusals that name
what is wrong and keep the previous placement. No servers needed: argv[1] is a config path
of a job of 2 servers and 2 workers."""

import os
import sys
import unittest
from unittest import mock

import tamp

CONFIG = sys.argv.pop(1)


class InitTest(unittest.TestCase):
    def environment(self, **variables):
        base = {"TAMP_CONFIG": CONFIG, "TAMP_SERVERS": "a:1,b:2"}
        base.update(variables)
        return mock.patch.dict(os.environ, {k: v for k, v in base.items() if v is not None},
                               clear=True)

    def test_reads_the_environment(self):
        with self.environment(TAMP_RANK="1", TAMP_NUM_WORKERS="2"):
            where = tamp.init()
        self.assertEqual((where.rank, where.servers, where.num_workers), (1, ["a:1", "b:2"], 2))
        self.assertEqual((tamp.rank(), tamp.size()), (1, 2))

    def test_torchrun_rank_is_the_fallback_and_arguments_override(self):
        with self.environment(RANK="1"):
            self.assertEqual(tamp.init().rank, 1)
            self.assertEqual(tamp.init(rank=0, servers=["c:3", "d:4"]).servers, ["c:3", "d:4"])
        with open(CONFIG) as text, self.environment(TAMP_CONFIG=None, TAMP_RANK="0"):
            self.assertEqual(tamp.init(config=text.read()).config.num_workers, 2)

    def test_refusals_name_the_problem_and_keep_the_placement(self):
        with self.environment(TAMP_RANK="1"):
            before = tamp.init()
        cases = [
            ({"TAMP_CONFIG": None, "TAMP_RANK": "0"}, "no config"),
            ({}, "no rank"),
            ({"TAMP_RANK": "x"}, "rank"),
            ({"TAMP_RANK": "2"}, "rank 2 is out of range"),
            ({"TAMP_RANK": "0", "TAMP_SERVERS": "a:1"}, "1 server addresses"),
            ({"TAMP_RANK": "0", "TAMP_SERVERS": None}, "no servers"),
            ({"TAMP_RANK": "0", "TAMP_NUM_WORKERS": "3"}, "cluster.num_workers is 2"),
        ]
        for variables, words in cases:
            with self.environment(**variables), self.assertRaises(ValueError) as raised:
                tamp.init()
            self.assertIn(words, str(raised.exception))
            self.assertIs(tamp.placement(), before)


if __name__ == "__main__":
    unittest.main()
