"""Op ``attention_residual``: each text layer's attention residual added in its output
projection's product (``fused.project_out``, ``addmm``), in prefills and decode steps; the
letters' log-probs and greedy texts do not move (float32, CPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from hf_helpers import make_jpeg
from test_hf_fused import assert_unmoved

from benchcheck.engines.base import GenerateRequest, ScoreRequest
from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.model import fused as hf_fused


def test_project_out_adds_the_residual_in_the_product() -> None:
    g = torch.Generator().manual_seed(3)
    proj = torch.nn.Linear(16, 8, bias=False)
    out, residual = torch.randn(2, 5, 16, generator=g), torch.randn(2, 5, 8, generator=g)
    with torch.no_grad():
        got = hf_fused.project_out(proj, out, residual)
        assert got.shape == residual.shape
        torch.testing.assert_close(got, residual + proj(out), rtol=1e-6, atol=1e-6)
        assert torch.equal(hf_fused.project_out(proj, out, None), proj(out))
        biased = torch.nn.Linear(16, 8)  # not the plain bias-free layer: the sum as transformers does it
        assert torch.equal(hf_fused.project_out(biased, out, residual), residual + biased(out))


def test_scores_and_texts_do_not_move_and_every_layer_takes_its_residual(
        tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = HFEngine(tiny_model, device="cpu")
    assert not HFConfig().op("attention_residual")
    layers = engine.model.config.text_config.num_hidden_layers
    # The fused attention and layers, as the engine installs them on CUDA (compiled there).
    assert hf_fused.use_fused_text_attention(engine.model, compiler=lambda f: f) == layers
    assert hf_fused.use_fused_text_mlp(engine.model) == layers
    assert hf_fused.use_fused_text_layers(engine.model) == layers
    reqs = [ScoreRequest(f"r{i}", f"Question {i}: which?" + " more" * (5 * i) + "\nOptions:\nA. x\nB. y",
                         images=(make_jpeg(i),) if i % 2 else ()) for i in range(3)]
    gens = [GenerateRequest("g", "Describe.", (make_jpeg(9),), max_tokens=6),
            GenerateRequest("h", "Describe it in more words, please.", max_tokens=4)]
    before, gen_before = engine.score_sync(reqs), engine.generate_sync(gens)
    seen: list[tuple[bool, int]] = []  # (a residual given, rows) of each projection
    real = hf_fused.project_out

    def spy(o_proj: Any, out: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
        seen.append((residual is not None, out.shape[-2] if out.dim() == 3 else out.shape[0]))
        return real(o_proj, out, residual)

    monkeypatch.setattr(hf_fused, "project_out", spy)
    engine.score_sync(reqs[:1])
    assert [r for r, _ in seen] == [False] * len(seen) and len(seen) >= layers - 1  # op off: the sum apart
    seen.clear()
    on = engine.with_config(engine.config.with_ops("+attention_residual"))
    after, gen_after = on.score_sync(reqs), on.generate_sync(gens)
    assert seen and all(r for r, _ in seen)
    assert any(rows == 1 for _, rows in seen)  # the decode steps' projections too
    assert_unmoved(before, after, gen_before, gen_after)
