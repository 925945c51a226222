"""One worker of a 2-worker job under `tamp run` whose script reports nothing itself
(tests/python_run_test.sh checks the run's summary): tamp.torch prints the progress events.

    auto_report_worker.py silent    DistributedOptimizer, step() without closure
    auto_report_worker.py closure   step(closure), which gives the loss; report_eval(0.625)
                                    once at the end (the DONE carries it)
"""

import sys

import torch

import tamp.torch
from torch_worker import Mlp


def main():
    mode = sys.argv[1]
    steps_per_epoch = 10
    tamp.torch.init(steps_per_epoch=steps_per_epoch)
    torch.manual_seed(100 + tamp.torch.rank())
    model = Mlp()
    settings = tamp.placement().config.optimizer
    optimizer = tamp.torch.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=settings["lr"], momentum=settings["momentum"]),
        named_parameters=model.named_parameters())
    steps = tamp.count_steps(tamp.placement().config, steps_per_epoch)
    for _ in range(steps):
        x, y = torch.randn(32, 784), torch.randint(0, 10, (32,))

        def closure():
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            return loss

        if mode == "closure":
            optimizer.step(closure)
        else:
            closure()
            optimizer.step()
    if mode == "closure":
        tamp.torch.report_eval(0.625)
    print(f"rank {tamp.torch.rank()}: {steps} steps, no report_step() or report_done()")
    # No shutdown(): the interpreter's exit ends the reports.


if __name__ == "__main__":
    main()
