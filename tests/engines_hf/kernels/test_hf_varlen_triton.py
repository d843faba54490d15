"""The Triton variable-length attention kernel (``hf_varlen_triton``) against the reference of
the same semantics (``hf_varlen.reference_varlen``) and FlashAttention-2. The kernel runs on
CUDA (Triton is not a dependency, and only CUDA machines have it); on a CPU with Triton
installed, ``TRITON_INTERPRET=1`` runs the same comparisons through Triton's interpreter (numpy
below 2.3 for Triton 3.6's interpreter), which is how the kernel was first checked."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from benchcheck.engines.hf.attention import varlen as hf_varlen
from benchcheck.engines.hf.attention.varlen import build_plan
from benchcheck.engines.hf.kernels.varlen import reference_varlen, supported


def _kernel() -> Any:
    """The Triton module (skips the test where Triton is not installed: it is not a dependency)."""
    pytest.importorskip("triton")
    from benchcheck.engines.hf.kernels import varlen_triton

    return varlen_triton

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_kernel = pytest.mark.skipif(not torch.cuda.is_available() and not INTERPRET,
                                  reason="the Triton kernel runs on CUDA (or Triton's interpreter)")

# (start, prefix, suffixes) families of one packed row: lone prompts, shared prefixes, a
# one-token suffix, sequences shorter and longer than a block, a prefix across several blocks.
PLANS = [
    [(0, 5, [3])],
    [(0, 40, [30]), (70, 10, [1])],
    [(0, 20, [7, 9, 1]), (37, 50, [3]), (90, 33, [17, 40])],
    [(0, 130, [27, 1, 64]), (222, 64, [64]), (350, 1, [200])],
]


def _inputs(families: list[tuple[int, int, list[int]]], heads: int, kv_heads: int, dim: int, dtype: torch.dtype,
            seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, hf_varlen.VarlenPlan]:
    """q (T, H, D) laid out as the engine's projections are, a view of (1, T, H, D) through
    (1, H, T, D), and the row's own k and v (T, Hk, D), not yet gathered by the plan."""
    plan = build_plan(families, torch.device(DEVICE))
    total = max(start + prefix + sum(s) for start, prefix, s in families)
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q = torch.randn(1, total, heads, dim, device=DEVICE, generator=g).to(dtype).transpose(1, 2)[0].transpose(0, 1)
    k = torch.randn(total, kv_heads, dim, device=DEVICE, generator=g).to(dtype)
    v = torch.randn(total, kv_heads, dim, device=DEVICE, generator=g).to(dtype)
    return q, k, v, plan


def _gathered(x: torch.Tensor, plan: hf_varlen.VarlenPlan) -> torch.Tensor:
    """Keys or values as tree attention hands them to a kernel: each sequence's own, in order."""
    return x if plan.kv_index is None else x.index_select(0, plan.kv_index)


@needs_kernel
@pytest.mark.parametrize("families", PLANS)
@pytest.mark.parametrize("blocks", [(16, 16), (32, 16), (16, 32), (64, 64)])
def test_kernel_equals_the_reference_in_float32(families: list[tuple[int, int, list[int]]],
                                                blocks: tuple[int, int]) -> None:
    q, k, v, plan = _inputs(families, 4, 2, 16, torch.float32)
    k, v = _gathered(k, plan), _gathered(v, plan)
    got = _kernel().varlen_attention(q, k, v, plan, 0.3, config=(*blocks, 4, 2))
    want = reference_varlen(q, k, v, plan, 0.3)
    assert got.shape == q.shape and got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FlashAttention-2 and bf16 products run on CUDA")
@pytest.mark.parametrize("families", PLANS)
def test_kernel_agrees_with_flash_attention_in_bfloat16(families: list[tuple[int, int, list[int]]]) -> None:
    """The 8B model's heads (32 over 8, 128 wide): within bf16 rounding of FlashAttention-2 and
    of the float32 reference, at the engine's block sizes."""
    q, k, v, plan = _inputs(families, 32, 8, 128, torch.bfloat16, seed=1)
    k, v = _gathered(k, plan), _gathered(v, plan)
    got = _kernel().varlen_attention(q, k, v, plan, 128**-0.5)
    flash = hf_varlen.flash_varlen(q.contiguous(), k, v, plan, 128**-0.5)
    exact = reference_varlen(q.float(), k.float(), v.float(), plan, 128**-0.5)
    assert got.dtype == torch.bfloat16
    assert (got.float() - exact).abs().max().item() <= 2 * (flash.float() - exact).abs().max().item() + 1e-3
    torch.testing.assert_close(got, flash, rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the engine's choice of kernel is made on CUDA")
def test_tree_attention_takes_the_kernel_for_short_rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tree attention's output with the kernel on equals the kernel's, and with it off (or the
    keys longer than its limit) FlashAttention-2's."""
    q, k, v, plan = _inputs(PLANS[2], 32, 8, 128, torch.bfloat16, seed=2)
    kernel = _kernel().varlen_attention(q, _gathered(k, plan), _gathered(v, plan), plan, 0.1)
    flash = hf_varlen.flash_varlen(q.contiguous(), _gathered(k, plan), _gathered(v, plan), plan, 0.1)
    as_module = (q[None].transpose(1, 2), k[None].transpose(1, 2), v[None].transpose(1, 2))  # (1, H, T, D)
    on, _ = hf_varlen.tree_attention(None, *as_module, None, varlen_plan=plan, scaling=0.1)
    assert torch.equal(on[0], kernel)
    monkeypatch.setattr(hf_varlen, "TRITON_MAX_KEYS", plan.max_k - 1)
    long_keys, _ = hf_varlen.tree_attention(None, *as_module, None, varlen_plan=plan, scaling=0.1)
    assert torch.equal(long_keys[0], flash)
    monkeypatch.setattr(hf_varlen, "TRITON_MAX_KEYS", 10**6)
    monkeypatch.setattr(hf_varlen, "TRITON_KERNEL", False)
    off, _ = hf_varlen.tree_attention(None, *as_module, None, varlen_plan=plan, scaling=0.1)
    assert torch.equal(off[0], flash)


def test_shapes_the_kernel_cannot_take_are_named() -> None:
    plan = build_plan([(0, 4, [2])], torch.device("cpu"))
    q = torch.zeros(6, 4, 24)  # 24 wide: not a power of two
    with pytest.raises(ValueError, match=r"varlen attention: q \(6, 4, 24\)"):
        _kernel().varlen_attention(q, torch.zeros(6, 2, 24), torch.zeros(6, 2, 24), plan, 1.0)
    assert not supported(torch.zeros(6, 3, 16), torch.zeros(6, 2, 16))  # 3 heads over 2
    assert not supported(torch.zeros(6, 4, 16, dtype=torch.float64), torch.zeros(6, 2, 16, dtype=torch.float64))
    assert supported(torch.zeros(6, 4, 16), torch.zeros(6, 2, 16))
