"""The visual forward without device reads (op ``visual_no_reads``): the DeepStack addition equals
transformers' own bit for bit, the engine's scores and texts do not move with the op, off runs
transformers' methods, and the op's switch and hash."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from hf_helpers import make_jpeg, variant

from benchcheck.engines import GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.hf.config import HFConfig
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.model.visual_reads import add_at_mask

PATH = "visual_no_reads"


def reference(hidden: torch.Tensor, mask: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """transformers' ``_deepstack_process``: boolean indexing, read and written."""
    h = hidden.clone()
    h[mask, :] = h[mask, :] + values
    return h


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("seed", range(6))
def test_the_addition_equals_boolean_indexing_bit_for_bit(dtype: torch.dtype, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    rows, width, d = (1, 2, 3)[seed % 3], 17 + seed, 8
    hidden = torch.randn(rows, width, d, generator=gen).to(dtype)
    mask = torch.rand(rows, width, generator=gen) < (0.0 if seed == 5 else 0.4)
    mask[0, -1] = seed != 5  # a visual position at the very end too (but none at all for seed 5)
    values = torch.randn(int(mask.sum()), d, generator=gen).to(dtype)
    got = add_at_mask(hidden, mask, values)
    assert got.shape == hidden.shape and got.dtype == dtype
    assert torch.equal(got, reference(hidden, mask, values))
    assert got.data_ptr() != hidden.data_ptr()  # a new tensor, as transformers' clone


def test_it_equals_the_text_models_own_method(hf_engine: HFEngine) -> None:
    text = hf_engine.model.model.language_model
    gen = torch.Generator().manual_seed(3)
    hidden = torch.randn(1, 40, hf_engine.model.config.text_config.hidden_size, generator=gen)
    mask = torch.zeros(1, 40, dtype=torch.bool)
    mask[0, 5:21] = True
    values = torch.randn(16, hidden.shape[-1], generator=gen)
    assert torch.equal(add_at_mask(hidden, mask, values), type(text)._deepstack_process(text, hidden, mask, values))


def counting(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[int]:
    calls = [0]
    original: Callable[..., Any] = getattr(cls, name)

    def wrapped(self: Any, *a: Any, **kw: Any) -> Any:
        calls[0] += 1
        return original(self, *a, **kw)

    monkeypatch.setattr(cls, name, wrapped)
    return calls


def test_scores_and_texts_do_not_move_and_off_runs_transformers_methods(
        hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    assert hf_engine.fast_paths.installed[PATH] == 2
    assert hf_engine.model.config.vision_config.deepstack_visual_indexes  # the tiny model has DeepStack layers
    mask_calls = counting(monkeypatch, type(hf_engine.model.model), "get_placeholder_mask")
    stack_calls = counting(monkeypatch, type(hf_engine.model.model.language_model), "_deepstack_process")
    reqs = [ScoreRequest(f"v{i}", "What is shown?\nA. a cat\nB. a dog\nAnswer with the letter.",
                         images=(make_jpeg(10 + i), make_jpeg(20 + i, w=256, h=448))) for i in range(3)]
    gens = [GenerateRequest("g", "Describe the video.", (make_jpeg(5), make_jpeg(6)), max_tokens=4)]
    on, off = variant(hf_engine, "+" + PATH), variant(hf_engine, "-" + PATH)
    got_on = on.score_sync(reqs)  # type: ignore[attr-defined]
    text_on = on.generate_sync(gens)  # type: ignore[attr-defined]
    assert mask_calls == [0] and stack_calls == [0]
    got_off = off.score_sync(reqs)  # type: ignore[attr-defined]
    text_off = off.generate_sync(gens)  # type: ignore[attr-defined]
    assert mask_calls[0] > 0 and stack_calls[0] > 0
    for a, b in zip(got_on, got_off, strict=True):
        assert isinstance(a, LetterScores) and isinstance(b, LetterScores)
        assert a.top == b.top and a.exact == b.exact  # float32 on the CPU: the same values exactly
    assert isinstance(text_on[0], Generation) and isinstance(text_off[0], Generation)
    assert text_on[0].text == text_off[0].text and text_on[0].completion_tokens == 4


def test_the_op_switch_and_the_config_hash() -> None:
    assert HFConfig().op(PATH) and HFConfig().op(PATH, cuda=False)  # on by default: timed (decision 116)
    off = HFConfig.parse([f"ops=-{PATH}"])
    assert not off.op(PATH) and off.hash != HFConfig().hash
    assert HFConfig.parse([f"ops=+{PATH}"]).hash == HFConfig().hash  # on as named = the default
