"""The reference engine on its own: answers come from the request only, margins follow the
evidence (flat when undecided), both request types, failures for prompts it cannot read."""

from __future__ import annotations

import asyncio
import io

import numpy as np
from PIL import Image

from benchcheck.demo.scenes import make_scenes, paint
from benchcheck.engines.base import Failure, GenerateRequest, Generation, LetterScores, ScoreRequest
from benchcheck.engines.registry import create_engine
from benchcheck.engines.rules.reference import ReferenceEngine, decide
from benchcheck.protocol import build_prompt, build_prompt_options_only, decide_single, letter_logprobs

INTRO = "Select the best answer."
SCENE = make_scenes(4)[0]


def jpeg(a: np.ndarray, short: int | None = None) -> bytes:
    im = Image.fromarray(a)
    if short is not None:
        im = im.resize((2 * short, short), Image.Resampling.BOX)
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def frames(idx: list[int], short: int | None = 224) -> tuple[bytes, ...]:
    return tuple(jpeg(paint(SCENE, i), short) for i in idx)


def static_prompt() -> tuple[str, int]:
    opts = [SCENE.absent[0], SCENE.static, SCENE.absent[1], SCENE.absent[2]]
    return build_prompt(INTRO, "What colour is the large block on the left?", opts), 1


def test_flat_when_the_request_does_not_hold_the_answer() -> None:
    prompt, gold = static_prompt()
    blind = decide(prompt, ())
    assert blind.pick is None and blind.confidence == 0.0
    lps = list(blind.letter_logprobs().values())
    assert max(lps) == min(lps)  # margin 0: never removed
    seen = decide(prompt, frames([20]))
    assert seen.pick == gold and seen.confidence == 1.0 and seen.rule == "vision:dominant"


def test_order_needs_frames_in_order() -> None:
    opts = [SCENE.second, SCENE.first, SCENE.absent[0], SCENE.absent[1]]
    prompt = build_prompt(INTRO, "Which colour appeared first in the middle square?", opts)
    in_order = list(range(0, 40, 5))
    assert decide(prompt, frames(in_order)).pick == 1
    assert decide(prompt, frames([20])).pick is None
    shuffled = [35, 0, 20, 5, 30, 10, 25, 15]  # alternating halves: many runs per colour
    assert decide(prompt, frames(shuffled)).pick is None


def test_the_tiny_mark_is_seen_only_at_a_high_resolution() -> None:
    corners = ["top left", "top right", "bottom left", "bottom right"]
    prompt = build_prompt(INTRO, "Where is the tiny white dot?", corners)
    gold = corners.index(SCENE.dot_corner)
    assert decide(prompt, frames([3, 9], short=None)).pick == gold  # storage: 448 px short side
    assert decide(prompt, frames([3, 9], short=168)).pick is None


def test_margin_grows_with_the_evidence() -> None:
    opts = [SCENE.absent[0], SCENE.flash, SCENE.absent[1]]
    prompt = build_prompt(INTRO, "Which colour flashed briefly at the top right?", opts)
    ten = [*[i for i in range(0, 40, 4) if i != SCENE.flash_frame][:9], SCENE.flash_frame]
    few = decide(prompt, frames(ten))
    many = decide(prompt, frames([*range(0, 40, 2), SCENE.flash_frame]))
    assert few.pick == many.pick == 1
    assert 0 < few.confidence < many.confidence < 1


def test_score_and_generate_through_the_registry() -> None:
    engine = create_engine("reference")
    assert engine.name == "reference" and engine.model_name.startswith("reference:")
    leak = build_prompt(INTRO, "The ball is red. What colour is the ball?", ["blue", "green", "red"])
    opts_only = build_prompt_options_only(INTRO, ["glorp", "red", "vexil"])
    res = asyncio.run(engine.score([ScoreRequest("a", leak), ScoreRequest("b", opts_only),
                                    ScoreRequest("c", "no options here")]))
    a, b, c = res
    assert isinstance(a, LetterScores) and isinstance(b, LetterScores) and isinstance(c, Failure)
    lp = letter_logprobs(a.top, 3)[0]
    d = decide_single(lp, 2)
    assert d.removed and abs(d.margin - 4.0) < 1e-9 and len(a.top) == 20
    assert decide_single(letter_logprobs(b.top, 3)[0], 1).removed
    assert "reference engine" in c.message
    undecided = build_prompt(INTRO, "Which one?", ["blue", "red"])
    reqs = [GenerateRequest("g", leak), GenerateRequest("h", leak, assistant_prefix="Answer:"),
            GenerateRequest("i", undecided)]
    gen = asyncio.run(engine.generate(reqs))
    assert [g.text for g in gen if isinstance(g, Generation)] == ["Answer: C", " C", "Answer: A"]
    assert ReferenceEngine("rules").model_name == "reference:rules"


def test_reference_engine_comes_from_the_registry_and_labels_itself() -> None:
    from benchcheck.engines import capabilities
    from benchcheck.engines.options import EngineOptions
    from benchcheck.engines.registry import SERVABLE, engine_names, from_options

    assert "reference" in engine_names() and "reference" in SERVABLE
    engine = from_options("reference", EngineOptions(served_name="rules"))
    assert engine.model_name == "reference:rules"
    assert capabilities.served_id(engine, "demo") == "reference:demo"
    assert (capabilities.max_model_len(engine) or 0) >= 65536  # the sweep's context check passes
