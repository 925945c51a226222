"""tamp.torch.describe_model(): a PyTorch model's layout and compute profile files, so that a
`model { kind: REGISTERED }` job can be planned before its workers register: `tamp model
CONFIG --auto` and `compression.automatic` under `tamp run` (docs/auto.md) read them
(job/layout_file.h has both formats).

The layout lists the trainable parameters (names and shapes, in registration order: the
order of model.named_parameters()). The profile measures, on the caller's batch and device,
each layer's forward and backward time, a layer being a module that owns trainable
parameters itself: forward from its forward pre-hook to its forward hook; backward from the
gradient of its output arriving to the last of its parameters' gradients. A module whose
output is not one tensor gets twice its forward time as backward (the shipped profiles'
rule). A layer that holds other layers (the model itself owning a positional embedding, a
block owning a scale) counts its own time only: its span less theirs. Medians over
`repetitions` passes after two unmeasured ones. The profile lists the layers in the order
backward readies their gradients, last first: forward order for a plain stack, and the
place of parameters a module uses without calling its forward (MultiheadAttention's
out_proj).

Threading: the caller's; it runs forward and backward on the model, leaving the parameters'
.grad as it found them.
"""

import statistics
import time
from typing import Callable, Dict, List

import torch

import tamp


def _layers(model: torch.nn.Module):
    """(module name, module, [(parameter name, parameter)]) per module owning trainable
    parameters directly; each parameter once (a tied one under its first owner)."""
    seen, layers = set(), []
    for module_name, module in model.named_modules():
        own = []
        for name, param in module.named_parameters(recurse=False):
            if param.requires_grad and id(param) not in seen:
                seen.add(id(param))
                own.append((f"{module_name}.{name}" if module_name else name, param))
        if own:
            layers.append((module_name, module, own))
    return layers


