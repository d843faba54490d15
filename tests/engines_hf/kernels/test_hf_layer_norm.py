"""The vision tower's one-pass LayerNorm kernel (``kernels.layer_norm_triton``), with and without
the residual add before it, against the references (``kernels.layer_norm``).

Triton is not a dependency: the comparisons run on CUDA, or on the CPU through Triton's
interpreter (``TRITON_INTERPRET=1``, where Triton is installed), which is how the kernel was
first checked."""

from __future__ import annotations

import os

import pytest
import torch

from benchcheck.engines.hf.kernels.layer_norm import add_layer_norm, layer_norm, supported

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
needs_kernel = pytest.mark.skipif(not torch.cuda.is_available() and not INTERPRET,
                                  reason="the Triton kernel runs on CUDA (or Triton's interpreter)")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Rows that fill programs and rows that leave the last one part empty; widths below, at and
# above a power of two (the 2B tower's 1,024, the 8B's 1,152 on CUDA).
SHAPES = [(1, 8), (5, 72), (9, 64), (13, 1152)] if not torch.cuda.is_available() else [
    (1, 8), (5, 72), (4097, 1024), (3001, 1152)]


def _inputs(shape: tuple[int, int], dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 3 + 1).to(dtype)  # an offset mean: centring matters
    y = torch.randn(shape, generator=g).to(dtype)
    w = (1 + torch.randn(shape[1], generator=g) * 0.5).to(dtype)
    b = (torch.randn(shape[1], generator=g) * 0.5).to(dtype)
    return tuple(t.to(DEVICE) for t in (x, y, w, b))


@needs_kernel
@pytest.mark.parametrize("shape", SHAPES)
def test_the_kernel_equals_the_references_in_float32(shape: tuple[int, int]) -> None:
    pytest.importorskip("triton")
    from benchcheck.engines.hf.kernels.layer_norm_triton import add_layer_norm_kernel, layer_norm_kernel

    x, y, w, b = _inputs(shape, torch.float32, 0)
    h, normed = add_layer_norm_kernel(x, y, w, b, 1e-6)
    want_h, want = add_layer_norm(x, y, w, b, 1e-6)
    assert torch.equal(h, want_h)  # one float32 addition: the same bits
    torch.testing.assert_close(normed, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(layer_norm_kernel(x, w, b, 1e-6), layer_norm(x, w, b, 1e-6), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="Triton's interpreter truncates to bf16 where CUDA rounds")
@pytest.mark.parametrize("shape", SHAPES[1:])
def test_in_bfloat16_the_sum_has_torchs_bits_and_the_norm_rounds_once(shape: tuple[int, int]) -> None:
    """bf16 inputs: the sum rounded as torch rounds ``x + y``; the norm of that sum computed in
    float32 and rounded once, so equal to the float32 norm of it rounded, but for a last bit
    where the reductions' order moves a value across a rounding boundary."""
    pytest.importorskip("triton")
    from benchcheck.engines.hf.kernels.layer_norm_triton import add_layer_norm_kernel

    x, y, w, b = _inputs(shape, torch.bfloat16, 1)
    h, normed = add_layer_norm_kernel(x, y, w, b, 1e-6)
    assert h.dtype == normed.dtype == torch.bfloat16
    assert torch.equal(h, x + y)
    once = layer_norm(h.float(), w.float(), b.float(), 1e-6).bfloat16()
    step = once.float().abs().clamp_min(1e-3) * 2 ** -7  # one bf16 step at each value
    assert ((normed.float() - once.float()).abs() <= step).all()
    assert (normed != once).float().mean().item() < 0.02
    torch.testing.assert_close(normed, layer_norm(h, w, b, 1e-6), rtol=1.6e-2, atol=2e-2)  # torch's own bf16 norm


def test_inputs_the_kernel_does_not_take_are_refused() -> None:
    x, w, b = torch.zeros(4, 8), torch.ones(8), torch.zeros(8)
    assert supported(x, w, b) and supported(x, w, b, torch.zeros(4, 8))
    assert not supported(x, w, b, torch.zeros(4, 8, dtype=torch.float16))  # torch would promote the sum
    assert not supported(x, w, b, torch.zeros(2, 8))
    assert not supported(torch.zeros(2, 4, 8), w, b)  # 2-D rows only
    assert not supported(x, torch.ones(4), b)
    assert not supported(torch.zeros(4, 8, dtype=torch.int64), w, b)
    assert not supported(torch.zeros(1, 16384), torch.ones(16384), torch.zeros(16384))  # wider than a program holds


def test_the_launcher_names_inputs_it_does_not_take() -> None:
    pytest.importorskip("triton")
    x, w, b = torch.zeros(4, 8), torch.ones(8), torch.zeros(8)
    from benchcheck.engines.hf.kernels.layer_norm_triton import add_layer_norm_kernel

    with pytest.raises(ValueError, match="add_layer_norm: x"):
        add_layer_norm_kernel(x, torch.zeros(2, 8), w, b, 1e-6)
