"""The fused text RMSNorm computes what transformers' does, and replaces every text norm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.model.fused import (
    compile_enabled,
    rms_norm,
    use_fused_text_attention,
    use_fused_text_mlp,
    use_fused_text_norms,
)
from benchcheck.engines.hf.model.state import state_of


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
    from benchcheck.engines.hf.engine import HFEngine

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
    from benchcheck.engines.base import LetterScores, ScoreRequest
    from benchcheck.engines.hf.engine import HFEngine
    from benchcheck.engines.hf.model import fused as hf_fused

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

    from benchcheck.engines.base import GenerateRequest, ScoreRequest
    from benchcheck.engines.hf.engine import HFEngine
    from benchcheck.engines.hf.model import fused as hf_fused

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
    assert_unmoved(before, after, gen_before, gen_after)


def test_mlp_residual_adds_in_the_product_and_equals_the_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextMLP

    from benchcheck.engines.hf.model import fused as hf_fused

    torch.manual_seed(0)
    cfg = Qwen3VLTextConfig(hidden_size=32, intermediate_size=96, hidden_act="silu")
    model = torch.nn.Sequential(Qwen3VLTextMLP(cfg)).double()
    mlp = model[0]
    state = state_of(model)  # the fused MLP's activation is kept there
    x, residual = torch.randn(2, 7, 32, dtype=torch.float64), torch.randn(2, 7, 32, dtype=torch.float64)
    expected = residual + mlp(x)
    assert torch.equal(hf_fused.mlp_residual(mlp, x, residual, state), expected)  # not fused: transformers' sum
    assert hf_fused.use_fused_text_mlp(model, compiler=lambda f: f) == 1
    seen: list[int] = []
    monkeypatch.setattr(torch, "addmm", _counting(torch.addmm, seen))
    fused = hf_fused.mlp_residual(mlp, x, residual, state)
    assert seen == [1]  # the residual went into the down projection's product
    assert fused.shape == residual.shape
    assert torch.allclose(fused, expected, rtol=0, atol=1e-12)
    assert torch.allclose(mlp(x), expected - residual, rtol=0, atol=1e-12)  # the fused MLP alone: the same
    state.config = HFConfig(ops=("-residual_epilogue",))  # gpu_screen's residual-apart rows
    assert torch.allclose(hf_fused.mlp_residual(mlp, x, residual, state), expected, rtol=0, atol=1e-12)
    assert seen == [1]
    state.config = HFConfig()
    mlp.down_proj = torch.nn.Linear(96, 32, bias=True).double()  # a bias: the plain sum, still the same function
    assert torch.allclose(hf_fused.mlp_residual(mlp, x, residual, state), residual + mlp(x), rtol=0, atol=1e-12)
    assert seen == [1]


@pytest.mark.parametrize("eager_rows", [0, 256])  # 0: the activation through the compiled path
def test_fused_layers_score_and_generate_the_same(tiny_model: Path, eager_rows: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Every text decoder layer with the residual in the down projection's product (the scored
    last layer too, and its unscored calls through the fused layer), as the engine installs it on
    CUDA: the letters' log-probs and greedy texts of the tiny model do not move."""
    from hf_helpers import make_jpeg

    import benchcheck.engines.hf.model.scored as hf_scored
    from benchcheck.engines.base import GenerateRequest, ScoreRequest
    from benchcheck.engines.hf.engine import HFEngine
    from benchcheck.engines.hf.model import fused as hf_fused

    monkeypatch.setattr(hf_fused, "EAGER_ROWS", eager_rows)
    engine = HFEngine(tiny_model, device="cpu")
    reqs = [ScoreRequest(f"r{i}", f"Question {i}: which?" + " more" * (5 * i) + "\nOptions:\nA. x\nB. y",
                         images=(make_jpeg(i),) if i % 2 else ()) for i in range(3)]
    gens = [GenerateRequest("g", "Describe.", (make_jpeg(9),), max_tokens=6)]
    before, gen_before = engine.score_sync(reqs), engine.generate_sync(gens)
    layers = engine.model.config.text_config.num_hidden_layers
    compiled: list[int] = []
    assert use_fused_text_mlp(engine.model, compiler=lambda f: _counting(f, compiled)) == layers
    assert hf_fused.use_fused_text_layers(engine.model) == layers  # after hf_scored, as on CUDA: it stays
    last = engine.model.model.language_model.layers[-1]
    assert last.forward.__func__.__qualname__.startswith("_scored_forward")
    assert state_of(engine.model).full_forward[last].__func__.__qualname__.startswith("use_fused_text_layers")
    assert hf_scored.use_scored_last_layer(engine.model)  # again: the layer must not come to call itself
    seen: list[int] = []
    monkeypatch.setattr(hf_fused, "mlp_residual", _counting(hf_fused.mlp_residual, seen))
    monkeypatch.setattr(hf_scored, "mlp_residual", hf_fused.mlp_residual)
    engine.score_sync(reqs[:1])  # one forward of a short prompt: every layer once, the scored last one too
    assert len(seen) == layers
    assert len(compiled) == (layers if eager_rows == 0 else 0)  # the compiled activation only at >= EAGER_ROWS rows
    after, gen_after = engine.score_sync(reqs), engine.generate_sync(gens)
    assert_unmoved(before, after, gen_before, gen_after)