def _inner_layers(name: str, layers) -> List[str]:
    """The layers directly inside layer `name` (the model's own is ""): below it in the module
    tree with no other layer between."""
    prefix = f"{name}." if name else ""
    inside = [other for other in layers if other != name and other.startswith(prefix)]
    return [other for other in inside
            if not any(other.startswith(f"{between}.") for between in inside)]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def describe_model(model: torch.nn.Module, path_prefix: str, batch,
                   loss_fn: Callable = None, repetitions: int = 10) -> Dict[str, str]:
    """Writes <path_prefix>.layout and <path_prefix>.profile for `model`; returns their paths
    as {"layout_file": ..., "profile_file": ...}.

    batch: a tuple (inputs..., target), e.g. (x, y): model(*batch[:-1]) is timed and
    loss_fn(output, batch[-1]) gives the loss (default cross entropy); TypeError for anything
    else (a bare tensor). ValueError naming the parameter for one
    the layout format cannot hold (no dimensions: a 0-dim parameter) and for a model with no
    trainable parameter.
    """
    tamp._check_count("describe_model", "repetitions", repetitions)
    # A bare tensor would be split along its first dimension into inputs and target.
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise TypeError("describe_model: batch must be a tuple (inputs..., target), e.g. (x, y): "
                        f"model(*batch[:-1]) is timed against batch[-1]; got a "
                        f"{type(batch).__name__}" + (f" of {len(batch)}" if isinstance(
                            batch, (tuple, list)) else ""))
    loss_fn = loss_fn or torch.nn.functional.cross_entropy
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ValueError("describe_model: the model has no trainable parameter")
    for name, param in named:
        if param.dim() == 0:
            raise ValueError(f'describe_model: parameter "{name}" has no dimensions; the layout '
                             "file takes 1 to 8 (reshape it to [1])")
    layers = _layers(model)
    device = named[0][1].device
    times: Dict[str, Dict[str, float]] = {}
    handles = []

    def on_forward_pre(layer):
        def hook(module, inputs):
            _sync(device)
            times[layer]["forward_start"] = time.perf_counter()
        return hook

    def on_forward(layer):
        def hook(module, inputs, output):
            _sync(device)
            now = time.perf_counter()
            times[layer]["forward_ms"] = 1000 * (now - times[layer]["forward_start"])
            if isinstance(output, torch.Tensor) and output.requires_grad:
                def output_grad(grad):
                    _sync(device)
                    times[layer]["backward_start"] = time.perf_counter()
                output.register_hook(output_grad)
        return hook

    def on_param_grad(layer):
        def hook(grad):
            _sync(device)
            times[layer]["backward_end"] = max(times[layer].get("backward_end", 0.0),
                                               time.perf_counter())
        return hook

    for module_name, module, own in layers:
        handles.append(module.register_forward_pre_hook(on_forward_pre(module_name)))
        handles.append(module.register_forward_hook(on_forward(module_name)))
        for _, param in own:
            handles.append(param.register_hook(on_param_grad(module_name)))
    saved = [p.grad for _, p in named]
    samples: Dict[str, List[List[float]]] = {name: [] for name, _, _ in layers}
    readied: Dict[str, float] = {}  # The last pass: when backward readied each layer's last.
    try:
        for repetition in range(repetitions + 2):
            for name, _, _ in layers:
                times[name] = {}
            for _, param in named:
                param.grad = None
            loss_fn(model(*batch[:-1]), batch[-1]).backward()
            if repetition < 2:
                continue
            for name, _, _ in layers:
                t = times[name]
                forward = t.get("forward_ms", 0.0)
                backward = (1000 * (t["backward_end"] - t["backward_start"])
                            if "backward_start" in t and "backward_end" in t
                            and t["backward_end"] >= t["backward_start"] else 2 * forward)
                samples[name].append([forward, backward])
                if "backward_end" in t:
                    readied[name] = t["backward_end"]
    finally:
        for handle in handles:
            handle.remove()
        for (_, param), grad in zip(named, saved):
            param.grad = grad
    owners = {name: own for name, _, own in layers}
    spans = {name: [statistics.median(s[i] for s in measured) if measured else 0.0
                    for i in (0, 1)] for name, measured in samples.items()}
    own_ms = {name: [max(0.0, span - sum(spans[inner][i] for inner in _inner_layers(name, spans)))
                     for i, span in enumerate(spans[name])] for name in spans}
    # Readied last in backward, first in forward; layers backward never reached (unused this
    # batch) last, at no cost.
    ran = sorted(readied, key=readied.get, reverse=True)
    ran += [name for name, _, _ in layers if name not in readied]
    layout_path, profile_path = f"{path_prefix}.layout", f"{path_prefix}.profile"
    with open(layout_path, "w") as out:
        out.write("tamp-layout 1\n# written by tamp.torch.describe_model(): "
                  f"{type(model).__name__}, {len(named)} tensors, "
                  f"{sum(p.numel() for _, p in named):,} parameters\n")
        for name, param in named:
            out.write(f"{name} {' '.join(str(d) for d in param.shape)}\n")
    step_ms = 0.0
    lines = []
    for name in ran:
        forward, backward = own_ms[name]
        step_ms += forward + backward
        lines.append(f"layer {forward:.4f} {backward:.4f} "
                     f"{' '.join(param_name for param_name, _ in owners[name])}\n")
    with open(profile_path, "w") as out:
        # Version 2 says where the compute ran: on the CPU it shares the cores with the
        # servers and the codecs, and `tamp model` counts it so (job/layout_file.h).
        out.write(f"tamp-profile 2\n# written by tamp.torch.describe_model(): measured on "
                  f"{device}, batch of {len(batch[-1])}, median of {repetitions}; one step "
                  f"{step_ms:.2f} ms\nscale 1\n"
                  f"compute {'cpu' if device.type == 'cpu' else 'accelerator'}\n")
        out.writelines(lines)
    return {"layout_file": layout_path, "profile_file": profile_path}
