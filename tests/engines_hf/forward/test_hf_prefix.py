"""Prefix-shared scoring (step 1's permutations) equals unshared scoring, in float32 on the CPU."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from hf_helpers import OPTIONS, QUESTIONS, compare, make_jpeg, ok, step1_requests

from benchcheck.engines import ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.engines.hf.forward.packed import Family
from benchcheck.engines.hf.inputs.encoder import EncodedPrompt
from benchcheck.engines.hf.schedule import families as hf_prefix
from benchcheck.engines.hf.schedule.batches import chunk_spans
from benchcheck.engines.hf.schedule.families import common_prefix, plan_families
from benchcheck.engines.hf.schedule.pipeline import Encoded, Job, Plan, PlannedBatch, first_chunk, run_pipeline
from benchcheck.items import Item
from benchcheck.screen.requests import build_item_requests
from benchcheck.screen.steps import default_run_spec


@pytest.fixture()
def engine(hf_engine: HFEngine) -> Iterator[HFEngine]:
    size, share, tree = hf_engine.max_batch_size, hf_engine.share_prefixes, hf_engine.tree_attention
    hf_engine.max_batch_size = 16
    yield hf_engine
    hf_engine.max_batch_size, hf_engine.share_prefixes, hf_engine.tree_attention = size, share, tree


def test_permutations_form_one_family_per_item(hf_engine: HFEngine) -> None:
    reqs = step1_requests()
    prompts = [hf_engine.encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in reqs]
    fams = plan_families(prompts)
    assert sorted(sorted(f.members) for f in fams) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    for f in fams:
        head = prompts[f.members[0]].input_ids
        # The prefix is the longest common start of the members: it ends where an option differs.
        assert f.prefix == min(common_prefix(head, prompts[m].input_ids) for m in f.members)
        assert all(f.prefix < prompts[m].n_tokens for m in f.members)


def test_identical_prompts_and_loners() -> None:
    a = EncodedPrompt(np.arange(20), np.zeros(20, np.int64), (), None, None)
    b = EncodedPrompt(np.arange(20), np.zeros(20, np.int64), (), None, None)
    c = EncodedPrompt(np.arange(100, 130), np.zeros(30, np.int64), (), None, None)
    short = EncodedPrompt(np.arange(5), np.zeros(5, np.int64), (), None, None)  # under the minimum shared
    fams = plan_families([a, c, b, short])
    assert Family((0, 2), 19) in fams  # all but the scored last token
    assert Family((1,), 29) in fams and Family((3,), 4) in fams


def test_cpu_engine_picks_the_tree_mask(hf_engine: HFEngine) -> None:
    assert hf_engine.tree_attention == "mask"  # FlashAttention's varlen kernel is CUDA-only


@pytest.mark.parametrize("tree", ["mask", "varlen"])
def test_shared_scoring_equals_unshared_float32(engine: HFEngine, tree: str) -> None:
    engine.tree_attention = tree
    reqs = step1_requests()
    worst = compare(engine, reqs)
    assert worst < 1e-4, worst


@pytest.mark.parametrize("tree", ["mask", "varlen"])
def test_shared_scoring_with_images_equals_unshared(engine: HFEngine, tree: str) -> None:
    engine.tree_attention = tree
    frame = make_jpeg(3)
    other = make_jpeg(4)
    base = step1_requests()[:8]
    # Items 0-3 share one image (a family including the image), 4-7 each see another one.
    reqs = [ScoreRequest(r.request_id, r.prompt, (frame,) if i < 4 else (other, frame) if i % 2 else (frame, other))
            for i, r in enumerate(base)]
    prompts = [engine.encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in reqs]
    fams = plan_families(prompts)
    assert any(len(f.members) == 4 for f in fams)
    assert compare(engine, reqs) < 1e-4


@pytest.mark.parametrize("tree", ["mask", "varlen"])
def test_mixed_batch_of_families_and_loners_keeps_order(engine: HFEngine, tree: str) -> None:
    engine.tree_attention = tree
    reqs = step1_requests()
    mixed = [reqs[5], ScoreRequest("lone", "Something else entirely. Answer with A or B."), *reqs[:4], reqs[9]]
    assert compare(engine, mixed) < 1e-4
    engine.share_prefixes = True
    res = ok(engine.score_sync(mixed))
    assert [r.request_id for r in res] == [r.request_id for r in mixed]


def test_packed_mask_is_additive_with_aligned_rows(hf_engine: HFEngine) -> None:
    import torch

    from benchcheck.engines.hf.forward.packed import pack

    prompts = [hf_engine.encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in step1_requests()]
    fams = plan_families(prompts)
    packed = pack(prompts, fams, hf_engine.pad_id, hf_engine.pixels, torch.float32)
    m = packed.attention_mask
    assert m.dtype == torch.float32 and m.stride(-2) % 16 == 0  # no per-layer realignment copy
    assert set(torch.unique(m).tolist()) == {0.0, float("-inf")}
    allowed = m[:, 0] == 0
    assert not allowed.triu(diagonal=1).any()  # causal
    assert allowed.any(-1).all()  # no token (padding included) sees nothing


def counted_plan_families(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The real ``plan_families``, counted (the size of each call) wherever the engine's modules
    call it."""
    real = hf_prefix.plan_families
    calls: list[int] = []

    def counting(prompts: Sequence[EncodedPrompt], *a: Any, **k: Any) -> list[Family]:
        calls.append(len(prompts))
        return real(prompts, *a, **k)

    for name, module in list(sys.modules.items()):
        if name.startswith("benchcheck.engines") and getattr(module, "plan_families", None) is real:
            monkeypatch.setattr(module, "plan_families", counting)
    return calls


