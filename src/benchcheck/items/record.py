"""The item record."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from benchcheck.protocol import MAX_OPTIONS

ItemFormat = Literal["mc", "open"]


@dataclass(frozen=True, slots=True)
class Item:
    """One multiple-choice item.

    ``options`` are the option texts with any sequential position letters stripped;
    ``answer`` is the index of the gold option. ``format="open"`` marks items with more than
    26 options: kept in the pool but not screened by letter. ``source_file`` / ``source_line``
    say where a loader read it (not part of its identity).
    """

    item_id: str
    bench: str
    question: str
    options: tuple[str, ...]
    answer: int
    video_id: str | None = None
    task: str | None = None
    duration_s: float | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # Where the loader read it (file, and line or row): kept beside the decisions in pool_items.
    source_file: str | None = field(default=None, compare=False, hash=False)
    source_line: str | None = field(default=None, compare=False, hash=False)

    @property
    def format(self) -> ItemFormat:
        return "open" if len(self.options) > MAX_OPTIONS else "mc"

    @property
    def has_frames_source(self) -> bool:
        """True when the item names a normalized video (so it can have frames)."""
        return video_has_frames(self.video_id)

    @property
    def fingerprint(self) -> str:
        """What the item asks, hashed: question, options in order and gold. Every row carries it
        (``item_hash``): a row of an item edited since (a gold fixed, an option dropped, a
        question reworded) is stale, never done (docs/PROTOCOL.md, "Run specs"). The video is
        not in it: an item's ``video_id`` changes from its ``k:`` placeholder to the content hash
        when its video is normalized, which edits nothing."""
        asked = [self.question, list(self.options), self.answer]
        # surrogatepass: a JSON item file may hold a lone surrogate (an escaped half of an emoji),
        # which the loader keeps and plain UTF-8 cannot encode; every other text hashes as before.
        text = json.dumps(asked, ensure_ascii=False).encode("utf-8", "surrogatepass")
        return hashlib.sha1(text).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {
            "item_id": self.item_id,
            "bench": self.bench,
            "question": self.question,
            "options": list(self.options),
            "answer": self.answer,
            "video_id": self.video_id,
            "task": self.task,
            "duration_s": self.duration_s,
            "format": self.format,
            "meta": self.meta,
        }


def key_video_id(key: str) -> str:
    """The placeholder id of a video that is not normalized yet: ``"k:" + sha1(key)[:16]``."""
    return "k:" + hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def video_has_frames(video_id: str | None) -> bool:
    """A video can have frames only once normalized: not null and not a ``k:`` placeholder."""
    return bool(video_id) and not str(video_id).startswith("k:")


def fingerprints(items: Iterable[Item]) -> dict[tuple[str, str], str]:
    """(bench, item id) -> the item's ``fingerprint`` now: what rows are judged against."""
    return {(i.bench, i.item_id): i.fingerprint for i in items}
