"""tamp.torch.describe_model(): the layout and profile files of a PyTorch model, valid for a
`model { kind: REGISTERED layout_file profile_file }` config (the C++ loader checks both),
holding exactly the tensors the model registers; refusals by name. No servers needed."""

import os
import tempfile
import unittest

import torch

import tamp
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
        # The gradients are as they were: conv.weight's, and none elsewhere.
        self.assertTrue(torch.equal(self.model.conv.weight.grad,
                                    torch.ones_like(self.model.conv.weight)))
        self.assertIsNone(self.model.head.weight.grad)
        config = tamp.load_config(CONFIG.replace("LAYOUT", files["layout_file"]).replace(
            "PROFILE", files["profile_file"]))  # The C++ loader checks both files.
        self.assertIsNotNone(config)

    def test_refusals_name_the_problem(self):
        self.model.scale = torch.nn.Parameter(torch.tensor(2.0))
        with self.assertRaises(ValueError) as raised:
            tamp.torch.describe_model(self.model, os.path.join(self.dir, "x"), self.batch)
        self.assertIn('"scale" has no dimensions', str(raised.exception))
        with self.assertRaises(ValueError) as raised:
            tamp.torch.describe_model(self.model, os.path.join(self.dir, "x"), self.batch,
                                      repetitions=0)
        self.assertIn("repetitions must be an int >= 1", str(raised.exception))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x.layout")))


if __name__ == "__main__":
    unittest.main()
