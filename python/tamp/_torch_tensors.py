"""How tamp.torch hands torch tensors to the client: the checks that name a tensor the job
cannot take (dtype, device, layout, sparse gradients), and the exports the client reads
(DLPack capsules, CUDA streams). Imports nothing of tamp.torch."""

from typing import Optional

import torch
import torch.utils.dlpack


def check_tensor(name: str, tensor: torch.Tensor) -> None:
    """ValueError naming tensor `name` where a job cannot take it: not fp32, on neither the
    CPU nor a CUDA device, or not contiguous."""
    if tensor.dtype != torch.float32:
        raise ValueError(f'tensor "{name}": expected torch.float32, got {tensor.dtype}: Tamp '
                         "jobs are fp32; convert the model with model.float() before "
                         "registering it")
    if tensor.device.type not in ("cpu", "cuda"):
        raise ValueError(f'tensor "{name}": on {tensor.device}; tamp.torch takes CPU and CUDA '
                         "tensors")
    if not tensor.is_contiguous():
        raise ValueError(f'tensor "{name}": not contiguous{layout_hint(tensor)}; Tamp takes '
                         "row-major tensors: pass a contiguous one")


def gradient_refusal(name: str, gradient: torch.Tensor) -> str:
    """Why tensor `name`'s gradient cannot be pushed: not dense, not contiguous, or not fp32."""
    if gradient.layout != torch.strided:
        return (f'tensor "{name}": its gradient is {gradient.layout} (nn.Embedding(sparse=True) '
                "or another module with sparse gradients?); Tamp pushes dense gradients: "
                "use sparse=False, or DistributedOptimizer(sparse_as_dense=True) when you wrap "
                "the optimizer; in a step under way, make it dense (param.grad = "
                "param.grad.to_dense()), then step()")
    if not gradient.is_contiguous():
        return (f'tensor "{name}": its gradient is not contiguous{layout_hint(gradient)} (the '
                "parameter's layout changed after it was registered?); Tamp takes row-major "
                "tensors")
    return (f'tensor "{name}": its gradient is {gradient.dtype}, the job registered '
            "torch.float32 (the model converted after registration, or autocast?); Tamp jobs "
            "are fp32: convert the model with model.float() before registering it")


def layout_hint(tensor: torch.Tensor) -> str:
    """Why a 4-D tensor is not contiguous, when it is channels_last."""
    if tensor.dim() == 4 and tensor.is_contiguous(memory_format=torch.channels_last):
        return (" (torch.channels_last memory format: keep the model in "
                "torch.contiguous_format)")
    return ""


def exported(tensor: torch.Tensor):
    """`tensor` as the client takes it: a CPU tensor's DLPack capsule, exported by torch's C++
    (its __dlpack_device__() and __dlpack__() would be two Python calls, ~5 us a tensor, and a
    step passes each parameter three times); a CUDA tensor itself, whose __dlpack__(stream=)
    orders torch's pending work on it before what the client enqueues on the stream."""
    return tensor if tensor.is_cuda else torch.utils.dlpack.to_dlpack(tensor)


def stream(tensor: torch.Tensor) -> Optional[int]:
    """torch's current stream on a CUDA tensor's device, for the client's device work."""
    if not tensor.is_cuda:  # A flag read; tensor.device builds a string (each push asks).
        return None
    return torch.cuda.current_stream(tensor.device).cuda_stream


def memory(tensor) -> Optional[int]:
    """Where a tensor's values start, to tell two names of one tensor (tied weights); None
    for what is not a tensor or holds no values (empty tensors share address 0)."""
    if isinstance(tensor, torch.Tensor) and tensor.numel() > 0:
        return tensor.data_ptr()
    return None
