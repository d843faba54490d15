"""The one-pass LayerNorm kernel (``kernels.layer_norm_triton``) with inputs laid out otherwise
than row after row (on CUDA, or on the CPU through Triton's interpreter, ``TRITON_INTERPRET=1``)."""

from __future__ import annotations

import os

import pytest
import torch

from benchcheck.engines.hf.kernels.layer_norm import add_layer_norm

needs_kernel = pytest.mark.skipif(not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
                                  reason="the Triton kernel runs on CUDA (or Triton's interpreter)")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@needs_kernel
def test_a_transposed_input_gets_its_sum_in_row_order() -> None:
    """A dense but transposed ``x``: the sum the kernel returns is ``x + y`` element for element
    (its buffer was once made with ``x``'s strides and written row after row)."""
    pytest.importorskip("triton")
    from benchcheck.engines.hf.kernels.layer_norm_triton import add_layer_norm_kernel

    g = torch.Generator().manual_seed(0)
    x = torch.randn(72, 5, generator=g).to(DEVICE).t()  # (5, 72), column after column in memory
    y, w, b = (torch.randn(s, generator=g).to(DEVICE) for s in ((5, 72), 72, 72))
    h, normed = add_layer_norm_kernel(x, y, w, b, 1e-6)
    want_h, want = add_layer_norm(x, y, w, b, 1e-6)
    assert torch.equal(h, want_h)
    torch.testing.assert_close(normed, want, rtol=1e-5, atol=1e-5)
