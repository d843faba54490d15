"""The Triton kernel of the vision rotary embedding, and its launcher ``qkv_rotary`` (imported only
where Triton is installed; the contract and reference are ``kernels.vision_rotary``).

One program rotates ``ROWS`` patches: every head of q and k, both halves of each head, with cos
and sin loaded once for all of them. Reads each q/k element of the qkv projection once, writes
the (2, patches, heads, head_dim) output once; float32 math, then the output's dtype (round to
nearest, as ``Tensor.to``).
"""

import torch
import triton
import triton.language as tl

from benchcheck.engines.hf.kernels.vision_rotary import ROWS, WARPS, supported


@triton.jit  # type: ignore[untyped-decorator]
def qkv_rotary_kernel(qkv_ptr, cos_ptr, sin_ptr, out_ptr, seq, qkv_stride, cs_stride,  # type: ignore[no-untyped-def]
                      HEADS: tl.constexpr, HEADS_P: tl.constexpr, HALF: tl.constexpr, HALF_P: tl.constexpr,
                      ROWS: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    r3 = rows[:, None, None]
    h3 = tl.arange(0, HEADS_P)[None, :, None]
    j3 = tl.arange(0, HALF_P)[None, None, :]
    cmask = (r3 < seq) & (j3 < HALF)
    mask = cmask & (h3 < HEADS)
    cs = r3 * cs_stride + j3  # (ROWS, 1, HALF_P): shared by every head, q and k
    cos1 = tl.load(cos_ptr + cs, mask=cmask, other=0.0).to(tl.float32)
    cos2 = tl.load(cos_ptr + cs + HALF, mask=cmask, other=0.0).to(tl.float32)
    sin1 = tl.load(sin_ptr + cs, mask=cmask, other=0.0).to(tl.float32)
    sin2 = tl.load(sin_ptr + cs + HALF, mask=cmask, other=0.0).to(tl.float32)
    width = HEADS * 2 * HALF
    src = r3 * qkv_stride + h3 * (2 * HALF) + j3
    dst = r3 * width + h3 * (2 * HALF) + j3
    for which in tl.static_range(2):  # q, then k
        x1 = tl.load(qkv_ptr + src + which * width, mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(qkv_ptr + src + which * width + HALF, mask=mask, other=0.0).to(tl.float32)
        o = out_ptr + which * seq * width + dst
        tl.store(o, (x1 * cos1 - x2 * sin1).to(out_ptr.dtype.element_ty), mask=mask)
        tl.store(o + HALF, (x2 * cos2 + x1 * sin2).to(out_ptr.dtype.element_ty), mask=mask)


def qkv_rotary(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int,
               out: torch.Tensor | None = None, rows: int = ROWS,
               warps: int = WARPS) -> tuple[torch.Tensor, torch.Tensor]:
    """``qkv_rotary_eager`` as one Triton kernel (CUDA, or Triton's interpreter); ``out``: the
    (2, patches, heads, head_dim) buffer to write (allocated when None)."""
    if not supported(qkv, cos, sin, heads):
        raise ValueError(f"qkv_rotary: qkv {tuple(qkv.shape)} with {heads} heads, cos {tuple(cos.shape)}")
    seq, dim = qkv.shape[0], qkv.shape[1] // (3 * heads)
    qkv = qkv if qkv.stride(1) == 1 else qkv.contiguous()  # the projection's output: contiguous already
    cos, sin = cos.contiguous(), sin.contiguous()  # (no copies for the tower's own)
    if out is None:
        out = torch.empty((2, seq, heads, dim), dtype=qkv.dtype, device=qkv.device)
    half = dim // 2
    grid = (triton.cdiv(seq, rows),)
    qkv_rotary_kernel[grid](qkv, cos, sin, out, seq, qkv.stride(0), cos.stride(0),
                            HEADS=heads, HEADS_P=triton.next_power_of_2(heads), HALF=half,
                            HALF_P=triton.next_power_of_2(half), ROWS=rows, num_warps=warps)
    return out[0], out[1]
