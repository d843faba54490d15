"""SiLU-times-up of the Qwen3-VL text MLP as one Triton pass (CUDA).

``hf_fused.use_fused_text_mlp`` runs ``silu(gate) * up`` compiled into one kernel; on the H200
at the one-frame batch shape (65,536 x 12,288) it moved its 4.8 GB in 1.72 ms, ~2.8 TB/s
(docs/PERFORMANCE.md). This kernel does the same float32 arithmetic (``silu(g) = g / (1 +
exp(-g))``, times up, rounded once to the output's dtype) in one pass of large contiguous blocks.
``benchmarks/lm_kernels.py`` times both and checks them against each other; the engine takes
it where ``hf_fused.SILU_KERNEL`` says so (off until measured faster there).
"""

from __future__ import annotations

import torch

BLOCK = 4096  # elements a program: 8 KiB of gate and of up in bf16
WARPS = 8


def silu_mul_kernel(gate: torch.Tensor, up: torch.Tensor, block: int = BLOCK, warps: int = WARPS) -> torch.Tensor:
    """``silu(gate) * up`` (same shape and dtype; contiguous inputs are read in place)."""
    if gate.shape != up.shape or gate.dtype != up.dtype:
        raise ValueError(f"silu_mul: gate {tuple(gate.shape)} {gate.dtype} against up {tuple(up.shape)} {up.dtype}")
    import triton

    from benchcheck.engines.hf_silu_kernel import silu_mul_kernel as kernel

    gate, up = gate.contiguous(), up.contiguous()
    out = torch.empty_like(gate)
    n = gate.numel()
    kernel[(triton.cdiv(n, block),)](gate, up, out, n, BLOCK=block, num_warps=warps)
    return out
