"""The gate/up products with SiLU-times-up in their epilogue (``hf_swiglu``) against the MLP's
own computation. The kernel runs on CUDA with TMA (Hopper and later; Triton is not a
dependency, and only CUDA machines have it); on a CPU with Triton installed,
``TRITON_INTERPRET=1`` runs the same comparisons through Triton's interpreter (numpy below 2.3
for Triton 3.6's interpreter), which is how the kernel was first checked."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from benchcheck.engines.hf import kernels as hf_kernels
from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.kernels.silu import silu_mul
from benchcheck.engines.hf.kernels.swiglu import HALF, pack_gate_up, supported
from benchcheck.engines.hf.model import fused as hf_fused
from benchcheck.engines.hf.model.fused import packed_gate_up
from benchcheck.engines.hf.model.state import state_of


def _kernel() -> Any:
    """The Triton module (skips the test where Triton is not installed: it is not a dependency)."""
    pytest.importorskip("triton")
    from benchcheck.engines.hf.kernels import swiglu_triton

    return swiglu_triton

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9
needs_kernel = pytest.mark.skipif(not HOPPER and not INTERPRET,
                                  reason="the kernel runs on CUDA from Hopper on (or in Triton's interpreter)")
needs_hopper = pytest.mark.skipif(not HOPPER, reason="runs on CUDA from Hopper on")
SMALL = (32, 16, 4, 2, 2)  # rows and K steps small enough for the interpreter, edges inside a tile


def _inputs(rows: int, n: int, k: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(rows, k, device=DEVICE, generator=g)
    wg = torch.randn(n, k, device=DEVICE, generator=g) * (4 / k**0.5)  # |gate| up to ~16: SiLU's tails
    wu = torch.randn(n, k, device=DEVICE, generator=g) / k**0.5
    return x.to(dtype), wg.to(dtype), wu.to(dtype)


def _exact(x: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
    """The products and SiLU-times-up in float64: the exact result the kernel rounds."""
    x64 = x.double()
    return silu_mul(x64 @ wg.double().T, x64 @ wu.double().T)


def _float32_bound(x: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
    """What float32 arithmetic before the one rounding may add: each product's summation (at
    most K float32 steps of the sum of |terms|, in whatever order the tensor cores add) carried
    through SiLU-times-up (SiLU's slope stays under 1.1), plus a few float32 steps for SiLU
    itself. Where a product sums to nearly zero this exceeds one half-precision step of the
    result, which is why the bound is needed on the device (Triton's interpreter adds in numpy's
    order and happened to stay inside one step)."""
    x64, g64, u64 = x.double(), wg.double(), wu.double()
    k, eps = x.shape[1], 2.0**-24
    gate, up = x64 @ g64.T, x64 @ u64.T
    gate_err = k * eps * (x64.abs() @ g64.abs().T)
    up_err = k * eps * (x64.abs() @ u64.abs().T)
    silu = gate * torch.sigmoid(gate)
    return 1.1 * gate_err * up.abs() + silu.abs() * up_err + 8 * eps * (silu * up).abs()


def test_packing_puts_each_run_of_gate_rows_before_the_same_up_rows() -> None:
    wg = torch.arange(8 * 3).reshape(8, 3).float()
    wu = -wg
    packed = pack_gate_up(wg, wu, half=2)
    assert packed.shape == (16, 3)
    for run in range(4):
        assert torch.equal(packed[4 * run:4 * run + 2], wg[2 * run:2 * run + 2])
        assert torch.equal(packed[4 * run + 2:4 * run + 4], wu[2 * run:2 * run + 2])
    with pytest.raises(ValueError, match="runs of 3 rows"):
        pack_gate_up(wg, wu, half=3)


@needs_kernel
@pytest.mark.parametrize(("rows", "n", "k"), [(1, HALF, 16), (37, HALF, 40), (100, 2 * HALF, 24)])
@pytest.mark.parametrize("programs", [None, 1, 3])
def test_kernel_equals_the_mlp_in_float32(rows: int, n: int, k: int, programs: int | None) -> None:
    """Every row and column, tiles cut by the matrices' edges (rows and K not multiples of the
    tile) and programs walking several tiles each: the float32 result within float32 rounding
    of the exact one."""
    x, wg, wu = _inputs(rows, n, k, torch.float32)
    got = _kernel().swiglu_packed(x, pack_gate_up(wg, wu), config=SMALL, programs=programs)
    assert got.shape == (rows, n) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), _exact(x, wg, wu), rtol=2e-5, atol=2e-5)


@needs_kernel
def test_no_rows_gives_an_empty_activation() -> None:
    x, wg, wu = _inputs(0, HALF, 32, torch.float32)
    assert _kernel().swiglu_packed(x, pack_gate_up(wg, wu), config=SMALL).shape == (0, HALF)


@pytest.mark.parametrize(("dtype", "bits"), [
    pytest.param(torch.float16, 10, marks=needs_kernel),
    # Triton 3.6's interpreter reads bf16 through descriptors as raw bits: bf16 only on the device.
    pytest.param(torch.bfloat16, 7, marks=needs_hopper),
])
def test_kernel_rounds_once_in_half_precision(dtype: torch.dtype, bits: int) -> None:
    """Half-precision inputs: the products in float32, SiLU-times-up on them, one rounding: within
    one step of the exact result, and no further from it than the MLP as transformers runs it
    (each product rounded, then SiLU, then the product rounded again)."""
    x, wg, wu = _inputs(70, HALF, 48, dtype, seed=1)
    exact = _exact(x, wg, wu)
    got = _kernel().swiglu_packed(x, pack_gate_up(wg, wu), config=SMALL).double()
    eager = silu_mul(x @ wg.T, x @ wu.T).double()
    step = exact.abs().clamp_min(2**-14) * 2.0**-bits  # one step at each value (bits of mantissa)
    assert bool(((got - exact).abs() <= step + _float32_bound(x, wg, wu)).all())
    assert float((got - exact).abs().max()) <= float((eager - exact).abs().max())


@needs_hopper
def test_tuned_kernel_at_the_8b_width_in_bfloat16() -> None:
    """The engine's call (tiles timed on the first call) at the 8B MLP's width, rows not a multiple
    of any tile, and every configuration: within one bf16 step (plus float32 summation order) of
    the float32 products' SiLU-times-up."""
    x, wg, wu = _inputs(1000, 12288, 4096, torch.bfloat16, seed=2)
    packed = pack_gate_up(wg, wu)
    want = silu_mul(x.float() @ wg.float().T, x.float() @ wu.float().T)
    step = want.abs() * 2**-7 + 1e-3
    assert bool(((_kernel().swiglu_packed(x, packed).float() - want).abs() <= step).all())
    for config in _kernel().CONFIGS:
        assert bool(((_kernel().swiglu_packed(x, packed, config=config).float() - want).abs() <= step).all()), config


