"""Which of SDPA's kernels attention may use where its shapes are new at almost every call.

SDPA ranks cuDNN's kernel first whenever it is merely allowed, and cuDNN builds an execution
graph for every new shape: prefix-shared rows have a new width almost every batch, which cost
the launching thread 6.2 ms a call, 1.35 s per 2.2 s of device work on the 8B blind workload
(H200 profile), so the device waited on the host. So masked attention runs on the
memory-efficient kernel (or the math one, where that cannot take the inputs).

Generation's decode steps run so too (``decode_kernels``): a step that appends to its cache
attends over one key more than the step before, so cuDNN built a graph at every step of every
batch while the device waited (decision 107). Fixed-shape steps (graphs, padded batches) do not
use SDPA at all (``attention.decode.decode_attention``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

MASKED_KERNELS: tuple[str, ...] = ("EFFICIENT_ATTENTION", "MATH")  # SDPA backends for masked attention


def masked_attention_kernels(device: torch.device) -> contextlib.AbstractContextManager[None]:
    """On CUDA, only ``MASKED_KERNELS`` for the block; elsewhere nothing changes."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, name) for name in MASKED_KERNELS])


@contextlib.contextmanager
def _cudnn_off() -> Iterator[None]:
    was = torch.backends.cuda.cudnn_sdp_enabled()  # type: ignore[no-untyped-call]
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        yield
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


def decode_kernels(planless: bool) -> contextlib.AbstractContextManager[None]:
    """With ``planless``, SDPA's cuDNN kernel off for the block (the other kernels as they were),
    on every device (the switch only matters on CUDA; elsewhere tests can see it). The switch is
    process-wide: the engine's device lock keeps its own other calls out meanwhile."""
    return _cudnn_off() if planless else contextlib.nullcontext()
