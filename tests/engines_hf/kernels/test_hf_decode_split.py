"""The split decode-attention kernel (``hf_decode_split_triton``) against the engine's decode
attention (``attention.decode.decode_attention``), its reference. The kernel runs on CUDA
(Triton is not a dependency, and only CUDA machines have it); on a CPU with Triton installed,
``TRITON_INTERPRET=1`` runs the same comparisons through Triton's interpreter, which is how the
kernel was first checked. The splitting and combining rules run everywhere."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
import torch

from benchcheck.engines.hf.attention.decode import decode_attention
from benchcheck.engines.hf.kernels.decode_split import BLOCK_N, TUNING, Tuning, combine, split_keys, supported

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_kernel = pytest.mark.skipif(not torch.cuda.is_available() and not INTERPRET,
                                  reason="the Triton kernel runs on CUDA (or Triton's interpreter)")


def _kernel() -> Any:
    pytest.importorskip("triton")
    from benchcheck.engines.hf.kernels import decode_split_triton

    return decode_split_triton


def _inputs(rows: int, heads: int, kv_heads: int, dim: int, keys: int, dtype: torch.dtype,
            seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A decode step's inputs as the engine hands them over: q a view of the (B, 1, H, D)
    projection, keys and values a reservation (B, Hk, S, D), and a mask of written slots with
    padding holes, a row whose first keys are all unwritten, and unwritten slots at the end."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q = torch.randn(rows, 1, heads, dim, device=DEVICE, generator=g).to(dtype).transpose(1, 2)
    k = torch.randn(rows, kv_heads, keys, dim, device=DEVICE, generator=g).to(dtype)
    v = torch.randn(rows, kv_heads, keys, dim, device=DEVICE, generator=g).to(dtype)
    mask = torch.rand(rows, 1, 1, keys, device=DEVICE, generator=g) > 0.2
    mask[..., keys - keys // 4 :] = False  # slots reserved for later steps
    if rows > 1:
        mask[1, ..., : 3 * BLOCK_N] = False  # whole spans with nothing written
    mask[..., 0] = True
    return q, k, v, mask


def test_splits_cover_the_keys_in_whole_blocks() -> None:
    for rows, kv_heads, keys in [(1, 8, 54_400), (5, 8, 54_400), (64, 8, 1_024), (1, 2, 64), (3, 1, 640)]:
        splits, per = split_keys(rows, kv_heads, keys)
        assert per % BLOCK_N == 0 and (splits - 1) * per < keys <= splits * per
        assert splits == 1 or rows * kv_heads * (splits - 1) < 2048  # about PROGRAMS programs, not many more


def test_combining_splits_equals_one_softmax() -> None:
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(2, 3, 40, generator=g) * 4
    values = torch.randn(2, 3, 40, 8, generator=g)
    scores[0, 0, :10] = float("-inf")  # a split with nothing written: its maximum stays finite
    want = torch.einsum("bhs,bhsd->bhd", torch.softmax(scores, -1), values)
    parts = scores.view(2, 3, 4, 10)
    top = parts.amax(-1).clamp_min(-1e30)
    e = torch.exp(parts - top[..., None])
    acc = torch.einsum("bhns,bhnsd->bhnd", e, values.view(2, 3, 4, 10, 8))
    torch.testing.assert_close(combine(acc, top, e.sum(-1)), want, rtol=1e-5, atol=1e-6)


def test_supported_takes_the_engine_step_and_refuses_other_shapes() -> None:
    q, k, v, mask = _inputs(2, 8, 2, 16, 256, torch.float32)
    assert supported(q, k, v, mask)
    assert not supported(q, k[..., :200, :], v[..., :200, :], mask[..., :200])  # not whole key blocks
    assert not supported(q, k, v, mask.float())
    assert not supported(q[:, :7], k, v, mask)  # 7 query heads over 2 K/V heads
    assert not supported(q.transpose(2, 3), k, v, mask)


def test_the_engine_falls_back_where_the_kernel_cannot_run() -> None:
    # 200 keys: not whole key blocks, refused by ``supported`` on every device (on CUDA the
    # engine's own shapes run the kernel, whose float32 sums differ from the products' in the last bits)
    q, k, v, mask = _inputs(2, 8, 2, 16, 256, torch.float32)
    k, v, mask = k[..., :200, :], v[..., :200, :], mask[..., :200]
    torch.testing.assert_close(decode_attention(q, k, v, mask, 0.25, split=True),
                               decode_attention(q, k, v, mask, 0.25), rtol=0, atol=0)


def test_a_tuning_label_reads_back_and_a_bad_one_is_named() -> None:
    for tuning in (TUNING, Tuning(2048, 128, 8, 2, False), Tuning(block_n=128)):
        assert Tuning.parse(tuning.label()) == tuning
    assert Tuning.parse("128/8/2@2048+torch") == Tuning(2048, 128, 8, 2, False)
    for bad in ("128/8", "96/4/3", "192/4/3", "32/4/3", "64/0/3", "64/6/3", "a/b/c", "64/4/3@x", "64/4/3@0",
                "64/4/3@", "64/4/3 ", " 64/4/3", "6_4/4/3", "64/4/3+torch+torch", "64/4/3+Torch"):
        with pytest.raises(ValueError, match=re.escape(f"kernel tuning '{bad}'")):
            Tuning.parse(bad)


def test_splits_of_larger_key_blocks_cover_the_keys() -> None:
    assert split_keys(5, 8, 54_400, block_n=128) == (25, 2_176)
    assert split_keys(1, 8, 54_400, 2048, 128) == (213, 256)


@needs_kernel
@pytest.mark.parametrize("tuning", [Tuning(), Tuning(block_n=128, warps=8, stages=2), Tuning(fused_combine=False)],
                         ids=lambda t: t.label())
@pytest.mark.parametrize("rows,heads,kv_heads,dim,keys", [
    (1, 8, 2, 16, 64), (3, 8, 2, 16, 640), (2, 4, 4, 32, 1_024), (2, 32, 8, 16, 384), (4, 16, 8, 32, 256),
])
def test_kernel_equals_decode_attention_in_float32(rows: int, heads: int, kv_heads: int, dim: int,
                                                   keys: int, tuning: Tuning) -> None:
    # 128-key blocks where the keys are a multiple of 128, else the 64-key blocks
    q, k, v, mask = _inputs(rows, heads, kv_heads, dim, keys, torch.float32)
    got = _kernel().split_decode_attention(q, k, v, mask, 0.3, tuning)
    want = decode_attention(q, k, v, mask, 0.3)
    assert got.shape == want.shape == (rows, 1, heads, dim) and got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@needs_kernel
def test_the_combine_kernel_weighs_many_spans_as_torch_does() -> None:
    """More spans than a combine program reads at a time, not a multiple of it, the first three
    with nothing written (their maxima stay finite and weigh nothing), and scores past float32's
    ``exp`` range, which only weighing by the largest maximum keeps finite."""
    q, k, v, mask = _inputs(2, 4, 1, 16, 40 * BLOCK_N, torch.float32, seed=3)
    mask[..., : 3 * BLOCK_N] = False
    fused = _kernel().split_decode_attention(q, k, v, mask, 30.0, Tuning())
    by_torch = _kernel().split_decode_attention(q, k, v, mask, 30.0, Tuning(fused_combine=False))
    assert split_keys(2, 1, 40 * BLOCK_N)[0] == 40 > _kernel().COMBINE_SPANS
    assert fused.isfinite().all()
    torch.testing.assert_close(fused, by_torch, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(fused, decode_attention(q, k, v, mask, 30.0), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 products run on CUDA")
@pytest.mark.parametrize("rows,keys", [(1, 54_400), (5, 8_192)])
def test_kernel_agrees_with_decode_attention_in_bfloat16(rows: int, keys: int) -> None:
    """The 8B model's heads (32 over 8, 128 wide), the sweep's reservation: within bf16 rounding
    of the float32 computation, as the matrix products' way is."""
    q, k, v, mask = _inputs(rows, 32, 8, 128, keys, torch.bfloat16, seed=1)
    got = _kernel().split_decode_attention(q, k, v, mask, 128**-0.5).float()
    exact = decode_attention(q.float(), k.float(), v.float(), mask, 128**-0.5)
    products = decode_attention(q, k, v, mask, 128**-0.5).float()
    assert (got - exact).abs().max() <= 2 * (products - exact).abs().max() + 1e-3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the kernel's launch is tried on CUDA only")
