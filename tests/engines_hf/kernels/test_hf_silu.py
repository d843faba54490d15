"""The one-pass SiLU-times-up kernel (``hf_silu``) against the MLP's own function (CUDA only:
Triton is not a dependency, and only CUDA machines have it)."""

from __future__ import annotations

import pytest
import torch

from benchcheck.engines.hf.kernels.silu import silu_mul

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="the Triton kernel runs on CUDA")


@needs_cuda
@pytest.mark.parametrize("shape", [(1, 1), (3, 1000), (257, 12288), (4097, 513)])
def test_kernel_equals_the_mlp_function_in_float32(shape: tuple[int, int]) -> None:
    pytest.importorskip("triton")
    from benchcheck.engines.hf.kernels.silu_triton import silu_mul_kernel

    g = torch.Generator(device="cuda").manual_seed(0)
    gate = torch.randn(shape, device="cuda", generator=g) * 8  # large |x|: exp over- and underflow
    up = torch.randn(shape, device="cuda", generator=g)
    got, want = silu_mul_kernel(gate, up), silu_mul(gate, up)
    assert got.shape == want.shape and got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-6)


@needs_cuda
def test_kernel_rounds_once_in_bfloat16() -> None:
    """bf16 inputs: float32 arithmetic, one rounding: equal to the float32 result rounded, and
    at most one bf16 step from eager (which rounds the SiLU before the product)."""
    pytest.importorskip("triton")
    from benchcheck.engines.hf.kernels.silu_triton import silu_mul_kernel

    g = torch.Generator(device="cuda").manual_seed(1)
    gate = torch.randn(513, 12288, device="cuda", generator=g).bfloat16()
    up = torch.randn(513, 12288, device="cuda", generator=g).bfloat16()
    got = silu_mul_kernel(gate, up)
    once = silu_mul(gate.float(), up.float()).bfloat16()
    assert got.dtype == torch.bfloat16
    assert (got.float() - once.float()).abs().max().item() <= 1e-2 * once.float().abs().max().item()
    assert (got != once).float().mean().item() < 1e-3  # exp's last-bit differences only
    torch.testing.assert_close(got, silu_mul(gate, up), rtol=1.6e-2, atol=1e-2)


def test_mismatched_inputs_are_named() -> None:
    from benchcheck.engines.hf.kernels.silu import supported

    assert not supported(torch.zeros(2, 3), torch.zeros(3, 2))
    assert not supported(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.float16))
    assert supported(torch.zeros(2, 3), torch.zeros(2, 3))
    pytest.importorskip("triton")  # the launcher's own message: where Triton is installed
    from benchcheck.engines.hf.kernels.silu_triton import silu_mul_kernel

    with pytest.raises(ValueError, match="silu_mul: gate"):
        silu_mul_kernel(torch.zeros(2, 3), torch.zeros(3, 2))


def test_a_dtype_the_kernel_would_round_is_refused() -> None:
    from benchcheck.engines.hf.kernels.silu import supported

    assert not supported(torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64))
    pytest.importorskip("triton")
    from benchcheck.engines.hf.kernels.silu_triton import silu_mul_kernel

    with pytest.raises(ValueError, match="float64"):
        silu_mul_kernel(torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64))
