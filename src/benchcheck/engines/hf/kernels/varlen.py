"""Variable-length causal attention with grouped K/V heads: what the kernel computes, the inputs
it takes, and its reference (no Triton needed).

Each sequence's queries attend causally, aligned at the bottom right (query ``i`` of a sequence
with ``n_q`` queries and ``n_k`` keys sees keys ``j <= i + n_k - n_q``), to that sequence's keys;
K/V heads are shared by groups of query heads. ``reference_varlen`` is that, one SDPA call per
sequence; the Triton kernel (``varlen_triton``) and FlashAttention-2 (``attention.varlen``) are
checked against it.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F


class SequencePlan(Protocol):
    """The query and key sequences of one packed row (``attention.varlen.VarlenPlan``)."""

    @property
    def cu_q(self) -> torch.Tensor: ...  # (S+1,) int32 cumulative query lengths, on the device
    @property
    def cu_k(self) -> torch.Tensor: ...  # (S+1,) int32 cumulative key lengths
    @property
    def max_q(self) -> int: ...
    @property
    def max_k(self) -> int: ...
    @property
    def host_cu_q(self) -> np.ndarray: ...  # the same on the host
    @property
    def host_cu_k(self) -> np.ndarray: ...


DTYPES = (torch.float32, torch.bfloat16, torch.float16)
HEAD_DIMS = (16, 32, 64, 128, 256)  # the kernel's arange needs a power of two (Qwen3-VL: 128)


def supported(q: torch.Tensor, k: torch.Tensor) -> bool:
    """Shapes and dtypes the kernel takes: (T, H, D) queries over (K, Hk, D) keys, H a multiple
    of Hk, D a power of two from 16 to 256, a float dtype."""
    return (q.dim() == 3 and k.dim() == 3 and q.shape[2] == k.shape[2] and q.shape[2] in HEAD_DIMS
            and q.shape[1] % k.shape[1] == 0 and q.dtype == k.dtype and q.dtype in DTYPES)


def reference_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: SequencePlan,
                     scale: float) -> torch.Tensor:
    """``flash_varlen``'s semantics, one SDPA call per sequence with an explicit bottom-right
    causal mask and K/V heads repeated (any device and dtype; for checks and the CPU)."""
    groups = q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    cq, ck = plan.host_cu_q.tolist(), plan.host_cu_k.tolist()
    for s in range(len(cq) - 1):
        qs = q[cq[s] : cq[s + 1]].transpose(0, 1)  # (H, n_q, D)
        ks = k[ck[s] : ck[s + 1]].transpose(0, 1).repeat_interleave(groups, 0)
        vs = v[ck[s] : ck[s + 1]].transpose(0, 1).repeat_interleave(groups, 0)
        n_q, n_k = qs.shape[1], ks.shape[1]
        rows = torch.arange(n_q, device=q.device)[:, None] + (n_k - n_q)
        mask = torch.arange(n_k, device=q.device)[None, :] <= rows
        out[cq[s] : cq[s + 1]] = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=scale).transpose(0, 1)
    return out
