"""Op ``vision_norm_kernel``: the fused vision blocks' LayerNorms through the one-pass Triton
kernel on CUDA (its numerics: tests/engines_hf/kernels/test_hf_layer_norm.py), the compiled
functions elsewhere; the tower's output does not move with it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hf_helpers import make_jpeg, variant
from test_hf_vision_block import _fresh, counting_compiler, frames, tower

from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.model import vision_block
from benchcheck.engines.hf.model.state import state_of


def test_off_cuda_the_op_keeps_the_compiled_norms(tiny_model: Path, hf_engine: HFEngine) -> None:
    model = _fresh(tiny_model)
    calls: dict[str, int] = {}
    blocks = model.model.visual.blocks
    assert vision_block.use_fused_vision_blocks(model, compiler=counting_compiler(calls)) == len(blocks)
    pixels, grid = frames(hf_engine)
    outs = []
    for ops in (("+vision_block",), ("+vision_block", "+vision_norm_kernel")):
        calls.clear()
        state_of(model).config = HFConfig(ops=ops)
        with torch.inference_mode():
            outs.append(model.model.visual(pixels, grid_thw=grid).pooler_output)
        assert calls == {"layer_norm": 1, "add_layer_norm": 2 * len(blocks) - 1}, ops
    assert torch.equal(outs[0], outs[1])
    assert not HFConfig().op("vision_norm_kernel") and HFConfig(ops=("+vision_norm_kernel",)).op("vision_norm_kernel")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the kernel runs on CUDA")
def test_on_cuda_the_tower_runs_the_kernel_and_gives_the_compiled_norms_output(tiny_model: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    from benchcheck.engines.hf.kernels import layer_norm_triton

    launched: list[str] = []
    for name in ("add_layer_norm_kernel", "layer_norm_kernel"):
        real = getattr(layer_norm_triton, name)
        monkeypatch.setattr(layer_norm_triton, name,
                            lambda *a, real=real, name=name: (launched.append(name), real(*a))[1])
    engine = HFEngine(tiny_model, device="cuda", dtype="float32")
    pixels, grid = engine.encoder.frames([make_jpeg(1), make_jpeg(2, w=256, h=448)])
    from benchcheck.engines.hf.forward.pixels import patchify

    x, g = patchify(pixels, engine.pixels), torch.from_numpy(grid).cuda()
    plain = tower(variant(engine, "+vision_block"), x, g)
    assert not launched
    ours = tower(variant(engine, "+vision_block", "+vision_norm_kernel"), x, g)
    blocks = len(engine.model.model.visual.blocks)
    assert launched.count("layer_norm_kernel") == 1 and launched.count("add_layer_norm_kernel") == 2 * blocks - 1
    torch.testing.assert_close(ours, plain, rtol=1e-4, atol=1e-4)
