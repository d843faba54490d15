"""Host-to-device copies that never wait for the device.

A copy from ordinary (pageable) host memory makes CUDA wait until everything already queued on
the stream has run before it starts (the CUDA runtime's documented synchronization for pageable
transfers). The engine queues batch N+1 while the device still works on batch N, and every such
copy in building N+1 (token ids, positions, masks, frames) emptied the queue: the device then sat
idle while the host built the rest of the batch. A copy from page-locked memory with
``non_blocking`` is queued like a kernel; the caching host allocator keeps the buffer alive until
the copy has run.
"""

from __future__ import annotations

import numpy as np
import torch


def to_device(t: torch.Tensor | np.ndarray, device: torch.device, pinned: bool = False) -> torch.Tensor:
    """``t`` on ``device``; from page-locked memory, without waiting, when ``device`` is CUDA
    (``pinned``: ``t`` is page-locked already, from ``pinned_empty``)."""
    x = torch.from_numpy(np.ascontiguousarray(t)) if isinstance(t, np.ndarray) else t
    if device.type != "cuda" or x.device.type != "cpu":
        return x.to(device)
    if pinned:
        return x.to(device, non_blocking=True)
    # Into a fresh page-locked buffer (the caching host allocator reuses its blocks) rather than
    # ``pin_memory()``, whose check whether ``x`` is pinned already costs a driver call.
    host = torch.empty(x.shape, dtype=x.dtype, pin_memory=True)
    host.copy_(x)
    return host.to(device, non_blocking=True)


def pinned_empty(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A host buffer to fill and then copy with ``to_device``: page-locked when ``device`` is CUDA
    (filling it in place saves the second host copy that pinning a filled array costs)."""
    return torch.empty(shape, dtype=dtype, pin_memory=device.type == "cuda")
