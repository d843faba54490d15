"""Which of SDPA's kernels attention with a mask may use on CUDA (the prefix tree mask's rule).

SDPA ranks cuDNN's kernel first whenever it is merely allowed, and cuDNN builds an execution
graph for every new shape: prefix-shared rows have a new width almost every batch, which cost
the launching thread 6.2 ms a call, 1.35 s per 2.2 s of device work on the 8B blind workload
(H200 profile), so the device waited on the host. So masked attention runs on the
memory-efficient kernel (or the math one, where that cannot take the inputs). Generation's
decode steps do not use SDPA with a mask (``forward.generate.decode_attention``).
"""

from __future__ import annotations

import contextlib

import torch

MASKED_KERNELS: tuple[str, ...] = ("EFFICIENT_ATTENTION", "MATH")  # SDPA backends for masked attention


def masked_attention_kernels(device: torch.device) -> contextlib.AbstractContextManager[None]:
    """On CUDA, only ``MASKED_KERNELS`` for the block; elsewhere nothing changes."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, name) for name in MASKED_KERNELS])
