"""Variable-length causal attention with grouped K/V heads as one Triton kernel, for the short
sequences of a packed scoring row (CUDA).

The engine's packed rows (``attention.varlen``) ran FlashAttention-2's variable-length kernel. On the
H200, over 256 one-frame prompts of 240-256 tokens (8B heads), it took 1.35-1.38 ms a layer,
97 TFLOP/s, where cuDNN's causal kernel over the same prompts padded took 0.55: FlashAttention-2
is not written for Hopper, and ~4 % of a one-frame batch's device time was that kernel
(decisions 021 and 025). This kernel computes the same attention (the same
semantics as ``attention.varlen.reference_varlen``: each sequence causal, aligned at the bottom right,
K/V heads read in place by their groups of query heads), softmax in float32;
``benchmarks/lm_kernels.py`` times it against FlashAttention-2 at the workloads' shapes, and the
engine uses it for rows whose longest key sequence is short (``HFConfig.varlen_triton_max_keys``).

One program computes one block of ``BLOCK_M`` queries of one sequence for one query head:
the online softmax (running maximum and sum, in float32, base 2) over its key blocks, causal
aligned at the bottom right (query ``i`` of a sequence with ``n_q`` queries and ``n_k`` keys sees
keys ``j <= i + n_k - n_q``). The key blocks every query of the block sees whole run without a
mask; only the blocks across the diagonal (and the sequence's end) are masked. K/V heads are
shared by ``GROUPS`` consecutive query heads, read in place (no expansion).
``varlen_attention_tuned`` is the same kernel with its block sizes, warps and stages chosen by
timing each of ``CONFIGS`` on the first call for each head layout and dtype.

Imported only where Triton is installed (``kernels.triton_available``); what the kernel computes,
which inputs it takes and its reference are ``kernels.varlen``.
"""


import contextlib
import math

import torch
import triton
import triton.language as tl

from benchcheck.engines.hf.kernels.varlen import HEAD_DIMS, SequencePlan, supported

# (block_m queries a program, block_n keys an inner step, warps, stages): the configurations the
# kernel is timed in on its first call (``varlen_attention_tuned``), and the rows of
# ``benchmarks/lm_kernels.py``.
CONFIGS = ((64, 64, 4, 2), (64, 64, 4, 3), (64, 32, 4, 2), (128, 64, 8, 2), (128, 64, 8, 3), (128, 32, 8, 2),
           (64, 128, 8, 2))




