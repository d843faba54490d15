"""A two-benchmark pool with planted duplicates, and an embedder wrapper that counts encodes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchcheck.dedup import SentenceEmbedder
from benchcheck.dedup.model import Embeddings

OPTS = ["a cup", "a phone", "a book", "a pen"]
DOOR = ["she sits down", "she leaves", "she waves", "she laughs"]
CAR = ["red", "blue", "green", "black"]
COUNT = ["1", "2", "3", "4"]

ALPHA = [
    ("alpha_1", "What is the man holding in his hand?", OPTS, "v1"),
    ("alpha_2", "What is the man  holding in his hand?", OPTS, "v1"),  # exact (whitespace collapses)
    ("alpha_3", "What does the man hold in his hand?", ["a phone", "a cup", "a pen", "a book"], "v1"),  # near
    ("alpha_4", "What is the man holding in his hand?", OPTS, "v2"),  # template over another video: kept
    ("alpha_5", "What does the woman do after opening the door?", DOOR, "v1"),
    ("alpha_6", "What does the woman do before opening the door?", DOOR, "v1"),  # guard word: kept
    ("alpha_7", "What color is the car that passes by?", CAR, None),
    ("alpha_8", "What is the color of the car passing by?", ["blue", "red", "black", "green"], None),  # near
    ("alpha_10", "How many people appear in the video?", COUNT, "v3"),
]
BETA = [
    ("beta_1", "What does the woman do after opening the door?", DOOR, "v1"),  # exact, cross
    ("beta_2", "How many people are shown in the video?", ["2", "1", "4", "3"], "v3"),  # near, cross
    ("beta_3", "What color is the car that passes by?", CAR, None),  # exact, cross (neither has a video)
    ("beta_4", "What is the woman holding in her hand?", OPTS, "v1"),  # another subject: kept
    ("beta_5", "Why did the boy run to the window?", ["to see the rain", "to call his mother"], None),
]
# Golds are index 0 except where a near duplicate reorders its options: there the gold is the kept
# item's gold text at its new place, so the pair is a plain near duplicate, not a gold conflict.
GOLDS = {"alpha_3": 1, "alpha_8": 1, "beta_2": 1}
EXPECTED = {
    "alpha_2": ("exact", "alpha_1", "within"),
    "alpha_3": ("near", "alpha_1", "within"),
    "alpha_8": ("near", "alpha_7", "within"),
    "beta_1": ("exact", "alpha_5", "cross"),
    "beta_2": ("near", "alpha_10", "cross"),
    "beta_3": ("exact", "alpha_7", "cross"),
}


def write_bench(path: Path, rows: Sequence[tuple[str, str, list[str], str | None]]) -> Path:
    with path.open("w") as f:
        for item_id, q, opts, video in rows:
            f.write(json.dumps({"item_id": item_id, "question": q, "options": opts, "answer": GOLDS.get(item_id, 0),
                                "video_id": video}) + "\n")
    return path


class CountingEmbedder:
    """The real model, counting the texts it is asked to encode (to prove cache reuse)."""

    def __init__(self, inner: SentenceEmbedder, fingerprint: str | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.fingerprint = fingerprint or inner.fingerprint
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> Embeddings:
        self.texts.extend(texts)
        out: Embeddings = np.asarray(self.inner.encode(texts), dtype=np.float32)
        return out
