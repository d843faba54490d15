"""Synthetic requests of the screening steps, built with the project's own request builder."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image

from benchcheck.engines.base import ScoreRequest
from benchcheck.items import Item
from benchcheck.screen.requests import build_item_requests
from benchcheck.screen.steps import default_run_spec

_TEXT = (
    "what does the person in the video do first after the door opens and before the red car "
    "leaves the street near the kitchen while a dog runs towards the ball on the table"
)
WORDS = _TEXT.split()


def jpeg(seed: int, w: int = 448, h: int = 256) -> bytes:
    """A JPEG (q=85) of smooth random content: a real decode and preprocessing cost."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (h // 16, w // 16, 3), dtype=np.uint8)
    im = Image.fromarray(small).resize((w, h), Image.Resampling.BILINEAR)
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=85)
    return buf.getvalue()


def words(rng: np.random.Generator, n: int) -> str:
    return " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), n))


def synthetic_items(n: int, q_words: int, seed: int = 0) -> list[Item]:
    rng = np.random.default_rng(seed)
    return [Item(f"syn_{i}", "syn", words(rng, q_words) + "?", tuple(words(rng, 4) for _ in range(5)), 0)
            for i in range(n)]


def nextqa_like_csv(path: Path, n: int, seed: int = 1) -> Path:
    """A benchmark file in the NExT-QA CSV layout with questions and options of its usual length."""
    rng = np.random.default_rng(seed)
    subj = ["the boy in blue", "the lady", "the man with the hat", "the baby", "the dog", "the girl in pink"]
    verbs = ["pick up the toy", "turn around", "walk to the sofa", "laugh", "look at the camera", "stand up"]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["video", "frame_count", "width", "height", "question", "answer", "qid", "type",
                    "a0", "a1", "a2", "a3", "a4"])
        for i in range(n):
            s, v = subj[i % len(subj)], verbs[(i * 7) % len(verbs)]
            q = f"why did {s} {v} after {subj[(i + 2) % len(subj)]} {verbs[(i + 3) % len(verbs)]}"
            opts = [f"{rng.choice(['to', 'because', 'so that'])} {words(rng, int(rng.integers(3, 8)))}"
                    for _ in range(5)]
            w.writerow([1000 + i, 900, 640, 360, q, int(rng.integers(0, 5)), i, "CW", *opts])
    return path


def step1(items: Sequence[Item]) -> list[ScoreRequest]:
    return [r for it in items for r in build_item_requests(default_run_spec(1), it).requests]


def visual(items: Sequence[Item], step: int, frames: Sequence[bytes], n_frames: int = 32,
           per_video: int = 1) -> list[ScoreRequest]:
    """The step's requests, ``per_video`` consecutive items asking about one video. Each video's
    frames are its own as a whole: its grid an order of the shared JPEGs that no other video has
    (single JPEGs recur across videos), and for step 2, which shows the grid's middle frame, a
    middle frame of its own; so requests of different videos never hold equal frames (the engine
    shares a prefix only over equal frames; real benchmarks ask 2-10 questions a video:
    ``--per-video``)."""
    out: list[ScoreRequest] = []
    mids: dict[int, bytes] = {}
    for i, it in enumerate(items):
        v = i // per_video
        pick = np.random.default_rng(v).choice(len(frames), n_frames, replace=len(frames) < n_frames)
        grid = [frames[int(j)] for j in pick]
        if step == 2:
            if v not in mids:
                mids[v] = jpeg(100_000 + v)
            grid[n_frames // 2] = mids[v]
        out += build_item_requests(default_run_spec(step), replace(it, video_id=f"vid{v}"), grid).requests
    return out
