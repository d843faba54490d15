"""Constructed sweep results of known truth, for the tests and ``benchmarks/sweep_validity.py``.

A :class:`World` says how answers arise; :func:`world_rows` writes one benchmark's rows in the
sweep's own CSV columns (``results.COLUMNS``), so they go through the same reader and analysis as
real results. Items are spread round-robin over ``n_videos`` videos.

* ``coin``: every answer (item x condition) is an independent fair coin flip.
* ``sticky``: closer to a real model. Each item has a probability of being right
  ``q = 0.25 + 0.5 * sigmoid(u_video + e_item)`` (u, e normal with sd ``video_sd``, ``item_sd``), so
  items of one video are correlated and ``1 - q >= 0.25``; the item has one answer (right with
  probability q) that each condition keeps with probability ``keep`` and otherwise redraws.
  Every condition therefore has the same accuracy q per item.

A planted effect ``delta`` on a condition turns each wrong answer right with probability
``delta / (1 - p)`` (p the item's probability of being right: 0.5 or q), so the condition's expected
accuracy is exactly ``delta`` above the base conditions' (``delta <= 0.25``). ``pixels`` plants on
``v_32_s448``; ``frames`` on the rungs named in ``frames_rungs``; the true effects are then
``pixels`` and ``frames`` (the max over rungs of the planted deltas).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchcheck.sweep.results import COLUMNS

CONDITIONS = ("v_8_s224", "v_32_s168", "v_32_s448", "v_128_s224", "v_fps0.25_s224", "v_fps0.5_s224", "v_fps1_s224",
              "v_fps2_s224")
STAMP = "2026-01-01T00:00:00Z"


@dataclass(frozen=True, slots=True)
class World:
    n_items: int = 300
    n_videos: int = 300
    kind: str = "coin"  # coin | sticky
    keep: float = 0.8
    video_sd: float = 1.0
    item_sd: float = 1.0
    pixels: float = 0.0
    frames: float = 0.0
    frames_rungs: tuple[str, ...] = ("v_128_s224",)

    def __post_init__(self) -> None:
        if self.kind not in ("coin", "sticky") or not 0 <= self.pixels <= 0.25 or not 0 <= self.frames <= 0.25:
            raise ValueError(f"bad world: {self}")

    def delta(self, cond: str) -> float:
        if cond == "v_32_s448":
            return self.pixels
        return self.frames if cond in self.frames_rungs else 0.0


def world_answers(w: World, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(n_items x len(CONDITIONS) 0/1 answers, item -> video index)."""
    video = np.arange(w.n_items) % w.n_videos
    k = len(CONDITIONS)
    if w.kind == "coin":
        p = np.full(w.n_items, 0.5)
        right = rng.random((w.n_items, k)) < 0.5
    else:
        u = rng.normal(0.0, w.video_sd, w.n_videos)[video]
        p = 0.25 + 0.5 / (1.0 + np.exp(-(u + rng.normal(0.0, w.item_sd, w.n_items))))
        own = rng.random(w.n_items) < p
        redraw = rng.random((w.n_items, k)) < p[:, None]
        right = np.where(rng.random((w.n_items, k)) < w.keep, own[:, None], redraw)
    for j, cond in enumerate(CONDITIONS):
        d = w.delta(cond)
        if d > 0:
            flip = rng.random(w.n_items) < d / (1.0 - p)
            right[:, j] |= flip
    return right.astype(np.int64), video


def world_rows(w: World, bench: str, rng: np.random.Generator) -> list[dict[str, str]]:
    """One benchmark's rows, in the columns the sweep writes (gold A; a wrong answer is B)."""
    right, video = world_answers(w, rng)
    rows = []
    for j, cond in enumerate(CONDITIONS):
        for i in range(w.n_items):
            ok = int(right[i, j])
            row = dict.fromkeys(COLUMNS, "")
            row.update(bench=bench, item_id=f"{bench}_{i}", condition=cond, status="ok", pred="A" if ok else "B",
                       gold="A", correct=str(ok), video_id=f"{bench}_vid{video[i]}", written_at=STAMP)
            rows.append(row)
    return rows
