"""Attention of one new token per row over a reserved K/V cache as one Triton kernel split over
the keys (CUDA; what it computes and its reference: ``kernels.decode_split``).

One program takes one row's K/V head and one span of keys: its query heads (the ``GROUPS`` heads
sharing that K/V head, padded to ``GROUP_ROWS`` rows) meet the span's keys block by block, the
scores in float32 with the row's mask of written slots applied, an online softmax (running maximum
and sum, base 2), and the probabilities, rounded to the values' dtype as flash attention rounds
them, meet the values. It writes the span's float32 partial output, maximum and sum; a second
kernel (``combine_kernel``, one program a row and query head) weighs the spans by their maxima and
adds them, as ``decode_split.combine`` does with torch's operations. Imported only where Triton is
installed (``kernels.triton_available``).
"""

from __future__ import annotations

import contextlib
import math

import torch
import triton
import triton.language as tl

from benchcheck.engines.hf.kernels import decode_split
from benchcheck.engines.hf.kernels.decode_split import GROUP_ROWS, HEAD_DIMS, Tuning, combine, split_keys, supported

COMBINE_SPANS = 16  # spans a combine program reads at a time


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


# ``splits`` left unspecialised for the same reason as the kernel's lengths.
@triton.jit(do_not_specialize=["splits"])  # type: ignore[untyped-decorator]
def combine_kernel(acc_ptr, top_ptr, total_ptr, out_ptr, splits,  # type: ignore[no-untyped-def]
                   HEAD_DIM: tl.constexpr, SPANS: tl.constexpr):
    # One row and query head: its spans' maxima first, then their outputs and sums weighed by them.
    row = tl.program_id(0).to(tl.int64)
    base = row * splits
    s = tl.arange(0, SPANS)
    dims = tl.arange(0, HEAD_DIM)
    top = tl.full([SPANS], float("-inf"), tl.float32)
    for s0 in range(0, splits, SPANS):
        top = tl.maximum(top, tl.load(top_ptr + base + s0 + s, mask=s0 + s < splits, other=float("-inf")))
    most = tl.max(top, 0)
    num = tl.zeros([HEAD_DIM], tl.float32)
    den = tl.zeros([SPANS], tl.float32)
    for s0 in range(0, splits, SPANS):
        keep = s0 + s < splits
        weight = tl.exp(tl.load(top_ptr + base + s0 + s, mask=keep, other=float("-inf")) - most)
        den += weight * tl.load(total_ptr + base + s0 + s, mask=keep, other=0.0)
        acc = tl.load(acc_ptr + (base + s0 + s[:, None]) * HEAD_DIM + dims[None, :], mask=keep[:, None], other=0.0)
        num += tl.sum(acc * weight[:, None], 0)
    tl.store(out_ptr + row * HEAD_DIM + dims, (num / tl.sum(den, 0)).to(out_ptr.dtype.element_ty))


def split_decode_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor,
                           scaling: float, tuning: Tuning | None = None) -> torch.Tensor:
    """``attention.decode.decode_attention``'s result, (B, 1, H, D) in the query's dtype, from
    the split kernel launched as ``tuning`` says (``decode_split.TUNING`` when None). Float32
    inputs multiply in full float32."""
    if not supported(query, key, value, mask):
        raise ValueError(f"split decode attention: q {tuple(query.shape)} {query.dtype}, k {tuple(key.shape)} "
                         f"{key.dtype}, mask {tuple(mask.shape)} {mask.dtype}: want (B, H, 1, D) over (B, Hk, S, D) "
                         f"and a (B, 1, 1, S) bool mask, D in {HEAD_DIMS}, S a multiple of {decode_split.BLOCK_N}")
    tune = tuning or decode_split.TUNING
    b, h, _, d = query.shape
    hk, s = key.shape[1], key.shape[2]
    block_n = tune.block_n if s % tune.block_n == 0 else decode_split.BLOCK_N
    splits, per = split_keys(b, hk, s, tune.programs, block_n)
    acc = torch.empty((b, h, splits, d), dtype=torch.float32, device=query.device)
    top = torch.empty((b, h, splits), dtype=torch.float32, device=query.device)
    total = torch.empty_like(top)
    # The mask's bools read as bytes (no copy).
    written = mask.view(torch.uint8)
    with torch.cuda.device(query.device) if query.is_cuda else contextlib.nullcontext():
        decode_split_kernel[(b * hk, splits)](
            query, key, value, written, acc, top, total, query.stride(0), query.stride(1), key.stride(0),
            key.stride(1), value.stride(0), value.stride(1), written.stride(0), s, per, splits, hk,
            scaling * math.log2(math.e), GROUPS=h // hk, GROUP_ROWS=GROUP_ROWS, HEAD_DIM=d, BLOCK_N=block_n,
            PRECISION="ieee" if query.dtype == torch.float32 else "tf32", num_warps=tune.warps,
            num_stages=tune.stages)
        if not tune.fused_combine:
            return combine(acc, top, total).to(query.dtype).view(b, h, 1, d).transpose(1, 2)
        out = torch.empty((b, 1, h, d), dtype=query.dtype, device=query.device)
        combine_kernel[(b * h,)](acc, top, total, out, splits, HEAD_DIM=d, SPANS=COMBINE_SPANS)
    return out
