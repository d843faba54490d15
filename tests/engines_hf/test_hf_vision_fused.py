"""The fused vision blocks compute transformers' own vision tower (float32, CPU, tiny model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hf_helpers import make_jpeg

from benchcheck.engines import hf_vision_fused
from benchcheck.engines.base import LetterScores, ScoreRequest
from benchcheck.engines.hf import HFEngine
from benchcheck.engines.hf_pixels import patchify
from benchcheck.engines.hf_vision import use_grouped_vision_attention
from benchcheck.engines.hf_vision_fused import add_layer_norm, fc1_gelu_tanh, use_fused_vision_blocks

FRAMES = 32  # a 32-frame request, as step 3 sends


def _frames() -> tuple[bytes, ...]:
    return tuple(make_jpeg(100 + i, w=64, h=64) for i in range(FRAMES))


def _tower(engine: HFEngine, pixels: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        out = engine.model.model.visual(pixels, grid_thw=grid)
    return torch.cat([out.last_hidden_state.flatten(), out.pooler_output.flatten(),
                      *[d.flatten() for d in out.deepstack_features]])


def _plain(visual: Any) -> dict[Any, Any]:
    """Remove every per-instance forward the engine put on the tower: transformers' own."""
    return {m: vars(m).pop("forward") for m in visual.modules() if "forward" in vars(m)}


def test_pieces_equal_transformers_modules() -> None:
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionMLP

    torch.manual_seed(0)
    cfg = Qwen3VLVisionConfig(hidden_size=32, intermediate_size=64)
    assert cfg.hidden_act == "gelu_pytorch_tanh"
    mlp = Qwen3VLVisionMLP(cfg)
    x, y = torch.randn(300, 32), torch.randn(300, 32)
    norm = torch.nn.LayerNorm(32, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(32))
        norm.bias.copy_(torch.randn(32))
        h, n = add_layer_norm(x, y, norm.weight, norm.bias, norm.eps)
        assert torch.equal(h, x + y) and torch.equal(n, norm(x + y))
        fc1 = mlp.linear_fc1
        assert torch.equal(fc1_gelu_tanh(x, fc1.weight, fc1.bias), mlp.act_fn(fc1(x)))
        # Not the exact GELU: the fused activation must be the tanh approximation the config names.
        assert not torch.allclose(fc1_gelu_tanh(x, fc1.weight, fc1.bias), F.gelu(fc1(x)), rtol=0, atol=1e-6)


@pytest.mark.parametrize("eager_rows", [0, 10**9])  # 0: every block through the (uncompiled) fused path
def test_fused_tower_and_letter_logprobs_equal_transformers(
    tiny_model: Path, eager_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hf_vision_fused, "EAGER_ROWS", eager_rows)
    engine = HFEngine(tiny_model, device="cpu")
    visual = engine.model.model.visual
    frames, grid = engine.encoder.frames(list(_frames()))
    pixels, g = patchify(frames, engine.pixels), torch.from_numpy(grid)
    req = [ScoreRequest("v32", "Question: what happens?\nOptions:\nA. up\nB. down\nC. left\nD. right", _frames())]

    torch.manual_seed(1)
    with torch.no_grad():  # the tiny model's norms are ones and zeros: make each one different
        for b in visual.blocks:
            for norm in (b.norm1, b.norm2):
                norm.weight.copy_(1 + 0.5 * torch.randn_like(norm.weight))
                norm.bias.copy_(0.1 * torch.randn_like(norm.bias))
    saved = _plain(visual)
    ref = _tower(engine, pixels, g)
    for m, f in saved.items():
        m.forward = f
    before = engine.score_sync(req)

    n = use_fused_vision_blocks(engine.model, compiler=lambda f: f)  # the same functions, uncompiled
    assert n == len(visual.blocks) == visual.config.depth
    calls = []  # norm1 of every block after the first is computed by the block before it
    hooks = [b.norm1.register_forward_hook(lambda *_: calls.append(1)) for b in visual.blocks[1:]]
    ours = _tower(engine, pixels, g)
    assert calls == []  # the hand-off is taken on the eager path too
    for hk in hooks:
        hk.remove()
    assert all(b._bc_pre == [None, None] for b in visual.blocks)  # nothing kept past a forward
    after = engine.score_sync(req)

    rel = float((ours - ref).norm() / ref.norm())
    assert rel < 1e-5, rel
    for a, b in zip(before, after, strict=True):
        assert isinstance(a, LetterScores) and isinstance(b, LetterScores)
        assert [t["token"] for t in a.top] == [t["token"] for t in b.top]
        assert max(abs(float(x["logprob"]) - float(y["logprob"])) for x, y in zip(a.top, b.top, strict=True)) < 1e-5
        assert a.exact and max(abs(float(x["logprob"]) - float(y["logprob"]))
                               for x, y in zip(a.exact, b.exact, strict=True)) < 1e-5

    # Off again: transformers' forwards, through the engine's own switch as well.
    use_grouped_vision_attention(engine.model, enabled=False)
    assert not any("forward" in vars(m) for b in visual.blocks for m in (b, b.mlp, b.attn))
    back = _tower(engine, pixels, g)  # (the matmul patch embedding stays: rounding apart)
    assert float((back - ref).norm() / ref.norm()) < 1e-5


def test_engine_leaves_blocks_unfused_unless_asked(tiny_model: Path) -> None:
    from transformers.models.qwen3_vl.modeling_qwen3_vl import apply_rotary_pos_emb_vision

    engine = HFEngine(tiny_model, device="cpu")
    visual = engine.model.model.visual
    use_grouped_vision_attention(engine.model, rotary=apply_rotary_pos_emb_vision)  # the CUDA path's call
    assert not any("forward" in vars(b) or "forward" in vars(b.mlp) for b in visual.blocks)
    use_grouped_vision_attention(engine.model, rotary=apply_rotary_pos_emb_vision, fuse_blocks=True)
    try:
        assert all("forward" in vars(b) and "forward" in vars(b.mlp) for b in visual.blocks)
        # The hand-off to the next block is not a registered child module (state dict unchanged).
        assert not any(k.count("blocks.") > 1 for k in engine.model.state_dict())
    finally:
        use_grouped_vision_attention(engine.model, enabled=False)
    assert not any("forward" in vars(b) or "forward" in vars(b.mlp) for b in visual.blocks)