def test_supported_refuses_what_the_kernel_cannot_read() -> None:
    x, wg, wu = _inputs(8, HALF, 32, torch.float32)
    packed = pack_gate_up(wg, wu)
    assert supported(x, packed, tuned=False) or (x.is_cuda and not HOPPER)
    assert supported(x, packed) is not x.is_cuda  # float32 on a device: not in the tuned tiles
    assert not supported(x, packed[:HALF])  # not whole runs of gate and up rows
    assert not supported(x[:, :16], packed)  # K differs
    assert not supported(x.to(torch.float16), packed)  # dtypes differ
    assert not supported(x.to(torch.int32), packed.to(torch.int32))  # no float
    assert not supported(x.t().contiguous().t(), packed)  # rows not contiguous
    assert not supported(x[:, 1:], packed[:, 1:])  # starts not 16-byte aligned
    with pytest.raises(ValueError, match="swiglu"):
        _kernel().swiglu_packed(x[:, :16], packed)


def _mlp(hidden: int = 256, inter: int = 512, bias: bool = False) -> torch.nn.Module:
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextMLP

    mlp = Qwen3VLTextMLP(Qwen3VLTextConfig(hidden_size=hidden, intermediate_size=inter, hidden_act="silu"))
    if bias:
        mlp.gate_proj = torch.nn.Linear(hidden, inter, bias=True)
    return mlp.to(DEVICE)