def assert_unmoved(before: list[Any], after: list[Any], gen_before: list[Any], gen_after: list[Any]) -> None:
    """The same top tokens within 1e-5 in log-prob, and the same greedy texts."""
    from benchcheck.engines.base import Generation, LetterScores

    for a, b in zip(before, after, strict=True):
        assert isinstance(a, LetterScores) and isinstance(b, LetterScores)
        assert [t["token"] for t in a.top] == [t["token"] for t in b.top]
        assert max(abs(float(x["logprob"]) - float(y["logprob"])) for x, y in zip(a.top, b.top, strict=True)) < 1e-5
    for g, h in zip(gen_before, gen_after, strict=True):
        assert isinstance(g, Generation) and isinstance(h, Generation)
        assert g.text == h.text and g.completion_tokens == h.completion_tokens


def _counting(fn: Any, seen: list[int]) -> Any:
    def wrapped(*a: Any, **k: Any) -> Any:
        seen.append(1)
        return fn(*a, **k)
    return wrapped


@pytest.mark.parametrize("op", ["+graph_fused", "-graph_fused"])
def test_a_step_being_captured_takes_the_compiled_small_row_paths(tiny_model: Path, op: str) -> None:
    """Decode steps (one row each, far below ``EAGER_ROWS``) run the plain functions, except while
    a step is warmed up and captured as a CUDA graph (``ModelState.graph_step``, set by
    ``DecodeStep``) with op ``graph_fused`` on: then the norms, the q/k norm with rotary and
    SiLU-times-up take the compiled functions (here uncompiled, counted), and the tokens do not
    move."""
    from benchcheck.engines.base import GenerateRequest
    from benchcheck.engines.hf.engine import HFEngine

    base = HFEngine(tiny_model, device="cpu")
    # The whole call runs as a captured step here, its prefills too: every layer's full forward
    # (the scored last layer's prefill calls the plain q/k functions, as it does in any prefill).
    engine = base.with_config(base.config.with_ops(op, "-scored_last_layer"))
    gens = [GenerateRequest("g", "Say something", (), max_tokens=5),
            GenerateRequest("h", "Say something long" + " please" * 9, (), max_tokens=4)]
    def texts(out: list[Any]) -> list[tuple[str, int]]:
        return [(g.text, g.completion_tokens) for g in out]

    before = texts(engine.generate_sync(gens))
    norms: list[int] = []
    ropes: list[int] = []
    acts: list[int] = []
    layers = engine.model.config.text_config.num_hidden_layers
    assert use_fused_text_norms(engine.model, compiler=lambda f: _counting(f, norms)) == 2 * layers + 1 + 2 * layers
    assert use_fused_text_mlp(engine.model, compiler=lambda f: _counting(f, acts)) == layers
    assert use_fused_text_attention(engine.model, compiler=lambda f: _counting(f, ropes)) == layers
    assert texts(engine.generate_sync(gens)) == before
    assert (norms, ropes, acts) == ([], [], [])  # short prompts and eager steps: every call plain
    state = state_of(engine.model)
    state.graph_step = True
    try:
        captured = engine.generate_sync(gens)
    finally:
        state.graph_step = False
    assert texts(captured) == before
    if op == "+graph_fused":  # every layer's two norms and the final one, q and k, the activation: at every forward
        assert len(norms) > 0 and len(norms) % (2 * layers + 1) == 0
        assert len(ropes) == 2 * len(norms) // (2 * layers + 1) * layers
        assert len(acts) == len(norms) // (2 * layers + 1) * layers
    else:
        assert (norms, ropes, acts) == ([], [], [])
