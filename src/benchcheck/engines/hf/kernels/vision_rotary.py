"""The vision tower's rotary embedding as one pass over the qkv projection (Qwen3-VL, CUDA).

transformers' ``apply_rotary_pos_emb_vision`` takes q and k as strided views of the qkv
projection, upcasts them to float32 and builds ``rotate_half`` with a concatenation. Even compiled
into one kernel (``model.fused.compiled_vision_rotary``) it ran at about 0.9 TB/s on the H200, a fifth
of the memory's bandwidth: 7 % of the device time of a 2B 32-frame batch. Here one Triton kernel
reads each q/k element of the projection output once, with static head size and the half-split
form

    out1 = x1 * cos1 - x2 * sin1,    out2 = x2 * cos2 + x1 * sin2

(x1, x2 the halves of a head; the same float32 products and sum as transformers' ``q * cos +
rotate_half(q) * sin``, negation being exact), and writes q and k in bf16 as one (2, patches,
heads, head_dim) buffer: the (patches, heads, head_dim) layout whose per-image views SDPA reads
directly. v stays a view of the projection output (SDPA reads it in place).

``qkv_rotary_eager`` is the same function in plain torch (bit for bit transformers' result on the
CPU in float32); the kernel is checked against it on the GPU (``benchmarks/vision_rotary.py``).
"""

from __future__ import annotations

import torch

ROWS = 4  # patches per program: 4 x 16 heads x 64 x 2 (q and k) x 2 bytes = 16 KB read per program
WARPS = 4


def supported(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int) -> bool:
    """Inputs the kernel takes: qkv (patches, 3 * heads * head_dim) with an even head_dim, cos and
    sin (patches, head_dim)."""
    if qkv.dim() != 2 or heads < 1 or qkv.shape[1] % (3 * heads):
        return False
    seq, dim = qkv.shape[0], qkv.shape[1] // (3 * heads)
    return dim % 2 == 0 and tuple(cos.shape) == (seq, dim) and cos.shape == sin.shape


def qkv_rotary_eager(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k of ``qkv`` (patches, 3 * heads * head_dim), rotated (cos, sin: (patches, head_dim)),
    in ``qkv``'s dtype, as the two halves of one contiguous (2, patches, heads, head_dim) buffer."""
    seq = qkv.shape[0]
    math = torch.promote_types(qkv.dtype, torch.float32)  # float32 as transformers (float64 stays)
    x = qkv.reshape(seq, 3, heads, -1)[:, :2].to(math)  # (patches, 2, heads, head_dim)
    dim = x.shape[-1]
    half = dim // 2
    x1, x2 = x[..., :half], x[..., half:]
    c = cos.to(math)[:, None, None, :]
    s = sin.to(math)[:, None, None, :]
    out = torch.empty((2, seq, heads, dim), dtype=qkv.dtype, device=qkv.device)
    o = out.permute(1, 0, 2, 3)  # (patches, 2, heads, head_dim) view of the output
    o[..., :half] = x1 * c[..., :half] - x2 * s[..., :half]
    o[..., half:] = x2 * c[..., half:] + x1 * s[..., half:]
    return out[0], out[1]


