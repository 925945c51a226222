"""tamp.Client against real servers: exact steps, zero-copy arrays, every refusal.

Job (tests/python_test.sh): the MLP 784-64-10, 1 worker, codec none both ways, plain SGD at
learning rate 0.125 (a power of two: the update is exact in fp32), so one step must move the
weights by exactly -0.125 * gradient. TAMP_CONFIG, TAMP_SERVERS, TAMP_RANK come from the
environment.
"""

import ctypes
import json
import unittest

import numpy as np
import torch

import tamp

NAMES = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
SHAPES = [(64, 784), (64,), (10, 64), (10,)]
LEARNING_RATE = np.float32(0.125)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLManagedTensor(ctypes.Structure):  # DLPack 0.x's DLManagedTensor (python/dlpack.h).
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeCudaArray:
    """An fp32 array that says it lives on cuda:DEVICE (DLPack kDLCUDA), as a torch CUDA tensor
    does; its pointer is a host array's, which nothing may dereference as device memory.
    Without `with_device` it lacks __dlpack_device__ (DLPack < 0.6) and shows its device only
    in the capsule."""

    def __init__(self, array, device=0, with_device=True):
        self.array = array
        self.shape = (ctypes.c_int64 * array.ndim)(*array.shape)
        self.managed = _DLManagedTensor(array.ctypes.data, _DLDevice(2, device), array.ndim,
                                        _DLDataType(2, 32, 1), self.shape, None, 0, None, None)
        self.name = b"dltensor"
        self.exported_on = []  # The streams __dlpack__ was called with.
        if with_device:
            self.__dlpack_device__ = lambda: (2, device)

    def __dlpack__(self, stream=None):
        self.exported_on.append(stream)
        return _capsule_new(ctypes.addressof(self.managed), self.name, None)


class BindingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        tamp.init()
        cls.client = tamp.Client(list(zip(NAMES, SHAPES)), steps_per_epoch=100)
        cls.params = [np.zeros(shape, np.float32) for shape in SHAPES]
        cls.step = cls.client.start(cls.params)
        cls.initial = [p.copy() for p in cls.params]
        cls.rng = np.random.default_rng(1)

    def begin(self):
        self.client.begin_step(self.step, self.params)
        self.before = [p.copy() for p in self.params]
        return [self.rng.standard_normal(shape).astype(np.float32) for shape in SHAPES]

    def finish(self, grads, out=None):
        """wait(); the weights moved by exactly one SGD step on `grads`."""
        self.client.wait(self.params if out is None else out)
        type(self).step += 1
        for name, param, before, grad in zip(NAMES, self.params, self.before, grads):
            np.testing.assert_array_equal(param, before - LEARNING_RATE * grad, err_msg=name)

    def push_all(self, grads, skip=()):
        for index in reversed(range(len(NAMES))):  # Backward's order: last layer first.
            if NAMES[index] not in skip:
                self.client.push(NAMES[index], grads[index])

    def assertRefused(self, error, call, *words):
        with self.assertRaises(error) as raised:
            call()
        for word in words:
            self.assertIn(word, str(raised.exception))

    def test_done_event_carries_the_epoch_of_the_last_step(self):
        # 100 steps per epoch: step 250 is in epoch 2 (from 0), step 200 the last of epoch 1.
        epochs = [json.loads(self.client.done_event(steps, None, 1.5))["epoch"]
                  for steps in (0, 1, 200, 250)]
        self.assertEqual(epochs, [0, 0, 1, 2])
        done = json.loads(self.client.done_event(250, 0.5, 1.5))
        self.assertEqual((done["kind"], done["step"], done["test_accuracy"]), ("DONE", 250, 0.5))

    def test_start_copies_the_servers_seeded_init(self):
        self.assertEqual(self.client.tensor_names, NAMES)
        self.assertEqual([tuple(s) for s in self.client.tensor_shapes], SHAPES)
        for name, param, fan_in in zip(NAMES, self.initial, [784, 784, 64, 64]):
            if name.endswith("bias"):
                self.assertTrue(np.all(param == 0), name)
            else:  # He-uniform: within the bound, and reaching close to it.
                bound = np.sqrt(6 / fan_in)
                self.assertLessEqual(np.abs(param).max(), bound, name)
                self.assertGreater(np.abs(param).max(), 0.95 * bound, name)

    def test_one_step_is_exact_sgd(self):
        grads = self.begin()
        self.push_all(grads)
        self.finish(grads)
        report = self.client.report()
        self.assertEqual(report["raw_bytes_pushed"], 4 * sum(g.size for g in grads))
        self.assertEqual(len(report["shard_bytes_pushed"]), 2)
        self.assertGreaterEqual(self.client.totals()["bytes_pushed"], report["raw_bytes_pushed"])
        self.assertEqual(self.client.totals()["steps_missed"], 0)  # Never dropped.

    def test_torch_tensors_through_dlpack_without_copies(self):
        grads = self.begin()
        # Gradients as torch tensors (DLPack), weights as torch views of the numpy arrays:
        # wait() writes through them into the same memory.
        for index in reversed(range(len(NAMES))):
            self.client.push(index, torch.from_numpy(grads[index]))
        self.finish(grads, out=[torch.from_numpy(p) for p in self.params])

    def test_any_dlpack_array_without_copies(self):
        # An array that only speaks DLPack, as JAX's and CuPy's host arrays do.
        class DlpackOnly:
            def __init__(self, array):
                self.array = array

            def __dlpack__(self, stream=None):
                return self.array.__dlpack__()

        grads = self.begin()
        for index in reversed(range(len(NAMES))):
            self.client.push(index, DlpackOnly(grads[index]))
        self.finish(grads, out=[DlpackOnly(p) for p in self.params])

    def test_dlpack_capsules_without_copies(self):
        # DLPack's legacy interface (tamp.torch passes its CPU tensors so): the capsule is
        # read, not consumed; its producer frees it.
        grads = self.begin()
        to_dlpack = torch.utils.dlpack.to_dlpack
        for index in reversed(range(len(NAMES))):
            self.client.push(index, to_dlpack(torch.from_numpy(grads[index])))
        out = [to_dlpack(torch.from_numpy(p)) for p in self.params]
        self.finish(grads, out=out)
        self.assertEqual(torch.utils.dlpack.from_dlpack(out[3]).data_ptr(),
                         self.params[3].ctypes.data)

    def test_capsules_not_fp32_contiguous_or_on_a_gpu_refused(self):
        grads = self.begin()
        to_dlpack = torch.utils.dlpack.to_dlpack
        self.assertRefused(ValueError, lambda: self.client.push(
            2, to_dlpack(torch.from_numpy(grads[2]).double())),
            '"fc2.weight"', "float32", "DLPack capsule")
        self.assertRefused(ValueError, lambda: self.client.push(
            2, to_dlpack(torch.from_numpy(np.ascontiguousarray(grads[2].T)).T)),
            '"fc2.weight"', "DLPack capsule is not C-contiguous")
        consumed = to_dlpack(torch.from_numpy(grads[2]))
        torch.utils.dlpack.from_dlpack(consumed)  # Renames it "used_dltensor".
        self.assertRefused(ValueError, lambda: self.client.push(2, consumed),
                           '"fc2.weight"', '"used_dltensor" is not a DLPack tensor')
        with self.assertRaisesRegex(RuntimeError, r'tensor "fc2.bias" is on cuda:0 but this '
                                    r"(process sees no CUDA device|build has no CUDA support)"):
            self.client.push(3, FakeCudaArray(grads[3]).__dlpack__())
        self.push_all(grads)
        self.finish(grads)

    def test_non_fp32_refused(self):
        grads = self.begin()
        self.assertRefused(ValueError, lambda: self.client.push("fc2.weight",
                                                                 grads[2].astype(np.float64)),
                           '"fc2.weight"', "float32")
        self.assertRefused(ValueError, lambda: self.client.push(
            "fc2.weight", torch.from_numpy(grads[2]).double()), '"fc2.weight"',
            "expected float32 elements, got a ", "of float64 (DLPack)")
        self.push_all(grads)
        self.finish(grads)

    def test_non_contiguous_refused(self):
        grads = self.begin()
        transposed = np.ascontiguousarray(grads[2].T).T  # Same values, column major.
        self.assertRefused(ValueError, lambda: self.client.push("fc2.weight", transposed),
                           '"fc2.weight"', "not C-contiguous")
        self.assertRefused(ValueError, lambda: self.client.push(
            "fc2.weight", torch.from_numpy(transposed)), '"fc2.weight"', "not C-contiguous")
        self.push_all(grads)
        self.finish(grads)

    def test_wrong_size_or_type_refused(self):
        grads = self.begin()
        self.assertRefused(ValueError, lambda: self.client.push("fc2.bias", grads[1]),
                           '"fc2.bias"', "10 elements", "64")
        self.assertRefused(ValueError, lambda: self.client.push("fc2.bias", [0.0] * 10),
                           '"fc2.bias"', "list")
        self.push_all(grads)
        self.finish(grads)

    def test_a_negative_step_is_refused_naming_it(self):
        self.assertRefused(ValueError, lambda: self.client.begin_step(-1, self.params),
                           "begin_step: step -1 is negative")

    def test_wrong_shape_of_the_right_size_refused_and_flat_taken(self):
        grads = self.begin()
        weight = grads[2]  # fc2.weight [10, 64]
        swapped = weight.reshape(weight.shape[::-1])  # Same elements, another layout.
        for array in (swapped, torch.from_numpy(swapped)):  # Buffer protocol, DLPack.
            self.assertRefused(ValueError, lambda: self.client.push("fc2.weight", array),
                               '"fc2.weight"', "shape [64, 10], but the job registered [10, 64]")
            self.assertRefused(ValueError, lambda: self.client.push(2, array), '"fc2.weight"',
                               "shape [64, 10]")
        self.client.push("fc2.weight", weight.reshape(-1))
        self.push_all(grads, skip=("fc2.weight",))
        self.finish(grads)

    def test_pushed_twice_refused_and_applied_once(self):
        grads = self.begin()
        self.client.push("fc2.bias", grads[3])
        self.assertRefused(RuntimeError, lambda: self.client.push("fc2.bias", grads[3]),
                           '"fc2.bias"', "already pushed")
        self.push_all(grads, skip=("fc2.bias",))
        self.finish(grads)

    def test_unregistered_name_refused(self):
        grads = self.begin()
        self.assertRefused(ValueError, lambda: self.client.push("fc3.weight", grads[2]),
                           '"fc3.weight"', "not registered")
        self.assertRefused(ValueError, lambda: self.client.push(7, grads[2]), "7", "out of range")
        self.assertRefused(ValueError, lambda: self.client.push(2**31, grads[2]),
                           "tensor index 2147483648 is out of range")
        self.client.push(np.int64(3), grads[3])  # numpy's integers are indices too.
        for wrong in (True, 1.0, None):  # Not taken for index 1 (True) or as a number.
            self.assertRefused(TypeError, lambda: self.client.push(wrong, grads[2]),
                               "must be its name (str) or its index (int), not "
                               + type(wrong).__name__)
        self.push_all(grads, skip=("fc2.bias",))
        self.finish(grads)

    def test_wait_before_every_push_refused(self):
        grads = self.begin()
        self.push_all(grads, skip=("fc1.weight",))
        self.assertRefused(RuntimeError, lambda: self.client.wait(self.params),
                           '"fc1.weight"', "not pushed")
        self.client.push("fc1.weight", grads[0])
        self.finish(grads)

    def test_read_only_or_missing_output_refused(self):
        grads = self.begin()
        self.push_all(grads)
        read_only = [p.copy() for p in self.params]
        read_only[1].flags.writeable = False
        self.assertRefused(ValueError, lambda: self.client.wait(read_only), '"fc1.bias"',
                           "read-only")
        self.assertRefused(ValueError, lambda: self.client.wait(self.params[:3]), "expected 4",
                           "got 3")
        self.finish(grads)

    def test_cuda_arrays_this_process_cannot_use_are_refused_changing_nothing(self):
        # No GPU here: the first device array of a call is refused by name, before it is
        # exported where the array says its device (__dlpack_device__), else from its capsule.
        cannot = (r'tensor "{}" is on cuda:0 but this '
                  r"(process sees no CUDA device|build has no CUDA support)")
        grads = self.begin()
        announced = FakeCudaArray(grads[2])
        with self.assertRaisesRegex(RuntimeError, cannot.format("fc2.weight")):
            self.client.push("fc2.weight", announced, stream=7)
        self.assertEqual(announced.exported_on, [])
        silent = FakeCudaArray(grads[3], with_device=False)
        with self.assertRaisesRegex(RuntimeError, cannot.format("fc2.bias")):
            self.client.push(3, silent)
        self.assertEqual(silent.exported_on, [None])
        self.assertRefused(ValueError, lambda: self.client.push(3, grads[3], stream=-1),
                           "stream: -1")
        self.push_all(grads)
        with self.assertRaisesRegex(RuntimeError, cannot.format("fc1.weight")):
            self.client.wait([FakeCudaArray(p) for p in self.params])
        # Nothing moved: the step ends with exactly its SGD update (and host arrays ignore
        # the stream).
        self.client.wait(self.params, stream=7)
        type(self).step += 1
        for name, param, before, grad in zip(NAMES, self.params, self.before, grads):
            np.testing.assert_array_equal(param, before - LEARNING_RATE * grad, err_msg=name)

    def test_tensors_other_than_the_jobs_refused(self):
        tensors = list(zip(NAMES, SHAPES))
        tensors[2] = ("fc2.weight", (10, 32))
        self.assertRefused(ValueError, lambda: tamp.Client(tensors, steps_per_epoch=100),
                           '"fc2.weight"', "[10, 32]", "[10, 64]")
        self.assertRefused(ValueError, lambda: tamp.Client(list(zip(NAMES, SHAPES))[:3],
                                                           steps_per_epoch=100),
                           '"fc2.bias"', "the registered tensors are not model.kind MLP's")


if __name__ == "__main__":
    unittest.main()