def test_run_gets_the_families_planned_for_its_batch(hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    reqs = step1_requests()  # 3 items x 4 permutations
    jobs = [Job(r.request_id, r.prompt, r.images, r.assistant_prefix, None, 1) for r in reqs]
    plan = Plan(max_batch_size=4, max_batch_tokens=65536, first_chunk=4)  # chunks: item 0, then items 1-2
    chunks = list(chunk_spans(len(jobs), first_chunk(jobs, plan), plan.chunk_growth, lambda lo: 32))
    assert chunks == [(0, 4), (4, 12)]
    calls = counted_plan_families(monkeypatch)
    seen: list[tuple[PlannedBatch, list[Encoded]]] = []

    def run(batch: PlannedBatch, enc: list[Encoded]) -> Callable[[], list[int]]:
        seen.append((batch, enc))
        return lambda: list(batch.idx)

    out = run_pipeline(jobs, hf_engine._encode, hf_engine._pool, plan, run, share=True)
    assert out == list(range(len(jobs)))  # every request's result in its place
    assert calls == [4, 8]  # once per chunk, none per batch
    assert sorted(sorted(b.idx) for b, _ in seen) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    for batch, enc in seen:
        prompts = [e.prompt for e in enc]
        for i, p in zip(batch.idx, prompts, strict=True):  # the encodings of its requests, in its order
            alone = hf_engine.encoder.encode(reqs[i].prompt, (), reqs[i].assistant_prefix)
            assert np.array_equal(p.input_ids, alone.input_ids)
        # Exactly the family of its batch: the item's 4 permutations, sharing all up to the options.
        head = prompts[0].input_ids
        assert batch.families == (Family((0, 1, 2, 3), min(common_prefix(head, p.input_ids) for p in prompts)),)
        assert list(batch.families) == plan_families(prompts)  # as planning the batch alone (uncounted) finds


def test_scoring_plans_families_once_per_chunk(engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    reqs = step1_requests()
    jobs = [Job(r.request_id, r.prompt, r.images, r.assistant_prefix, None, 1) for r in reqs]
    plan = engine._plan()
    window = 8 * plan.max_batch_size
    chunks = list(chunk_spans(len(jobs), first_chunk(jobs, plan), plan.chunk_growth, lambda lo: window))
    calls = counted_plan_families(monkeypatch)
    engine.share_prefixes = True
    ok(engine.score_sync(reqs))
    assert calls == [hi - lo for lo, hi in chunks]
    engine.share_prefixes = False
    ok(engine.score_sync(reqs))
    assert calls == [hi - lo for lo, hi in chunks]  # not at all without sharing


def test_a_split_batch_keeps_its_families_on_either_side() -> None:
    batch = PlannedBatch([7, 3, 9, 4, 8], (Family((0, 1, 2), 30), Family((3, 4), 12)))
    left, right = batch.halves()
    assert left == PlannedBatch([7, 3], (Family((0, 1), 30),))
    assert right == PlannedBatch([9, 4, 8], (Family((0,), 30), Family((1, 2), 12)))
    assert PlannedBatch([1, 2]).halves() == (PlannedBatch([1]), PlannedBatch([2]))


def video_questions(frames: Sequence[bytes]) -> list[ScoreRequest]:
    """Step 2's real requests for three different questions about each of ``frames`` (one
    video's middle frame each), listed question by question (videos interleaved)."""
    reqs: list[ScoreRequest] = []
    for i, (q, opts) in enumerate(zip(QUESTIONS, OPTIONS, strict=True)):
        for v, frame in enumerate(frames):
            item = Item(item_id=f"v{v}_q{i}", bench="demo", question=q, options=list(opts), answer=0,
                        video_id=f"vid{v}")
            reqs += build_item_requests(default_run_spec(2), item, [frame] * 32).requests
    return reqs


def test_questions_about_the_same_frame_form_one_family(hf_engine: HFEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    frames = [make_jpeg(11), make_jpeg(12)]
    reqs = video_questions(frames)
    prompts = [hf_engine.encoder.encode(r.prompt, r.images, r.assistant_prefix) for r in reqs]
    fams = plan_families(prompts)
    assert sorted(sorted(f.members) for f in fams) == [[0, 2, 4], [1, 3, 5]]  # by video, across questions
    for f in fams:
        image_end = int(np.flatnonzero(prompts[f.members[0]].mm_token_type_ids != 0)[-1])
        assert image_end < f.prefix < min(prompts[m].n_tokens for m in f.members)  # the frame and the intro
    # In token ids every image looks alike: without the images' key, the questions sort apart
    # (the videos' prompts of one question are neighbours, but their frames differ).
    monkeypatch.setattr(hf_prefix, "SHARE_FRAMES", False)
    assert all(len(f.members) == 1 for f in plan_families(prompts))
    # The key orders only: equal keys over different frames share nothing.
    monkeypatch.setattr(hf_prefix, "SHARE_FRAMES", True)
    forged = [EncodedPrompt(p.input_ids, p.mm_token_type_ids, p.frames, p.image_grid_thw, p.mrope, b"same")
              for p in prompts]
    for f in plan_families(forged):
        assert len({prompts[m].frames[0].tobytes() for m in f.members}) == 1


@pytest.mark.parametrize("tree", ["mask", "varlen"])
def test_questions_about_one_frame_score_as_unshared_and_encode_it_once(
    engine: HFEngine, tree: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.tree_attention = tree
    monkeypatch.setattr(engine, "first_chunk", 64)  # one chunk: the call's requests are planned together
    reqs = video_questions([make_jpeg(21), make_jpeg(22)])
    assert compare(engine, reqs) < 1e-4
    images: list[int] = []
    visual = engine.model.model.visual
    real = visual.forward

    def counting(*a: Any, **k: Any) -> Any:
        grid = k.get("grid_thw", a[1] if len(a) > 1 else None)
        images.append(int(grid.shape[0]))
        return real(*a, **k)

    monkeypatch.setattr(visual, "forward", counting)
    engine.share_prefixes = True
    ok(engine.score_sync(reqs))
    assert sum(images) == 2  # one frame per video, not one per question
    images.clear()
    engine.share_prefixes = False
    ok(engine.score_sync(reqs))
    assert sum(images) == len(reqs)
