"""The one-pass vision rotary computes transformers' own (CPU: the eager function; the Triton
kernel through Triton's interpreter where Triton is installed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hf_helpers import make_jpeg

from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.pixels import patchify
from benchcheck.engines.hf.kernels.vision_rotary import qkv_rotary_eager
from benchcheck.engines.hf.model.state import state_of
from benchcheck.engines.hf.model.vision import use_grouped_vision_attention


def _inputs(seq: int, heads: int, dim: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    qkv = torch.randn(seq, 3 * heads * dim, generator=g).to(dtype)
    ang = torch.rand(seq, dim // 2, generator=g) * 40  # the tower's layout: both halves equal
    return qkv, torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)


@pytest.mark.parametrize(("heads", "dim", "dtype"), [(16, 64, torch.float32), (16, 72, torch.float32),
                                                     (16, 64, torch.bfloat16), (3, 8, torch.float32)])
def test_eager_form_equals_transformers_bit_for_bit(heads: int, dim: int, dtype: torch.dtype) -> None:
    from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb_vision

    seq = 37
    qkv, cos, sin = _inputs(seq, heads, dim, dtype, seed=dim + heads)
    q, k, _ = qkv.reshape(seq, 3, heads, dim).permute(1, 0, 2, 3).unbind(0)
    ref_q, ref_k = apply_rotary_pos_emb_vision(q, k, cos, sin)
    ours_q, ours_k = qkv_rotary_eager(qkv, cos, sin, heads)
    assert torch.equal(ours_q, ref_q) and torch.equal(ours_k, ref_k)
    assert ours_q.dtype == dtype and ours_q.is_contiguous() and ours_k.is_contiguous()
    assert ours_k.data_ptr() == ours_q.data_ptr() + ours_q.numel() * ours_q.element_size()  # one buffer
    # Not the identity: the rotation moved every head.
    assert not torch.allclose(ours_q, q)


def test_tower_through_the_one_pass_rotary_equals_transformers(hf_engine: HFEngine) -> None:
    enc = hf_engine.encoder
    frames, grid = enc.frames([make_jpeg(11), make_jpeg(12, w=256, h=448), make_jpeg(13)])
    pixels, g = patchify(frames, hf_engine.pixels), torch.from_numpy(grid)
    visual = hf_engine.model.model.visual
    assert state_of(hf_engine.model).vision_qkv_rotary is None  # the CPU keeps transformers' rotary

    def tower() -> torch.Tensor:
        with torch.inference_mode():
            out = visual(pixels, grid_thw=g)
        return torch.cat([out.pooler_output, *out.deepstack_features], dim=-1)

    ref = tower()
    calls = []

    def counted(*a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(1)
        return qkv_rotary_eager(*a)  # type: ignore[arg-type]

    try:
        use_grouped_vision_attention(hf_engine.model, qkv_rotary=counted)
        ours = tower()
    finally:
        use_grouped_vision_attention(hf_engine.model)
    assert len(calls) == len(visual.blocks)
    rel = float((ours - ref).norm() / ref.norm())
    assert rel < 1e-5, rel


KERNEL_CHECK = """
import torch
from benchcheck.engines.hf.kernels.vision_rotary_triton import qkv_rotary
from benchcheck.engines.hf.kernels.vision_rotary import qkv_rotary_eager
for heads, dim, seq, rows in [(16, 64, 37, 4), (16, 72, 21, 4), (3, 8, 9, 2), (16, 64, 8, 8)]:
    g = torch.Generator().manual_seed(seq)
    qkv = torch.randn(seq, 3 * heads * dim, generator=g)
    ang = torch.rand(seq, dim // 2, generator=g) * 40
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    out = torch.full((2, seq, heads, dim), float("nan"))
    q, k = qkv_rotary(qkv, cos, sin, heads, out=out, rows=rows)
    rq, rk = qkv_rotary_eager(qkv, cos, sin, heads)
    assert torch.equal(q, rq) and torch.equal(k, rk), (heads, dim, seq)
print("kernel ok")
"""


def test_triton_kernel_equals_eager_form_in_the_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("triton")  # not a dependency: only CUDA machines have it
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", KERNEL_CHECK], env=env, capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert done.returncode == 0 and "kernel ok" in done.stdout, done.stderr[-2000:]