def test_no_packed_weights_for_projections_the_kernel_does_not_take() -> None:
    assert packed_gate_up(_mlp(bias=True)) is None  # a bias: not the kernel's product
    mlp = _mlp(inter=HALF + 64)
    assert packed_gate_up(mlp) is None  # no whole runs of HALF rows (and, on a CPU, no kernel at all)


@needs_hopper
def test_packed_weights_made_once_and_again_when_the_weights_change() -> None:
    mlp = _mlp().to(torch.bfloat16)  # a float32 model on a device packs nothing (the test below)
    first = packed_gate_up(mlp)
    assert first is not None and first.shape == (2 * 512, 256)
    assert packed_gate_up(mlp) is first
    with torch.no_grad():
        mlp.up_proj.weight.mul_(2)  # in place: a new version of the same tensor
    again = packed_gate_up(mlp)
    assert again is not first and again is not None
    assert torch.equal(again[HALF:2 * HALF], mlp.up_proj.weight[:HALF])


@needs_hopper
def test_fused_mlp_takes_the_kernel_and_equals_transformers_mlp() -> None:
    """The engine's fused MLP (``use_fused_text_mlp``) at a batch of rows past the eager limit runs
    the packed kernel, and its output stays within bf16 rounding of transformers' own forward
    (which rounds the products before SiLU), as it does with the kernel switched off."""
    mlp = _mlp().to(torch.bfloat16)
    model = torch.nn.Sequential(mlp)
    assert hf_fused.use_fused_text_mlp(model, compiler=lambda f: f) == 1
    x = torch.randn(1, hf_fused.EAGER_ROWS + 37, 256, device=DEVICE).to(torch.bfloat16)
    with torch.no_grad():
        want = type(mlp).forward(mlp, x).float()
        got = mlp(x).float()
        assert state_of(model).gate_up.get(mlp) is not None  # the kernel ran
        state_of(model).config = HFConfig(ops=("-swiglu",))  # the config in force on the model
        other = mlp(x).float()
    scale = want.abs().max().item()
    assert (got - want).abs().max().item() <= 2e-2 * scale
    assert (other - want).abs().max().item() <= 2e-2 * scale


@needs_hopper
def test_float32_mlp_keeps_cublas_and_its_exact_products() -> None:
    """A float32 model (the benchmarks' float32 checks) packs nothing and runs cuBLAS's products:
    the tuned tiles do not fit float32 in shared memory (gpu_screen's float32 blind check stopped
    on it once)."""
    mlp = _mlp()
    model = torch.nn.Sequential(mlp)
    assert hf_fused.use_fused_text_mlp(model, compiler=lambda f: f) == 1
    x = torch.randn(1, hf_fused.EAGER_ROWS + 37, 256, device=DEVICE)
    with torch.no_grad():
        want = type(mlp).forward(mlp, x)
        got = mlp(x)
    assert packed_gate_up(mlp) is None
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@needs_hopper
def test_a_device_that_refuses_the_kernel_falls_back_to_cublas(monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """A board with TMA but too little shared memory for the tiles (consumer Blackwell): Triton
    refuses the launch before anything runs; the MLP warns once, drops its packed copy and gives
    cuBLAS's result. The refusal is Triton's own error, raised where the launch would be."""
    from triton.runtime.errors import OutOfResources

    from benchcheck.engines.hf.kernels import swiglu_triton

    def refuse(*_: object, **__: object) -> torch.Tensor:
        raise OutOfResources(327696, 101376, "shared memory")

    mlp = _mlp().to(torch.bfloat16)
    model = torch.nn.Sequential(mlp)
    hf_fused.use_fused_text_mlp(model, compiler=lambda f: f)
    x = torch.randn(1, hf_fused.EAGER_ROWS + 37, 256, device=DEVICE).to(torch.bfloat16)
    monkeypatch.setattr(swiglu_triton, "swiglu_packed", refuse)
    monkeypatch.setattr(hf_kernels, "_REFUSED", set())
    with torch.no_grad():
        got = mlp(x)
        again = mlp(x)
        state_of(model).config = HFConfig(ops=("-swiglu",))
        want = mlp(x)
    assert torch.equal(got, want) and torch.equal(again, want)
    assert sum("cuBLAS for the gate/up products" in r.getMessage() for r in caplog.records) == 1  # one warning
    assert state_of(model).gate_up.get(mlp, "kept") is None  # the packed copy dropped
