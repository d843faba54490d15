"""Synthetic requests of the screening steps, built with the project's own request builder."""

from __future__ import annotations

import csv
import io
import json
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


def write_grid(cache: Path, video_id: str, frames: Sequence[bytes]) -> None:
    """One video's grid in the frame cache layout ``frames extract --plan v32`` writes:
    ``<cache>/<video_id>/frame_<k>.jpg`` and ``frames.json`` (448 px long side, q85)."""
    folder = cache / video_id
    folder.mkdir(parents=True, exist_ok=True)
    files = [f"frame_{k}.jpg" for k in range(len(frames))]
    for name, data in zip(files, frames, strict=True):
        (folder / name).write_bytes(data)
    n = len(frames)
    meta = {"video_id": video_id, "plan": "v32", "long_side": 448, "short_side": None, "jpeg_quality": 85,
            "n_stored": 2 * n, "positions": list(range(n)), "indices": [2 * k for k in range(n)],
            "timestamps": [float(k) for k in range(n)], "sizes": [[448, 256]] * n, "files": files}
    (folder / "frames.json").write_text(json.dumps(meta))


def nextqa_like_csv(path: Path, n: int, seed: int = 1, video_ids: Sequence[str] = (), video0: int = 1000) -> Path:
    """A benchmark file in the NExT-QA CSV layout with questions and options of its usual length
    (rows name videos ``video0`` on: NExT-QA's ids are video + qid, so two files need apart ranges);
    with ``video_ids`` (one per row) a ``video_id`` column names each row's normalized video."""
    rng = np.random.default_rng(seed)
    subj = ["the boy in blue", "the lady", "the man with the hat", "the baby", "the dog", "the girl in pink"]
    verbs = ["pick up the toy", "turn around", "walk to the sofa", "laugh", "look at the camera", "stand up"]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["video", "frame_count", "width", "height", "question", "answer", "qid", "type",
                    "a0", "a1", "a2", "a3", "a4", *(["video_id"] if video_ids else [])])
        for i in range(n):
            s, v = subj[i % len(subj)], verbs[(i * 7) % len(verbs)]
            q = f"why did {s} {v} after {subj[(i + 2) % len(subj)]} {verbs[(i + 3) % len(verbs)]}"
            opts = [f"{rng.choice(['to', 'because', 'so that'])} {words(rng, int(rng.integers(3, 8)))}"
                    for _ in range(5)]
            w.writerow([video0 + i, 900, 640, 360, q, int(rng.integers(0, 5)), i, "CW", *opts,
                        *([video_ids[i]] if video_ids else [])])
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
