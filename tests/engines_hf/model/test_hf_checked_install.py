"""The checked install step: a fast path whose transformers class is gone (renamed in a release)
falls back to transformers' own forward with one warning naming it, or an error with ``strict``,
and the engine's scores stay those of transformers' plain forward."""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from hf_helpers import make_jpeg

from benchcheck.engines import LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.batch import collate, position_ids
from benchcheck.engines.hf.model.install import QWEN3_VL, FastPath, FastPathMismatch, install_fast_paths
from benchcheck.engines.hf.model.state import state_of
from benchcheck.engines.transformers_lib import transformers_module


@pytest.fixture()
def rename(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """``rename(old)``: transformers as a release that renamed class ``old`` would have it."""
    module = importlib.import_module(QWEN3_VL)
    renamed: list[type] = []

    def do(old: str) -> None:
        cls = getattr(module, old)
        monkeypatch.delattr(module, old)
        monkeypatch.setattr(module, f"{old}Renamed", cls, raising=False)
        cls.__name__ = f"{old}Renamed"  # restored below (monkeypatch cannot restore a type's name)
        renamed.append(cls)

    yield do
    for cls in renamed:
        cls.__name__ = cls.__name__.removesuffix("Renamed")


def load(tiny_model: Path) -> object:
    """A freshly loaded model, nothing patched."""
    tf = transformers_module()
    return tf.Qwen3VLForConditionalGeneration.from_pretrained(tiny_model, dtype=torch.float32,
                                                              attn_implementation="sdpa").eval()


def engine_over(tiny_model: Path, model: object, **kw: bool) -> HFEngine:
    tokenizer = transformers_module().AutoTokenizer.from_pretrained(tiny_model)
    config = json.loads((tiny_model / "preprocessor_config.json").read_text())
    return HFEngine.from_model(model, tokenizer, config, name="tiny", max_batch_size=4, **kw)


def test_a_renamed_class_falls_back_with_one_warning_and_plain_results(
        tiny_model: Path, rename: Callable[[str], None], caplog: pytest.LogCaptureFixture) -> None:
    plain, net = load(tiny_model), load(tiny_model)
    # The model is built; then transformers is as a release that renamed two classes would have it.
    rename("Qwen3VLVisionAttention")  # grouped vision attention's class
    rename("Qwen3VLTextDecoderLayer")  # the scored last layer's
    with caplog.at_level(logging.WARNING, logger="benchcheck.engines.hf"):
        engine = engine_over(tiny_model, net)
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno >= logging.WARNING and "fast path" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "grouped_vision_attention: transformers has no class Qwen3VLVisionAttention" in warnings[0]
    assert "scored_last_layer: transformers has no class Qwen3VLTextDecoderLayer" in warnings[0]
    report = engine.fast_paths
    assert set(report.fell_back) == {"grouped_vision_attention", "scored_last_layer"}
    assert report.installed["linear_patch_embed"] == 1 and report.installed["tree_attention"] == 1
    assert state_of(engine.model).report is report
    visual = engine.model.model.visual
    assert not any("forward" in vars(b.attn) for b in visual.blocks)  # transformers' forward, untouched
    assert "forward" not in vars(engine.model.model.language_model.layers[-1])
    assert engine.scored_last_layer is False
    reqs = [ScoreRequest("text", "Question: what is red?\nA. apple\nB. sky\nAnswer with the letter."),
            ScoreRequest("image", "What is shown?\nA. a cat\nB. a dog\nAnswer with the letter.",
                         images=(make_jpeg(3), make_jpeg(4)))]
    results = engine.score_sync(reqs)
    for req, res in zip(reqs, results, strict=True):
        assert isinstance(res, LetterScores), res
        # transformers' own forward of the unpatched model: the log-softmax at the last position
        prompt = engine.encoder.encode(req.prompt, req.images, req.assistant_prefix)
        batch = collate([prompt], engine.pad_id, engine.pixels, torch.float32)
        with torch.inference_mode():
            logits = plain(**batch.model_kwargs(), position_ids=position_ids(batch)).logits  # type: ignore[operator]
        top = torch.topk(torch.log_softmax(logits[0, -1].float(), -1), len(res.top))
        assert [engine.tokenizer.decode([int(t)]) for t in top.indices] == [e["token"] for e in res.top]
        got = torch.tensor([float(e["logprob"]) for e in res.top])
        assert torch.allclose(got, top.values, atol=1e-4), (got - top.values).abs().max()


def test_strict_refuses_a_fast_path_that_would_fall_back(tiny_model: Path, rename: Callable[[str], None]) -> None:
    net = load(tiny_model)
    rename("Qwen3VLVisionPatchEmbed")
    with pytest.raises(FastPathMismatch, match="linear_patch_embed: transformers has no class Qwen3VLVisionPatchEmbed"):
        engine_over(tiny_model, net, strict=True)
    assert not any("forward" in vars(m) for m in net.modules())  # type: ignore[attr-defined]  # nothing patched


def test_an_installer_that_changes_fewer_modules_than_the_model_has_is_a_fallback(
        hf_engine: HFEngine, caplog: pytest.LogCaptureFixture) -> None:
    model = hf_engine.model
    norms = sum(type(m).__name__ == "Qwen3VLTextRMSNorm" for m in model.modules())
    probe = FastPath("probe", {"Qwen3VLTextRMSNorm": ("weight", "variance_epsilon")}, (), lambda m: 1)
    missing = FastPath("probe_fn", {}, ("transformers.vision_utils:no_such_function",), lambda m: 1)
    before = state_of(model).report
    try:
        with caplog.at_level(logging.WARNING, logger="benchcheck.engines.hf"):
            report = install_fast_paths(model, fuse=False, paths=[probe, missing])
    finally:
        state_of(model).report = before
    assert report.installed == {"probe": 1}
    assert report.fell_back == {"probe": f"1 of {norms} modules changed",
                                "probe_fn": "no transformers.vision_utils.no_such_function"}
    assert sum("fell back" in r.getMessage() for r in caplog.records) == 1
    with pytest.raises(FastPathMismatch, match="probe_fn"):  # strict: before anything is installed
        install_fast_paths(model, fuse=False, strict=True, paths=[missing, probe])