def test_a_refused_launch_falls_back_to_the_products_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A GPU with less shared memory than the kernel's stages need: Triton refuses the launch
    before anything runs; the step takes the products, then and from then on, with one warning."""
    from triton.runtime.errors import OutOfResources

    from benchcheck.engines.hf import kernels as hf_kernels

    def refuse(*_: object, **__: object) -> torch.Tensor:
        raise OutOfResources(196_608, 101_376, "shared memory")

    monkeypatch.setattr(_kernel(), "split_decode_attention", refuse)
    monkeypatch.setattr(hf_kernels, "_REFUSED", set())
    q, k, v, mask = _inputs(2, 8, 2, 64, 256, torch.bfloat16)
    want = decode_attention(q, k, v, mask, 0.125)
    assert torch.equal(decode_attention(q, k, v, mask, 0.125, split=True), want)
    assert torch.equal(decode_attention(q, k, v, mask, 0.125, split=True), want)
    assert sum("decode_split kernel cannot run" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the kernel is chosen on CUDA only")
def test_the_op_runs_the_kernel_at_every_row_count() -> None:
    """With the op on, a step of any rows is the kernel's, bit for bit (decision 119: inside a
    CUDA graph it beat the products from 1 row on)."""
    for rows in (1, 2, 5):
        q, k, v, mask = _inputs(rows, 32, 8, 128, 1_024, torch.bfloat16)
        assert torch.equal(decode_attention(q, k, v, mask, 0.125, split=True),
                           _kernel().split_decode_attention(q, k, v, mask, 0.125))
