"""The last decoder layer at the scored positions only (hf_scored): the same scores as the full
layer in every layout the engine scores in, and only the scored rows through its MLP."""

from __future__ import annotations

import copy

import pytest
import torch
from hf_helpers import make_jpeg, ok, step1_requests, tree_ops, variant

from benchcheck.engines.base import GenerateRequest, Generation, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.model.scored import Scored, use_scored_last_layer


def test_right_padded_rows_score_their_last_real_token_over_their_real_tokens() -> None:
    s = Scored.right_padded([3, 1], 4, torch.device("cpu"))
    assert s.query.tolist() == [2, 4]
    assert s.keys.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert s.valid.tolist() == [[True, True, True, False], [True, False, False, False]]


def test_spans_are_laid_out_in_order_and_padded_with_a_real_key() -> None:
    s = Scored.from_spans([6, 2], [[(0, 3), (5, 7)], [(1, 3)]], torch.device("cpu"))
    assert s.query.tolist() == [6, 2]
    assert s.keys.tolist() == [[0, 1, 2, 5, 6], [1, 2, 2, 2, 2]]
    assert s.valid.tolist() == [[True] * 5, [True, True, False, False, False]]


def image_requests() -> list[ScoreRequest]:
    """One-frame-like requests of different lengths (padding in every batch), nothing shared."""
    return [ScoreRequest(f"r{i}", f"Question {i}: what is shown?" + " more" * (5 * i) + "\nOptions:\nA. x\nB. y",
                         images=(make_jpeg(i),)) for i in range(6)]


@pytest.fixture()
def engine(hf_engine: HFEngine) -> HFEngine:
    return variant(hf_engine, max_batch_size=16)  # type: ignore[return-value]


@pytest.mark.parametrize(("layout", "share", "tree", "unpadded"), [
    ("right-padded rows, text", False, "mask", False),
    ("right-padded rows, images", False, "mask", False),
    ("families in one row (varlen)", True, "varlen", False),
    ("families in padded rows (tree mask)", True, "mask", False),
    ("images in one row, unpadded", False, "varlen", True),
])
def test_scored_last_layer_equals_the_full_layer(engine: HFEngine, layout: str, share: bool, tree: str,
                                                 unpadded: bool) -> None:
    reqs = image_requests() if "images" in layout else step1_requests() + image_requests()[:2]
    layout_engine: HFEngine = variant(engine, *tree_ops(share, tree, unpadded))  # type: ignore[assignment]
    layer = engine.model.model.language_model.layers[-1]
    rows: list[int] = []
    hook = layer.mlp.register_forward_hook(lambda m, a, out: rows.append(a[0].reshape(-1, a[0].shape[-1]).shape[0]))
    try:
        assert layout_engine.scored_last_layer  # the default
        fast = ok(layout_engine.score_sync(reqs))
        scored_rows, rows[:] = sum(rows), []
        full = ok(variant(layout_engine, "-scored_last_layer").score_sync(reqs))  # type: ignore[attr-defined]
    finally:
        hook.remove()
    assert scored_rows == len(reqs)  # the MLP saw one row per request, not every position
    assert sum(rows) > 2 * len(reqs)
    for a, b in zip(fast, full, strict=True):
        assert [e["token"] for e in a.top] == [e["token"] for e in b.top]
        assert max(abs(float(x["logprob"]) - float(y["logprob"])) for x, y in zip(a.top, b.top, strict=True)) < 1e-4
        assert a.exact and [e["token"] for e in a.exact] == [e["token"] for e in b.exact]
        assert max(abs(float(x["logprob"]) - float(y["logprob"])) for x, y in zip(a.exact, b.exact, strict=True)) < 1e-4


def test_a_deepstack_addition_after_the_last_layer_keeps_the_full_layer(engine: HFEngine) -> None:
    """The model's loop adds image features after the first layers; were the last among them, its
    full-width output would be needed: the scored layer is then not installed."""
    model = copy.deepcopy(engine.model)
    layers = len(model.model.language_model.layers)
    model.config.vision_config.deepstack_visual_indexes = list(range(layers))
    assert not use_scored_last_layer(model)
    assert use_scored_last_layer(copy.deepcopy(engine.model))


def test_a_generation_prefill_runs_the_last_layer_at_each_rows_last_token(engine: HFEngine) -> None:
    """Generation too: the prefill's last layer fills the KV cache at every position and runs its
    MLP at each row's last real token alone; the tokens equal the full layer's."""
    reqs = [GenerateRequest(r.request_id, r.prompt, r.images, max_tokens=5) for r in image_requests()[:4]]
    layer = engine.model.model.language_model.layers[-1]
    rows: list[int] = []
    hook = layer.mlp.register_forward_hook(lambda m, a, out: rows.append(a[0].reshape(-1, a[0].shape[-1]).shape[0]))
    try:
        fast = engine.generate_sync(reqs)
        scored_rows, rows[:] = rows[0], []
        full = variant(engine, "-scored_last_layer").generate_sync(reqs)  # type: ignore[attr-defined]
    finally:
        hook.remove()
    assert scored_rows == len(reqs)  # one batch of four rows (padded on the right): four MLP rows
    assert rows[0] > 2 * len(reqs)  # the full layer: every position
    assert all(isinstance(g, Generation) for g in fast + full)
    assert [g.text for g in fast] == [g.text for g in full]  # type: ignore[union-attr]
