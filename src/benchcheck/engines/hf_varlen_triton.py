"""Variable-length causal attention with grouped K/V heads as one Triton kernel, for the short
sequences of a packed scoring row (CUDA).

The engine's packed rows (``hf_varlen``) ran FlashAttention-2's variable-length kernel. On the
H200, over 256 one-frame prompts of 240-256 tokens (8B heads), it took 1.35-1.38 ms a layer,
97 TFLOP/s, where cuDNN's causal kernel over the same prompts padded took 0.55: FlashAttention-2
is not written for Hopper, and ~4 % of a one-frame batch's device time was that kernel
(docs/PERFORMANCE.md, rounds 9-11). This kernel computes the same attention (the same
semantics as ``hf_varlen.reference_varlen``: each sequence causal, aligned at the bottom right,
K/V heads read in place by their groups of query heads), softmax in float32;
``benchmarks/lm_kernels.py`` times it against FlashAttention-2 at the workloads' shapes, and the
engine uses it for rows whose longest key sequence is short (``HFConfig.varlen_triton_max_keys``).
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from benchcheck.engines.hf_varlen import VarlenPlan

# (block_m queries a program, block_n keys an inner step, warps, stages): the configurations the
# kernel is timed in on its first call (``hf_varlen_kernel.varlen_attention_tuned``), and the rows of
# ``benchmarks/lm_kernels.py``.
CONFIGS = ((64, 64, 4, 2), (64, 64, 4, 3), (64, 32, 4, 2), (128, 64, 8, 2), (128, 64, 8, 3), (128, 32, 8, 2),
           (64, 128, 8, 2))
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
HEAD_DIMS = (16, 32, 64, 128, 256)  # the kernel's arange needs a power of two (Qwen3-VL: 128)


@functools.cache
def triton_available() -> bool:
    """Triton can be imported and run (torch's CUDA builds bring it)."""
    try:
        from torch.utils._triton import has_triton
    except ImportError:
        return False
    return bool(has_triton())


def supported(q: torch.Tensor, k: torch.Tensor) -> bool:
    """Shapes and dtypes the kernel takes: (T, H, D) queries over (K, Hk, D) keys, H a multiple
    of Hk, D a power of two from 16 to 256, a float dtype."""
    return (q.dim() == 3 and k.dim() == 3 and q.shape[2] == k.shape[2] and q.shape[2] in HEAD_DIMS
            and q.shape[1] % k.shape[1] == 0 and q.dtype == k.dtype and q.dtype in DTYPES)


def varlen_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: VarlenPlan, scale: float,
                     config: tuple[int, int, int, int] | None = None) -> torch.Tensor:
    """Attention of q (T, H, D) over k/v (K, Hk, D) by ``plan``'s cumulative query and key
    lengths; returns (T, H, D) in q's dtype. Float32 inputs multiply in full float32. ``config``:
    (block_m, block_n, warps, stages) as in ``CONFIGS``; None: the fastest of them, timed on the
    first call (CUDA only)."""
    if not supported(q, k) or v.shape != k.shape or v.dtype != k.dtype:
        raise ValueError(f"varlen attention: q {tuple(q.shape)} {q.dtype}, k {tuple(k.shape)} {k.dtype}, "
                         f"v {tuple(v.shape)} {v.dtype}: want (T, H, D) over (K, Hk, D), H a multiple of Hk, "
                         f"D in {HEAD_DIMS}, one float dtype")
    import triton

    from benchcheck.engines import hf_varlen_kernel

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
            hf_varlen_kernel.varlen_attention_tuned[grid](*args, **fixed)
        else:
            bm, bn, warps, stages = config
            hf_varlen_kernel.varlen_attention_kernel[(triton.cdiv(max_q, bm), sequences, q.shape[1])](
                *args, **fixed, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages)
    return out
