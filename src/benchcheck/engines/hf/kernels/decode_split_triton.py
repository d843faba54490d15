"""Attention of one new token per row over a reserved K/V cache as one Triton kernel split over
the keys (CUDA; what it computes and its reference: ``kernels.decode_split``).

One program takes one row's K/V head and one span of keys: its query heads (the ``GROUPS`` heads
sharing that K/V head, padded to ``GROUP_ROWS`` rows) meet the span's keys block by block, the
scores in float32 with the row's mask of written slots applied, an online softmax (running maximum
and sum, base 2), and the probabilities, rounded to the values' dtype as flash attention rounds
them, meet the values. It writes the span's float32 partial output, maximum and sum; ``combine``
adds the spans. Imported only where Triton is installed (``kernels.triton_available``).
"""

from __future__ import annotations

import contextlib
import math

import torch
import triton
import triton.language as tl

from benchcheck.engines.hf.kernels.decode_split import (
    BLOCK_N,
    GROUP_ROWS,
    HEAD_DIMS,
    PROGRAMS,
    combine,
    split_keys,
    supported,
)

WARPS, STAGES = 4, 3


# Lengths left unspecialised: a step of a new reservation, captured in a graph without its eager
# warm-up (op ``decode_warm_once``), must not compile a variant inside the capture.
@triton.jit(do_not_specialize=["keys", "per_split", "splits"])  # type: ignore[untyped-decorator]
def decode_split_kernel(q_ptr, k_ptr, v_ptr, mask_ptr, acc_ptr, top_ptr, total_ptr,  # type: ignore[no-untyped-def]
                        stride_qb, stride_qh, stride_kb, stride_kh, stride_vb, stride_vh, stride_mb,
                        keys, per_split, splits, kv_heads, scale_log2,
                        GROUPS: tl.constexpr, GROUP_ROWS: tl.constexpr, HEAD_DIM: tl.constexpr,
                        BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    row_head = tl.program_id(0)
    split = tl.program_id(1)
    b = (row_head // kv_heads).to(tl.int64)
    kv_head = (row_head % kv_heads).to(tl.int64)
    g = tl.arange(0, GROUP_ROWS)
    dims = tl.arange(0, HEAD_DIM)
    heads = kv_head * GROUPS + g
    q = tl.load(q_ptr + b * stride_qb + heads[:, None] * stride_qh + dims[None, :], mask=g[:, None] < GROUPS,
                other=0.0)
    k_base = k_ptr + b * stride_kb + kv_head * stride_kh
    v_base = v_ptr + b * stride_vb + kv_head * stride_vh
    m_i = tl.full([GROUP_ROWS], -1.0e30, tl.float32)  # finite: a span with no written key stays a zero
    l_i = tl.zeros([GROUP_ROWS], tl.float32)
    acc = tl.zeros([GROUP_ROWS, HEAD_DIM], tl.float32)
    start = split * per_split
    end = tl.minimum(start + per_split, keys)
    for n0 in range(start, end, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_base + cols[:, None].to(tl.int64) * HEAD_DIM + dims[None, :])
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale_log2
        written = tl.load(mask_ptr + b * stride_mb + cols) != 0
        s = tl.where(written[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None].to(tl.int64) * HEAD_DIM + dims[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    # Partial outputs (B, H, splits, D), maxima and sums (B, H, splits): natural-log maxima for combine.
    out_rows = (b * kv_heads * GROUPS + heads) * splits + split
    keep = g < GROUPS
    tl.store(acc_ptr + out_rows[:, None] * HEAD_DIM + dims[None, :], acc, mask=keep[:, None])
    tl.store(top_ptr + out_rows, m_i * 0.6931471805599453, mask=keep)
    tl.store(total_ptr + out_rows, l_i, mask=keep)


def split_decode_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor,
                           scaling: float, programs: int = PROGRAMS) -> torch.Tensor:
    """``attention.decode.decode_attention``'s result, (B, 1, H, D) in the query's dtype, from
    the split kernel over about ``programs`` programs. Float32 inputs multiply in full float32."""
    if not supported(query, key, value, mask):
        raise ValueError(f"split decode attention: q {tuple(query.shape)} {query.dtype}, k {tuple(key.shape)} "
                         f"{key.dtype}, mask {tuple(mask.shape)} {mask.dtype}: want (B, H, 1, D) over (B, Hk, S, D) "
                         f"and a (B, 1, 1, S) bool mask, D in {HEAD_DIMS}, S a multiple of {BLOCK_N}")
    b, h, _, d = query.shape
    hk, s = key.shape[1], key.shape[2]
    splits, per = split_keys(b, hk, s, programs)
    acc = torch.empty((b, h, splits, d), dtype=torch.float32, device=query.device)
    top = torch.empty((b, h, splits), dtype=torch.float32, device=query.device)
    total = torch.empty_like(top)
    # The mask's bools read as bytes (no copy).
    written = mask.view(torch.uint8)
    with torch.cuda.device(query.device) if query.is_cuda else contextlib.nullcontext():
        decode_split_kernel[(b * hk, splits)](
            query, key, value, written, acc, top, total, query.stride(0), query.stride(1), key.stride(0),
            key.stride(1), value.stride(0), value.stride(1), written.stride(0), s, per, splits, hk,
            scaling * math.log2(math.e), GROUPS=h // hk, GROUP_ROWS=GROUP_ROWS, HEAD_DIM=d, BLOCK_N=BLOCK_N,
            PRECISION="ieee" if query.dtype == torch.float32 else "tf32", num_warps=WARPS, num_stages=STAGES)
    return combine(acc, top, total).to(query.dtype).view(b, h, 1, d).transpose(1, 2)
