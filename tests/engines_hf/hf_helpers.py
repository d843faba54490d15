"""Helpers of the hf engine tests."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from benchcheck.engines import Failure, LetterScores, ScoreRequest
from benchcheck.engines.hf.engine import HFEngine
from benchcheck.items import Item
from benchcheck.protocol import letter_logprobs
from benchcheck.screen.requests import build_item_requests
from benchcheck.screen.steps import default_run_spec


def make_jpeg(seed: int, w: int = 448, h: int = 256) -> bytes:
    """A real JPEG (q=85) of random smooth content."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(1, h // 8), max(1, w // 8), 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(small).resize((w, h), Image.Resampling.BILINEAR).save(buf, "JPEG", quality=85)
    return buf.getvalue()


QUESTIONS = ["What color is the ball?", "What does the man do after he opens the door?", "Where is the dog?"]


OPTIONS = [["red", "blue", "green", "black"], ["runs away", "sits down", "waves", "reads a book"],
           ["on the sofa", "in the garden", "under the table", "next to the car", "on the bed"]]


def step1_requests() -> list[ScoreRequest]:
    """Step 1's real requests (4 seeded permutations per item) for three items."""
    out: list[ScoreRequest] = []
    for i, (q, opts) in enumerate(zip(QUESTIONS, OPTIONS, strict=True)):
        item = Item(item_id=f"demo_{i}", bench="demo", question=q, options=list(opts), answer=0, video_id=None)
        out += build_item_requests(default_run_spec(1), item).requests
    return out


def ok(res: list[LetterScores | Failure]) -> list[LetterScores]:
    assert all(isinstance(r, LetterScores) for r in res), res
    return [r for r in res if isinstance(r, LetterScores)]


def compare(engine: HFEngine, reqs: list[ScoreRequest]) -> float:
    """Largest difference of any top-20 log-prob between shared and unshared scoring."""
    engine.share_prefixes = True
    shared = ok(engine.score_sync(reqs))
    engine.share_prefixes = False
    plain = ok(engine.score_sync(reqs))
    worst = 0.0
    for a, b in zip(shared, plain, strict=True):
        assert a.request_id == b.request_id and a.prompt_tokens == b.prompt_tokens
        assert [e["token"] for e in a.top[:5]] == [e["token"] for e in b.top[:5]]
        la, _, _ = letter_logprobs(a.top, 5)
        lb, _, _ = letter_logprobs(b.top, 5)
        worst = max(worst, *(abs(x - y) for x, y in zip(la, lb, strict=True)))
        worst = max(worst, *(abs(float(x["logprob"]) - float(y["logprob"])) for x, y in zip(a.top, b.top, strict=True)))
    return worst
