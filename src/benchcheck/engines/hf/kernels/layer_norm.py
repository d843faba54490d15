"""The vision tower's LayerNorms, alone and after a residual add: the references, and the inputs
the one-pass Triton kernel (``layer_norm_triton``) takes.

The fused vision block (``model.vision_block``) compiled these functions with dynamic shapes; at
a hidden size Inductor cannot hold in one program as a run-time number (the 8B tower's 1,152, the
2B's 1,024) it makes a looped reduction that reads its inputs twice: 6 passes over (tokens,
hidden) for the add and norm where 4 are needed. The kernel holds a few whole rows per program
and reads each input once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

DTYPES = (torch.float32, torch.bfloat16, torch.float16)  # computed in float32, rounded once to the output's
MAX_HIDDEN = 8192  # widest row one program holds (a power of two at or above the hidden size)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """``nn.LayerNorm`` over the last dimension."""
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def add_layer_norm(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                   eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x + y, layer_norm(x + y))``: the residual add and the next norm."""
    h = x + y
    return h, F.layer_norm(h, (h.shape[-1],), weight, bias, eps)


def supported(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, y: torch.Tensor | None = None) -> bool:
    """Inputs the kernel takes: 2-D ``x`` (and ``y`` of its shape) of one float dtype and device,
    rows of at most ``MAX_HIDDEN``, a weight and a bias of one row's length on that device."""
    if x.dim() != 2 or x.dtype not in DTYPES or not 0 < x.shape[1] <= MAX_HIDDEN:
        return False
    if y is not None and (y.shape != x.shape or y.dtype != x.dtype or y.device != x.device):
        return False
    return all(p.shape == (x.shape[1],) and p.device == x.device and p.dtype in DTYPES for p in (weight, bias))
