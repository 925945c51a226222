"""tamp.init(): the placement from the environment by the C++ workers' rules
(job/placement.h), under tamp run's, torchrun's and Slurm's variables, keyword arguments
standing in for them, refusals that name the variable and keep the previous placement; and
count_steps(), the servers' run length. No servers needed: argv[1] is a config path of a job
of 2 servers and 2 workers."""

import os
import sys
import unittest
import warnings
from unittest import mock

import tamp

CONFIG = sys.argv.pop(1)


class InitTest(unittest.TestCase):
    def environment(self, **variables):
        base = {"TAMP_CONFIG": CONFIG, "TAMP_SERVERS": "a:1,b:2"}
        base.update(variables)
        return mock.patch.dict(os.environ, {k: v for k, v in base.items() if v is not None},
                               clear=True)

    def test_tamp_run_variables(self):
        with self.environment(TAMP_RANK="1", TAMP_NUM_WORKERS="2", TAMP_LOCAL_RANK="1"):
            where = tamp.init()
        self.assertEqual((where.rank, where.local_rank, where.servers, where.num_workers,
                          where.source), (1, 1, ["a:1", "b:2"], 2, "tamp"))
        self.assertEqual((tamp.rank(), tamp.size(), tamp.local_rank()), (1, 2, 1))

    def test_torchrun_variables(self):
        with self.environment(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1"):
            where = tamp.init()
        self.assertEqual((where.rank, where.local_rank, where.servers, where.source),
                         (1, 1, ["a:1", "b:2"], "torchrun"))
        # Without TAMP_SERVERS, the servers are the config's cluster.server_addresses.
        with open(CONFIG) as file:
            text = file.read().replace(
                "cluster {", 'cluster { server_addresses: ["127.0.0.5:5", "127.0.0.6:6"]')
        with self.environment(TAMP_CONFIG=None, TAMP_SERVERS=None, RANK="0", WORLD_SIZE="2"):
            self.assertEqual(tamp.init(config=text).servers, ["127.0.0.5:5", "127.0.0.6:6"])

    def test_slurm_variables(self):
        # srun -n 4 over two nodes: tasks 0, 1 are the servers, task 3 is worker 1.
        with self.environment(TAMP_SERVERS=None, SLURM_PROCID="3", SLURM_NTASKS="4",
                              SLURM_STEP_NODELIST="n[1-2]", SLURM_STEP_TASKS_PER_NODE="2(x2)",
                              TAMP_BASE_PORT="4000"):
            where = tamp.init()
        self.assertEqual((where.rank, where.local_rank, where.servers, where.source),
                         (1, 1, ["n1:4000", "n1:4001"], "slurm"))

    def test_arguments_stand_for_the_variables(self):
        with self.environment(RANK="1", WORLD_SIZE="2"):
            where = tamp.init(rank=0, servers=["c:3", "d:4"], num_workers=2)
        self.assertEqual((where.rank, where.servers, where.source), (0, ["c:3", "d:4"], "tamp"))
        with open(CONFIG) as text, self.environment(TAMP_CONFIG=None, TAMP_RANK="0"):
            self.assertEqual(tamp.init(config=text.read()).config.num_workers, 2)

    def test_refusals_name_the_variable_and_keep_the_placement(self):
        with self.environment(TAMP_RANK="1"):
            before = tamp.init()
        cases = [
            ({"TAMP_CONFIG": None, "TAMP_RANK": "0"}, "TAMP_CONFIG is not set"),
            ({"TAMP_CONFIG": "/nonexistent/job.pbtxt", "TAMP_RANK": "0"},
             "TAMP_CONFIG: config file '/nonexistent/job.pbtxt' cannot be read: No such file"),
            ({"RANK": "0"}, "RANK is set but WORLD_SIZE is not"),
            ({"TAMP_RANK": "0", "TAMP_SERVERS": "a:1,b"}, "TAMP_SERVERS: 'b' is not host:port"),
            ({}, "no placement in the environment: none of TAMP_RANK"),
            ({"TAMP_RANK": "x"}, "TAMP_RANK: 'x' is not a non-negative integer"),
            ({"TAMP_RANK": "2"}, "TAMP_RANK: 2 is not below cluster.num_workers (2)"),
            ({"TAMP_RANK": "0", "TAMP_SERVERS": "a:1"},
             "TAMP_SERVERS: names 1 server but cluster.num_servers is 2"),
            ({"TAMP_RANK": "0", "TAMP_SERVERS": None}, "TAMP_SERVERS is not set"),
            ({"TAMP_RANK": "0", "TAMP_NUM_WORKERS": "3"},
             "TAMP_NUM_WORKERS=3 disagrees with cluster.num_workers=2"),
            ({"TAMP_RANK": "0", "TAMP_LOCAL_RANK": "-1"}, "TAMP_LOCAL_RANK: '-1'"),
            ({"RANK": "0", "WORLD_SIZE": "3"}, "WORLD_SIZE=3 disagrees with cluster.num_workers=2"),
            ({"RANK": "one", "WORLD_SIZE": "2"}, "RANK: 'one' is not a non-negative integer"),
            ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "x"}, "LOCAL_RANK: 'x'"),
            ({"SLURM_PROCID": "0", "SLURM_NTASKS": "3"}, "SLURM_NTASKS is 3"),
        ]
        for variables, words in cases:
            with self.subTest(variables=variables):
                with self.environment(**variables), self.assertRaises(ValueError) as raised:
                    tamp.init()
                self.assertIn(words, str(raised.exception))
                self.assertIs(tamp.placement(), before)
        with self.environment(TAMP_RANK="0"), self.assertRaises(ValueError) as raised:
            tamp.init(rank=5)
        self.assertIn("TAMP_RANK: 5 is not below", str(raised.exception))

    def test_a_config_path_may_hold_a_brace_or_be_a_pathlib_path(self):
        import pathlib
        import tempfile
        with tempfile.TemporaryDirectory() as directory:
            braced = os.path.join(directory, "exp{1}", "job.pbtxt")  # A sweep's folder name.
            os.makedirs(os.path.dirname(braced))
            with open(CONFIG) as source, open(braced, "w") as copy:
                copy.write(source.read())
            for given in (braced, pathlib.Path(braced)):
                self.assertEqual(tamp.load_config(given).num_workers, 2)
        with self.assertRaises(TypeError) as raised:
            tamp.load_config(3)
        self.assertIn("config must be a tamp.Config, a path or a config's text, got a int",
                      str(raised.exception))

    def test_counts_may_be_numpy_integers(self):
        import numpy as np
        tamp._check_count("Client", "steps_per_epoch", np.int64(10))
        with self.assertRaises(ValueError) as raised:
            tamp._check_count("Client", "total_steps", 2**64)
        self.assertIn("Client: total_steps must be below 2**63, got 18446744073709551616",
                      str(raised.exception))

    def test_config_file_that_cannot_be_read_raises_oserror_as_open_would(self):
        with self.assertRaises(FileNotFoundError) as raised:
            tamp.Config.from_file("/nonexistent/job.pbtxt")
        self.assertEqual(str(raised.exception), "config file '/nonexistent/job.pbtxt' cannot "
                         "be read: No such file or directory")
        with self.assertRaises(OSError) as raised:  # A directory exists: not FileNotFoundError.
            tamp.Config.from_file("/")
        self.assertNotIsInstance(raised.exception, FileNotFoundError)
        self.assertIn("config file '/' cannot be read: Is a directory", str(raised.exception))
        with self.assertRaises(ValueError):  # A file that reads, holding no config.
            tamp.Config.from_file(os.devnull)

    def test_client_tensors_are_name_and_shape_pairs_or_refused_naming_the_entry(self):
        # Refused before any server is asked: these servers do not exist.
        with self.environment(TAMP_RANK="0"):
            where = tamp.init()
        cases = [
            ([("w", (6.7,))], 'tensor "w": the shape must be a sequence of ints, got (6.7,)'),
            ([("w", 6)], 'tensor "w": the shape must be a sequence of ints, got 6'),
            ([("w", (True,))], 'tensor "w": the shape must be a sequence of ints, got (True,)'),
            ({"w": (6,)}, "tensors must be a list of (name, shape) pairs, got dict"),
            ([(b"w", (6,))], "tensors[0]: the name must be a str, got b'w'"),
            ([("w", (6,)), ("b",)], "tensors[1] must be a (name, shape) pair, got ('b',)"),
        ]
        for tensors, words in cases:
            with self.subTest(tensors=tensors), self.assertRaises(ValueError) as raised:
                tamp.Client(tensors, steps_per_epoch=10, where=where)
            self.assertEqual(str(raised.exception), "Client: " + words)

    def test_client_warns_of_what_the_config_says_that_has_no_effect(self):
        # An override meant to change fc1.weight's pull: it leaves out the default's push.
        with open(CONFIG) as file:
            text = file.read().replace("cluster {", "cluster { connect_timeout_ms: 200", 1)
        text = text.replace("compression {", 'compression { tensor_overrides { pattern: '
                            '"fc1.weight" compression { pull { name: "bf16" } } }', 1)
        config = tamp.Config.from_text(text, "job.pbtxt")
        note = ("job.pbtxt: compression.tensor_overrides[0] (pattern 'fc1.weight') leaves out "
                "what default_compression sets (push topk, push_feedback RESIDUAL): an "
                "override replaces default_compression whole")
        self.assertEqual(len(config.notes), 1)
        self.assertIn(note, config.notes[0])
        where = tamp.Placement(config, 0, ["127.0.0.1:9", "127.0.0.1:9"], 2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with self.assertRaises(Exception):  # No server answers there.
                tamp.Client([("fc1.weight", (64, 784)), ("fc1.bias", (64,)),
                             ("fc2.weight", (10, 64)), ("fc2.bias", (10,))],
                            steps_per_epoch=10, where=where)
        said = [w for w in caught if note in str(w.message)]
        self.assertEqual(len(said), 1, [str(w.message) for w in caught])
        self.assertEqual(said[0].filename, __file__)  # The script's line, not tamp's.
        self.assertEqual(tamp.Config.from_file(CONFIG).notes, [])

    def test_keep_freed_memory_serves_large_blocks_from_the_heap(self):
        # In a fresh interpreter: by default glibc maps a 16 MiB block of its own (above the
        # heap's end, sbrk(0)); after keep_freed_memory() it comes from the heap (below it).
        # Under --config=asan the sanitizer's malloc stands in for glibc's (tests/
        # python_testlib.sh preloads it): keep_freed_memory() refuses, saying why.
        probe = (
            "import ctypes, tamp\n"
            "libc = ctypes.CDLL(None)\n"
            "if hasattr(libc, '__asan_init'):\n"
            "    try:\n"
            "        tamp.keep_freed_memory()\n"
            "    except RuntimeError as refused:\n"
            "        print('refused:', refused)\n"
            "    raise SystemExit\n"
            "libc.malloc.restype = libc.sbrk.restype = ctypes.c_void_p\n"
            "libc.sbrk.argtypes = [ctypes.c_long]\n"
            "def in_heap():\n"
            "    block = libc.malloc(16 << 20)\n"
            "    inside = block < libc.sbrk(0)\n"
            "    libc.free(ctypes.c_void_p(block))\n"
            "    return inside\n"
            "before = in_heap()\n"
            "tamp.keep_freed_memory()\n"
            "print(before, in_heap())\n")
        import subprocess
        ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
        self.assertEqual(ran.returncode, 0, ran.stderr)
        if ran.stdout.startswith("refused:"):
            self.assertIn("mallopt(M_MMAP_THRESHOLD, 33554432) refused", ran.stdout)
        else:
            self.assertEqual(ran.stdout.split(), ["False", "True"], ran.stderr)

    def test_count_steps_is_the_servers_run_length(self):
        with open(CONFIG) as file:
            text = file.read()
        self.assertIn("epochs: 2", text)
        capped = tamp.load_config(text.replace("epochs: 2", "epochs: 3 max_steps: 25"))
        self.assertEqual([tamp.count_steps(capped, n) for n in (5, 10)], [15, 25])

    def test_step_counts_that_are_not_counts_are_named(self):
        import tamp.torch
        config = tamp.load_config(CONFIG)
        with self.environment(TAMP_RANK="0"):
            tamp.torch.init(steps_per_epoch=10)
            for bad in (0, -3, 2.5, "10", True):
                for call, words in (
                        (lambda: tamp.count_steps(config, bad), "count_steps: steps_per_epoch"),
                        (lambda: tamp.Client([], bad), "Client: steps_per_epoch"),
                        (lambda: tamp.Client([], 5, total_steps=bad), "Client: total_steps"),
                        (lambda: tamp.torch.init(steps_per_epoch=bad),
                         "tamp.torch.init: steps_per_epoch"),
                        (lambda: tamp.torch.init(steps_per_epoch=4, total_steps=bad),
                         "tamp.torch.init: total_steps")):
                    with self.assertRaises(ValueError) as raised:
                        call()
                    self.assertIn(f"{words} must be an int >= 1, got {bad!r}",
                                  str(raised.exception))
        self.assertEqual(tamp.torch._run["steps_per_epoch"], 10)  # The refusals changed none.

    def test_a_state_dict_before_registration_is_refused_with_the_way_out(self):
        import torch  # Debian's python3-torch; no servers needed: the refusal comes first.
        import tamp.torch
        with self.environment(TAMP_RANK="0"):
            tamp.torch.init(steps_per_epoch=10)
        state = {"fc.weight": torch.zeros(2, 3), "bn.num_batches_tracked": torch.zeros(
            (), dtype=torch.int64)}
        with self.assertRaises(ValueError) as raised:
            tamp.torch.broadcast_parameters(state)
        for words in ('"bn.num_batches_tracked" (torch.int64) is a buffer of the state_dict, '
                      "not a parameter", "model.named_parameters()",
                      "DistributedOptimizer() first"):
            self.assertIn(words, str(raised.exception))
        self.assertNotIn("model.float()", str(raised.exception))  # Buffers stay int64.
        self.assertIsNone(tamp.torch._session)

    def test_registering_before_tamp_torch_init_is_a_call_out_of_order(self):
        import torch
        import tamp.torch
        saved = dict(tamp.torch._run)
        try:
            tamp.torch._run.update(steps_per_epoch=None, total_steps=None, report=None)
            params = [("w", torch.nn.Parameter(torch.zeros(2)))]
            with self.assertRaises(RuntimeError) as raised:  # As if init() never ran.
                tamp.torch.broadcast_parameters(params)
            self.assertIn("call tamp.torch.init(steps_per_epoch=...) first",
                          str(raised.exception))
            # DistributedOptimizer() too, where it said "call tamp.init() (or
            # tamp.torch.init()) first" and tamp.init() alone did not do.
            with self.assertRaises(RuntimeError) as raised:
                tamp.torch.DistributedOptimizer(torch.optim.SGD([params[0][1]], lr=0.1))
            self.assertIn("call tamp.torch.init(steps_per_epoch=...) first",
                          str(raised.exception))
            tamp.torch._run["report"] = False  # init() ran, without steps_per_epoch.
            with self.assertRaises(ValueError):
                tamp.torch.broadcast_parameters(params)
            self.assertIsNone(tamp.torch._session)
        finally:
            tamp.torch._run.update(saved)

    def test_optimizer_is_the_servers_in_torchs_names(self):
        with open(CONFIG) as file:
            text = file.read()
        self.assertIn("optimizer { learning_rate: 0.05 momentum: 0.9 }", text)
        adam = tamp.load_config(text.replace("momentum: 0.9", 'name: "adam"'))
        self.assertEqual(sorted(adam.optimizer), ["betas", "eps", "lr", "name", "weight_decay"])
        for got, default in zip(adam.optimizer["betas"], (0.9, 0.999)):  # As torch's.
            self.assertAlmostEqual(got, default)
        self.assertAlmostEqual(adam.optimizer["eps"], 1e-8)
        sgd = tamp.load_config(text).optimizer
        self.assertEqual(sorted(sgd), ["lr", "momentum", "name", "nesterov", "weight_decay"])
        self.assertEqual(sgd["name"], "sgd")
        aggregate = text[:text.index("optimizer {")] + text[text.index("}", text.index(
            "optimizer {")) + 1:] + "\nserver { mode: AGGREGATE }\n"
        self.assertIsNone(tamp.load_config(aggregate).optimizer)


if __name__ == "__main__":
    unittest.main()
