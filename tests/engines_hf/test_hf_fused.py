"""The fused text RMSNorm computes what transformers' does, and replaces every text norm."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchcheck.engines.hf_fused import (
    compile_enabled,
    rms_norm,
    use_fused_text_attention,
    use_fused_text_mlp,
    use_fused_text_norms,
)


def test_rms_norm_equals_transformers() -> None:
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRMSNorm

    ref = Qwen3VLTextRMSNorm(64, eps=1e-6)
    with torch.no_grad():
        ref.weight.copy_(torch.randn(64))
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(3, 5, 64, dtype=dtype)
        w = ref.weight.to(dtype)
        ref_dtype = ref.to(dtype)
        assert torch.equal(rms_norm(x, w, 1e-6), ref_dtype(x))


def test_every_text_norm_is_replaced_and_scores_do_not_move(tiny_model: Path) -> None:
    from benchcheck.engines.base import LetterScores, ScoreRequest
    from benchcheck.engines.hf import HFEngine

    engine = HFEngine(tiny_model, device="cpu")
    reqs = [ScoreRequest(f"r{i}", f"Question {i}: which?\nOptions:\nA. x\nB. y") for i in range(3)]
    before = engine.score_sync(reqs)
    n = use_fused_text_norms(engine.model, compiler=lambda f: f)  # the same function, uncompiled
    cfg = engine.model.config.text_config
    assert n == cfg.num_hidden_layers * 4 + 1  # input, post-attention, q and k norms per layer + final
    after = engine.score_sync(reqs)
    for a, b in zip(before, after, strict=True):
        assert isinstance(a, LetterScores) and isinstance(b, LetterScores)
        assert a.top == b.top
    assert not compile_enabled(torch.device("cpu"))


@pytest.mark.parametrize("eager_rows", [0, 256])  # 0: every call through the reshaped fused path
def test_fused_mlp_and_norms_replace_every_module_and_scores_do_not_move(
    tiny_model: Path, eager_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchcheck.engines import hf_fused
    from benchcheck.engines.base import LetterScores, ScoreRequest
    from benchcheck.engines.hf import HFEngine

    monkeypatch.setattr(hf_fused, "EAGER_ROWS", eager_rows)
    engine = HFEngine(tiny_model, device="cpu")
    reqs = [ScoreRequest(f"r{i}", f"Question {i}: which?\nOptions:\nA. x\nB. y") for i in range(3)]
    before = engine.score_sync(reqs)
    assert use_fused_text_mlp(engine.model, compiler=lambda f: f) == engine.model.config.text_config.num_hidden_layers
    use_fused_text_norms(engine.model, compiler=lambda f: f)
    after = engine.score_sync(reqs)
    for a, b in zip(before, after, strict=True):
        assert isinstance(a, LetterScores) and isinstance(b, LetterScores)
        assert a.top == b.top


@pytest.mark.parametrize("eager_rows", [0, 256])
def test_fused_qk_norm_rope_attention_scores_and_generates_the_same(
    tiny_model: Path, eager_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hf_helpers import make_jpeg

    from benchcheck.engines import hf_fused
    from benchcheck.engines.base import GenerateRequest, Generation, LetterScores, ScoreRequest
    from benchcheck.engines.hf import HFEngine

    monkeypatch.setattr(hf_fused, "EAGER_ROWS", eager_rows)
    engine = HFEngine(tiny_model, device="cpu")
    reqs = [ScoreRequest(f"r{i}", f"Question {i}: which?" + " more" * (5 * i) + "\nOptions:\nA. x\nB. y",
                         images=(make_jpeg(i),) if i % 2 else ()) for i in range(3)]
    gens = [GenerateRequest("g", "Describe.", (make_jpeg(9),), max_tokens=6),
            GenerateRequest("h", "Say something long" + " please" * 9, (), max_tokens=4)]
    before, gen_before = engine.score_sync(reqs), engine.generate_sync(gens)
    layers = engine.model.config.text_config.num_hidden_layers
    assert use_fused_text_attention(engine.model, compiler=lambda f: f) == layers
    after, gen_after = engine.score_sync(reqs), engine.generate_sync(gens)
    for a, b in zip(before, after, strict=True):
        assert isinstance(a, LetterScores) and isinstance(b, LetterScores)
        assert [t["token"] for t in a.top] == [t["token"] for t in b.top]
        assert max(abs(float(x["logprob"]) - float(y["logprob"])) for x, y in zip(a.top, b.top, strict=True)) < 1e-5
    for g, h in zip(gen_before, gen_after, strict=True):
        assert isinstance(g, Generation) and isinstance(h, Generation)
        assert g.text == h.text and g.completion_tokens == h.completion_tokens
