"""One worker training the config's MLP 784-64-10 through tamp.torch with its parameters on
argv[1] ("cpu" or "cuda"); writes the final parameters to argv[2]. tests/python_test.sh runs
it on both and compares the files byte for byte: a CUDA worker (GPU codecs where the config's
have one, host copies elsewhere) must train exactly as a CPU worker. The gradients are the
same on both devices (the loss is sum(param * g) for fixed g, whose gradient is g exactly).

Before the first step it broadcasts an object and its parameters (set to values of its own):
the device path of tamp.torch's broadcasts. The job's training.resync_steps pulls the servers'
weights back, so parameters that reached the servers other than as given end in different
weights."""

import sys

import torch

import tamp.torch


def main():
    device = torch.device(sys.argv[1])
    steps_per_epoch = 4
    tamp.torch.init(steps_per_epoch=steps_per_epoch)
    shapes = {"fc1.weight": (64, 784), "fc1.bias": (64,), "fc2.weight": (10, 64),
              "fc2.bias": (10,)}
    params = {name: torch.nn.Parameter(torch.zeros(shape, device=device))
              for name, shape in shapes.items()}
    optimizer = tamp.torch.DistributedOptimizer(torch.optim.SGD(params.values(), lr=1.0),
                                                named_parameters=params.items())
    settings = tamp.torch.broadcast_object({"steps_per_epoch": steps_per_epoch}, root_rank=0)
    if settings != {"steps_per_epoch": steps_per_epoch}:
        sys.exit(f"broadcast_object gave {settings!r}")
    # After the object (whose rounds end by sending the parameters as they are): only
    # broadcast_parameters() gives the servers these values.
    with torch.no_grad():
        for index, param in enumerate(params.values()):
            param.copy_(torch.linspace(-0.5, 0.5, param.numel()).view(param.shape) * (index + 1))
    tamp.torch.broadcast_parameters(params, root_rank=0)
    generator = torch.Generator().manual_seed(3)
    steps = tamp.count_steps(tamp.placement().config, steps_per_epoch)
    for _ in range(steps):
        grads = [torch.randn(p.shape, generator=generator).to(device) for p in params.values()]
        optimizer.zero_grad()
        loss = sum((p * g).sum() for p, g in zip(params.values(), grads))
        loss.backward()
        optimizer.step()
    with open(sys.argv[2], "wb") as out:
        for param in params.values():
            out.write(param.detach().cpu().numpy().tobytes())
    print(f"{device}: {steps} steps")


if __name__ == "__main__":
    main()