@triton.jit  # type: ignore[untyped-decorator]
def _attend_block(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_kt, stride_vt, start_n, rows, n_k, offset,  # type: ignore[no-untyped-def]
                  scale_log2, MASKED: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    cols = start_n + tl.arange(0, BLOCK_N)
    if MASKED:
        keep = (cols[None, :] <= rows[:, None] + offset) & (cols[None, :] < n_k)
        k = tl.load(k_ptrs + cols[:, None].to(tl.int64) * stride_kt, mask=cols[:, None] < n_k, other=0.0)
        v = tl.load(v_ptrs + cols[:, None].to(tl.int64) * stride_vt, mask=cols[:, None] < n_k, other=0.0)
    else:
        k = tl.load(k_ptrs + cols[:, None].to(tl.int64) * stride_kt)
        v = tl.load(v_ptrs + cols[:, None].to(tl.int64) * stride_vt)
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale_log2
    if MASKED:
        s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return acc, m_new, l_i


@triton.jit  # type: ignore[untyped-decorator]
def varlen_attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, cu_q_ptr, cu_k_ptr,  # type: ignore[no-untyped-def]
                            stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
                            scale_log2, GROUPS: tl.constexpr, HEAD_DIM: tl.constexpr,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    # The longest query blocks (the most keys, causal) first: the last wave of programs is short.
    m_block = tl.num_programs(0) - 1 - tl.program_id(0)
    seq = tl.program_id(1)
    head = tl.program_id(2)
    q0 = tl.load(cu_q_ptr + seq)
    n_q = tl.load(cu_q_ptr + seq + 1) - q0
    start_m = m_block * BLOCK_M
    if start_m >= n_q:
        return
    k0 = tl.load(cu_k_ptr + seq)
    n_k = tl.load(cu_k_ptr + seq + 1) - k0
    offset = n_k - n_q
    rows = start_m + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    kv_head = head // GROUPS
    q_ptrs = q_ptr + (q0 + rows)[:, None].to(tl.int64) * stride_qt + head * stride_qh + dims[None, :]
    q = tl.load(q_ptrs, mask=rows[:, None] < n_q, other=0.0)
    k_ptrs = k_ptr + k0.to(tl.int64) * stride_kt + kv_head * stride_kh + dims[None, :]
    v_ptrs = v_ptr + k0.to(tl.int64) * stride_vt + kv_head * stride_vh + dims[None, :]
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # Keys [0, whole) are seen by every query of the block (the block's first query sees keys up to
    # start_m + offset) and lie inside the sequence; [whole, end) cross the diagonal or the end.
    end = tl.minimum(n_k, start_m + BLOCK_M + offset)
    whole = (tl.minimum(start_m + offset + 1, n_k) // BLOCK_N) * BLOCK_N
    for start_n in range(0, whole, BLOCK_N):
        acc, m_i, l_i = _attend_block(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_kt, stride_vt, start_n, rows, n_k,
                                      offset, scale_log2, False, BLOCK_N, PRECISION)
    for start_n in range(whole, end, BLOCK_N):
        acc, m_i, l_i = _attend_block(acc, m_i, l_i, q, k_ptrs, v_ptrs, stride_kt, stride_vt, start_n, rows, n_k,
                                      offset, scale_log2, True, BLOCK_N, PRECISION)
    out = acc / l_i[:, None]
    o_ptrs = o_ptr + (q0 + rows)[:, None].to(tl.int64) * stride_ot + head * stride_oh + dims[None, :]
    tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=rows[:, None] < n_q)


def _configs() -> list[triton.Config]:
    return [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in CONFIGS]


# Each configuration is timed with Triton's defaults (25 ms of warm-up, 100 of repetitions): about
# a second, once a process for each head layout and dtype.
varlen_attention_tuned = triton.autotune(_configs(), key=["GROUPS", "HEAD_DIM"])(varlen_attention_kernel)


def varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: SequencePlan, scale: float,
                     config: tuple[int, int, int, int] | None = None) -> torch.Tensor:
    """Attention of q (T, H, D) over k/v (K, Hk, D) by ``plan``'s cumulative query and key
    lengths; returns (T, H, D) in q's dtype. Float32 inputs multiply in full float32. ``config``:
    (block_m, block_n, warps, stages) as in ``CONFIGS``; None: the fastest of them, timed on the
    first call (CUDA only)."""
    if not supported(q, k) or v.shape != k.shape or v.dtype != k.dtype:
        raise ValueError(f"varlen attention: q {tuple(q.shape)} {q.dtype}, k {tuple(k.shape)} {k.dtype}, "
                         f"v {tuple(v.shape)} {v.dtype}: want (T, H, D) over (K, Hk, D), H a multiple of Hk, "
                         f"D in {HEAD_DIMS}, one float dtype")
    # The head dimension must be contiguous; tokens and heads may be strided (views of a projection).
    q, k, v = (t if t.stride(2) == 1 else t.contiguous() for t in (q, k, v))
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    sequences = plan.cu_q.numel() - 1
    if sequences < 1 or q.shape[0] == 0:
        return out
    args = (q, k, v, out, plan.cu_q, plan.cu_k, q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0),
            v.stride(1), out.stride(0), out.stride(1), scale * math.log2(math.e))
    fixed = {"GROUPS": q.shape[1] // k.shape[1], "HEAD_DIM": q.shape[2],
             "PRECISION": "ieee" if q.dtype == torch.float32 else "tf32"}
    max_q = max(plan.max_q, 1)
    # Triton launches on the current CUDA device (the CPU: Triton's interpreter, for tests).
    with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
        if config is None:
            def grid(meta: dict[str, int]) -> tuple[int, int, int]:
                return (triton.cdiv(max_q, meta["BLOCK_M"]), sequences, q.shape[1])
            varlen_attention_tuned[grid](*args, **fixed)
        else:
            bm, bn, warps, stages = config
            varlen_attention_kernel[(triton.cdiv(max_q, bm), sequences, q.shape[1])](
                *args, **fixed, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages)
    return out
