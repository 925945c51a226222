"""tamp.torch.describe_model(): the layout and profile files of a PyTorch model, valid for a
`model { kind: REGISTERED layout_file profile_file }` config (the C++ loader checks both),
holding exactly the tensors the model registers; refusals by name. No servers needed."""

import os
import re
import tempfile
import unittest

import torch

import tamp
import tamp._torch_describe
import tamp.torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(20, 8)
        self.embed.weight.requires_grad_(False)  # Frozen: not a job tensor.
        self.conv = torch.nn.Conv1d(8, 16, 3, padding=1)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 20)

    def forward(self, tokens):
        h = self.conv(self.embed(tokens).transpose(1, 2)).transpose(1, 2)
        return self.head(self.norm(h).mean(dim=1))


class RootNet(torch.nn.Module):
    """A positional embedding on the model itself, and MultiheadAttention, whose forward uses
    out_proj's parameters without calling out_proj."""

    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(6, 8))
        self.embed = torch.nn.Embedding(20, 8)
        self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.head = torch.nn.Linear(8, 20)

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos
        h, _ = self.attn(h, h, h)
        return self.head(h.mean(dim=1))


CONFIG = """version: 1
cluster { num_servers: 2 num_workers: 2 }
model { kind: REGISTERED layout_file: "LAYOUT" profile_file: "PROFILE" }
optimizer { learning_rate: 0.1 }
"""


class DescribeTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.model = Net()
        self.batch = (torch.randint(0, 20, (4, 6)), torch.randint(0, 20, (4,)))
        self.dir = tempfile.mkdtemp()

    def test_files_describe_the_registered_tensors_and_load(self):
        self.model.conv.weight.grad = torch.ones_like(self.model.conv.weight)
        files = tamp.torch.describe_model(self.model, os.path.join(self.dir, "net"), self.batch,
                                          repetitions=3)
        with open(files["layout_file"]) as f:
            lines = [line.split() for line in f if line.strip() and not line.startswith("#")]
        self.assertEqual(lines[0], ["tamp-layout", "1"])
        expected = [[name] + [str(d) for d in p.shape]
                    for name, p in self.model.named_parameters() if p.requires_grad]
        self.assertEqual(lines[1:], expected)
        self.assertNotIn("embed.weight", [line[0] for line in lines[1:]])
        with open(files["profile_file"]) as f:
            layers = [line.split() for line in f if line.startswith("layer ")]
        self.assertEqual([layer[3:] for layer in layers],
                         [["conv.weight", "conv.bias"], ["norm.weight", "norm.bias"],
                          ["head.weight", "head.bias"]])  # Forward order.
        for layer in layers:
            self.assertGreater(float(layer[1]), 0.0)  # Forward ms.
            self.assertGreater(float(layer[2]), 0.0)  # Backward ms.
        with open(files["profile_file"]) as f:
            profile = f.read().splitlines()
        self.assertEqual(profile[0], "tamp-profile 2")
        self.assertIn("compute cpu", profile)  # Measured on the CPU, and said so.
        # The gradients are as they were: conv.weight's, and none elsewhere.
        self.assertTrue(torch.equal(self.model.conv.weight.grad,
                                    torch.ones_like(self.model.conv.weight)))
        self.assertIsNone(self.model.head.weight.grad)
        config = tamp.load_config(CONFIG.replace("LAYOUT", files["layout_file"]).replace(
            "PROFILE", files["profile_file"]))  # The C++ loader checks both files.
        self.assertIsNotNone(config)

    def test_layers_within_layers_and_parameters_used_without_a_call(self):
        # The model's own layer ("pos") spans the whole pass: it counted the others' time
        # again, and, its hook ending last, stood last, as if its gradient were readied first.
        files = tamp.torch.describe_model(RootNet(), os.path.join(self.dir, "root"), self.batch,
                                          repetitions=3)
        with open(files["profile_file"]) as f:
            text = f.read()
        layers = [line.split() for line in text.splitlines() if line.startswith("layer ")]
        names = [layer[3:] for layer in layers]
        # Readied last by backward, so first in forward (in either order: they meet at one
        # addition); out_proj between in_proj and the head, where backward readies it.
        self.assertCountEqual(names[:2], [["embed.weight"], ["pos"]])
        self.assertEqual(names[2:], [["attn.in_proj_weight", "attn.in_proj_bias"],
                                     ["attn.out_proj.weight", "attn.out_proj.bias"],
                                     ["head.weight", "head.bias"]])
        # The step is the layers' own times, each counted once.
        step_ms = float(re.search(r"one step ([0-9.]+) ms", text).group(1))
        self.assertAlmostEqual(step_ms, sum(float(l[1]) + float(l[2]) for l in layers), delta=0.01)
        inner = tamp._torch_describe._inner_layers
        self.assertEqual(inner("", ["", "a", "a.b", "c"]), ["a", "c"])
        self.assertEqual(inner("a", ["", "a", "a.b", "a.b.c", "ab"]), ["a.b"])

    def test_refusals_name_the_problem(self):
        self.model.scale = torch.nn.Parameter(torch.tensor(2.0))
        with self.assertRaises(ValueError) as raised:
            tamp.torch.describe_model(self.model, os.path.join(self.dir, "x"), self.batch)
        self.assertIn('"scale" has no dimensions', str(raised.exception))
        with self.assertRaises(ValueError) as raised:
            tamp.torch.describe_model(self.model, os.path.join(self.dir, "x"), self.batch,
                                      repetitions=0)
        self.assertIn("repetitions must be an int >= 1", str(raised.exception))
        with self.assertRaises(TypeError) as raised:  # Not (inputs..., target).
            tamp.torch.describe_model(self.model, os.path.join(self.dir, "x"), self.batch[0])
        self.assertIn("batch must be a tuple (inputs..., target)", str(raised.exception))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x.layout")))


if __name__ == "__main__":
    unittest.main()
