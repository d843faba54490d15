"""Each benchmark's sweep pattern, measured directly (without the sweep runner): the reference
engine's generated answers on frame sets made with `benchcheck.video.plans` for the resolution
ladder (32 frames at short side 168 vs 448) and the frame ladder (8 vs 128 frames at 224), and
for the blind and one-frame conditions. Every answer equals the construction's prediction, and
the accuracy differences give each benchmark its expected verdict."""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict

from benchcheck.demo.kinds import SWEEP_VIEWS, answerable, expected_verdicts
from benchcheck.demo.run import Benchmarks
from benchcheck.engines.base import GenerateRequest, Generation
from benchcheck.engines.rules.reference import ReferenceEngine
from benchcheck.protocol import LETTERS, build_prompt
from benchcheck.screen.steps import DEFAULT_INTRO, INTROS
from benchcheck.video.extract import extract_jpegs

CONDITIONS = ("v_blind", "v_1", "v_8_s224", "v_128_s224", "v_32_s168", "v_32_s448")
ANSWER = re.compile(r"Answer:\s*([A-Z])\b")
MIN_EFFECT = 0.2


def test_sweep_answers_and_verdicts_follow_the_construction(known: Benchmarks) -> None:
    store = known.frames.parent.parent / "store"
    frames: dict[tuple[str, str], tuple[bytes, ...]] = {}
    engine = ReferenceEngine()
    intro = INTROS[DEFAULT_INTRO].frames
    reqs, meta = [], []
    for it in known.items:
        vid = known.video_ids[it.scene]
        for cond in CONDITIONS:
            if cond != "v_blind" and (vid, cond) not in frames:
                frames[vid, cond] = tuple(extract_jpegs(store, vid, cond).jpegs)
            images = () if cond == "v_blind" else frames[vid, cond]
            reqs.append(GenerateRequest(f"{it.item_id}|{cond}", build_prompt(intro, it.question, it.options), images))
            meta.append((it, cond))
    answers = asyncio.run(engine.generate(reqs))
    correct: dict[tuple[str, str], list[bool]] = defaultdict(list)
    wrong = []
    for (it, cond), ans in zip(meta, answers, strict=True):
        assert isinstance(ans, Generation), ans
        m = ANSWER.search(ans.text)
        assert m, ans.text
        hit = LETTERS.index(m.group(1)) == it.answer
        kind = "static" if it.kind == "duplicate" else it.kind
        # Undecided answers are flat and say A: right exactly when the gold is A.
        expect = answerable(kind, SWEEP_VIEWS[cond]) or it.answer == 0
        if hit != expect:
            wrong.append((it.item_id, it.kind, cond, ans.text))
        correct[it.bench, cond].append(hit)
    assert not wrong, wrong[:10]

    def acc(bench: str, cond: str) -> float:
        v = correct[bench, cond]
        return sum(v) / len(v)

    for bench, verdict in expected_verdicts().items():
        pixels = acc(bench, "v_32_s448") - acc(bench, "v_32_s168")
        frames_gain = acc(bench, "v_128_s224") - acc(bench, "v_8_s224")
        measured = {(True, True): "both", (True, False): "pixels", (False, True): "frames"}.get(
            (pixels >= MIN_EFFECT, frames_gain >= MIN_EFFECT), "neither")
        assert measured == verdict, (bench, pixels, frames_gain)
        # What a benchmark does not need moves nothing at all (no kind in it changes there).
        if verdict in ("frames", "neither"):
            assert pixels == 0, bench
        if verdict in ("pixels", "neither"):
            assert frames_gain == 0, bench
